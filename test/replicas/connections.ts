// The stores of tests that run several replicas of an application in one process: a coordinator per replica,
// each on a connection of its own (one shared InMemoryCoordinator stands for a store), cleaned up after the test.
import type { Redis } from 'ioredis';
import type pg from 'pg';
import {
  InMemoryCoordinator,
  type PeriodicCoordinator,
  PostgresCoordinator,
  RedisCoordinator,
} from '../../lib/index.js';
import { dropTable, postgresPool, uniqueTable } from '../postgres/postgres.js';
import { dropKeys, redisClient, uniquePrefix } from '../redis/redis.js';

/** A store of a test: a coordinator per replica, each on a connection of its own. */
export interface ConnectedStore {
  coordinator(): PeriodicCoordinator;
  cleanUp(): Promise<void>;
}

export function inMemoryStore(leaseMs: number): ConnectedStore {
  const coordinator = new InMemoryCoordinator({ leaseMs });
  return { coordinator: () => coordinator, cleanUp: async () => undefined };
}

export function redisStore(leaseMs: number): ConnectedStore {
  const keyPrefix = uniquePrefix();
  const clients: Redis[] = [];
  return {
    coordinator: () => {
      const client = redisClient();
      clients.push(client);
      return new RedisCoordinator({ client, keyPrefix, leaseMs });
    },
    cleanUp: async () => {
      for (const client of clients) client.disconnect();
      const redis = redisClient();
      await dropKeys(redis, keyPrefix);
      await redis.quit();
    },
  };
}

export function postgresStore(leaseMs: number): ConnectedStore {
  const table = uniqueTable();
  const pools: pg.Pool[] = [];
  return {
    coordinator: () => {
      const pool = postgresPool();
      pools.push(pool);
      return new PostgresCoordinator({ pool, table, leaseMs });
    },
    cleanUp: async () => {
      for (const pool of pools) await pool.end();
      const pool = postgresPool();
      await dropTable(pool, table);
      await pool.end();
    },
  };
}
