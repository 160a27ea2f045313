// A store that lost the fleet's records (SPEC 22), on Redis (its keys deleted, as FLUSHALL or a restart without
// persistence leaves it) and on PostgreSQL (the lease table truncated): the application logs one error that names
// what was lost and emits storeReset once; the job paused before runs again, said rather than silent.
import { afterAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import {
  Periodic,
  type PeriodicCoordinator,
  PeriodicModule,
  PostgresCoordinator,
  RedisCoordinator,
} from '../../lib/index.js';
import { useApps } from '../nest/helpers.js';
import { describeWithPostgres, dropTable, postgresPool, uniqueTable } from '../postgres/postgres.js';
import { describeWithRedis, dropKeys, redisClient, uniquePrefix } from '../redis/redis.js';

const LEASE_MS = 1500;

/** A store from the test's side: a coordinator of it, and how its data is lost. */
interface Store {
  name: string;
  coordinator(): PeriodicCoordinator;
  lose(): Promise<void>;
  tearDown(): Promise<void>;
}

function redisStore(): Store {
  const prefix = uniquePrefix();
  const clients: Redis[] = [];
  const client = () => {
    clients.push(redisClient());
    return clients.at(-1)!;
  };
  return {
    name: 'RedisCoordinator',
    coordinator: () => new RedisCoordinator({ client: client(), keyPrefix: prefix, leaseMs: LEASE_MS }),
    // What FLUSHALL does to the fleet's keys, without touching the other tests' keys.
    lose: async () => {
      const redis = client();
      await dropKeys(redis, prefix);
    },
    tearDown: async () => {
      await dropKeys(clients[0] ?? client(), prefix);
      await Promise.all(clients.map((redis) => redis.quit()));
    },
  };
}

function postgresStore(): Store {
  const table = uniqueTable();
  let pool: pg.Pool | undefined;
  const poolOf = () => (pool ??= postgresPool());
  return {
    name: 'PostgresCoordinator',
    coordinator: () => new PostgresCoordinator({ pool: poolOf(), table, leaseMs: LEASE_MS }),
    lose: async () => {
      await poolOf().query(`TRUNCATE "${table}", "${table}_audit", "${table}_runs", "${table}_summary"`);
    },
    tearDown: async () => {
      await dropTable(poolOf(), table);
      await poolOf().end();
    },
  };
}

const stores: [string, () => Store, (name: string, tests: () => void) => void][] = [
  ['Redis', redisStore, await describeWithRedis()],
  ['PostgreSQL', postgresStore, await describeWithPostgres()],
];

describe.each(stores)('on %s', (_, makeStore, describeStore) => {
  describeStore('a store that lost the fleet’s records', () => {
    const store = makeStore();
    const createApp = useApps();
    afterAll(() => store.tearDown());

    it('is logged once as an error naming what was lost, and emitted as storeReset; the paused job runs again', async () => {
      let runs = 0;
      @Injectable()
      class Reports {
        @Periodic({ every: 100, exclusive: true, name: 'report' })
        send(): void {
          runs++;
        }
      }
      const app = await createApp({
        imports: [PeriodicModule.forRoot({ coordinator: store.coordinator(), logger: false })],
        providers: [Reports],
      });
      await app.events.once('started');
      await app.registry.pause('report', { by: 'alice', note: 'the API is down' });
      // Paused for the fleet: two heartbeats later, nothing runs.
      await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
      const paused = runs;
      await new Promise((resolve) => setTimeout(resolve, LEASE_MS / 2));
      expect(runs).toBe(paused);

      const reset = app.events.once('storeReset');
      await store.lose();
      expect(await reset).toEqual({ type: 'storeReset', lost: ['pauses', 'audit', 'history'] });
      await app.events.once('started');
      expect(runs).toBeGreaterThan(paused);
      expect(await app.registry.audit('report')).toEqual([]);
      const errors = app.logs.periodic().filter((line) => line.startsWith('error:'));
      expect(errors).toEqual([
        `error: ${store.name} lost the fleet's records (pauses, audit, history): the store restarted without ` +
          'persistence, or was flushed or truncated. Jobs that the fleet had paused run again, and histories and ' +
          'audit trails start over. Keep them with the store’s persistence (docs/operations.md, "A store that ' +
          'lost its data")',
      ]);
      // Once per loss.
      await new Promise((resolve) => setTimeout(resolve, LEASE_MS));
      expect(app.seen.filter((event) => event.type === 'storeReset')).toHaveLength(1);
      await app.close();
    }, 30_000);
  });
});
