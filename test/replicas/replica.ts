// One replica of an application with an exclusive job, for the cluster tests, on Redis (STORE=redis, the
// default: REDIS_URL, KEY_PREFIX) or PostgreSQL (STORE=postgres: DATABASE_URL, TABLE). Every 50 ms, while it
// holds the lease, it runs 20 ms and records [replica, fencingToken, start, end] in the store (the list
// <KEY_PREFIX>runs, or the table <TABLE>_log), with times in ms on the machine's clock (performance.timeOrigin +
// performance.now()). It prints "acquired <token>" and "lost" as the lease comes and goes; when closed, it
// records ["closed", replica, time] once its lease is released. Its connection is closed by the README's
// recipe, which cannot hang on a store that does not answer.
import { writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Module, type OnApplicationShutdown } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  Periodic,
  type PeriodicContext,
  type PeriodicCoordinator,
  PeriodicEvents,
  PeriodicModule,
  PostgresCoordinator,
  RedisCoordinator,
} from '../../lib/index.js';

const { REPLICA = '?', STORE = 'redis', KEY_PREFIX = 'periodic:', TABLE = 'periodic_leases' } = process.env;
const LEASE_MS = Number(process.env.LEASE_MS ?? 600);
const clock = () => performance.timeOrigin + performance.now();
const say = (line: string): void => {
  writeSync(1, `${line}\n`);
};

/** The store: the coordinator, where entries are recorded, and how the connection closes. */
interface Store {
  coordinator: PeriodicCoordinator;
  record(list: 'runs' | 'closed', entry: unknown[]): Promise<unknown>;
  close(): Promise<unknown>;
}

function redisStore(): Store {
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379').on('error', () => undefined);
  return {
    coordinator: new RedisCoordinator({ client: redis, keyPrefix: KEY_PREFIX, leaseMs: LEASE_MS }),
    record: (list, entry) => redis.rpush(`${KEY_PREFIX}${list}`, JSON.stringify(entry)),
    // The README's recipe: quit() waits for Redis, which one that is down never answers.
    close: async () => {
      await Promise.race([redis.quit().catch(() => undefined), sleep(1000)]);
      redis.disconnect();
    },
  };
}

function postgresStore(): Store {
  const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL }).on('error', () => undefined);
  return {
    coordinator: new PostgresCoordinator({ pool, table: TABLE, leaseMs: LEASE_MS }),
    record: (list, entry) =>
      pool.query(`INSERT INTO "${TABLE}_log" (list, entry) VALUES ($1, $2)`, [list, JSON.stringify(entry)]),
    close: () => Promise.race([pool.end().catch(() => undefined), sleep(1000)]),
  };
}

const store = STORE === 'postgres' ? postgresStore() : redisStore();

@Injectable()
class Reports implements OnApplicationShutdown {
  @Periodic({ every: 50, exclusive: true, name: 'report' })
  async send({ fencingToken, signal }: PeriodicContext): Promise<void> {
    const start = clock();
    await sleep(20, undefined, { signal }).catch(() => undefined);
    await store.record('runs', [REPLICA, fencingToken, start, clock()]);
  }

  async onApplicationShutdown(): Promise<void> {
    // Recorded for the test, which waits for it no longer than the connection's own close.
    await Promise.race([
      store.record('closed', ['closed', REPLICA, clock()]).catch(() => undefined),
      sleep(1000),
    ]);
    await store.close();
  }
}

@Module({
  imports: [PeriodicModule.forRoot({ coordinator: store.coordinator, logger: false })],
  providers: [Reports],
})
class AppModule {}

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
app.enableShutdownHooks();
const events = app.get(PeriodicEvents);
events.on('leaseAcquired', ({ fencingToken }) => say(`acquired ${fencingToken}`));
events.on('leaseLost', ({ reason }) => say(`lost: ${reason}`));
say('ready');
