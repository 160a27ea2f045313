// One replica of an application with an exclusive job, for the cluster tests, on Redis (STORE=redis, the
// default: REDIS_URL, KEY_PREFIX) or PostgreSQL (STORE=postgres: DATABASE_URL, TABLE). Every EVERY ms (50),
// while it holds the lease, it runs RUN_MS ms (20) and records [replica, fencingToken, start, end, slot, wallStart] in
// the store (the list <KEY_PREFIX>runs, or the table <TABLE>_log), with times in ms on the machine's clock
// (performance.timeOrigin + performance.now()), the slot as ctx.scheduledDate gives it, and the start again by
// Date.now(), the wall clock the scheduler reads slots by; the job is named JOB
// ('report'), its delivery DELIVERY ('atMostOnce'). It prints "started <slot> attempt <attempt>" as a run starts,
// "acquired <token>", "lost" and "missed <count>" as the lease comes and goes and slots are dropped; when closed, it
// records ["closed", replica, time] once its lease is released. Its connection is closed by the docs/replicas.md
// recipe, which cannot hang on a store that does not answer.
// Stored schedules (docs/schedules.md): HANDLERS names the @PeriodicHandler()s it has, of 'tenant-report' (which
// records its runs as above, with the schedule's name and ctx.data after them) and 'sync' (which does nothing),
// none by default. WRITE, a JSON array of definitions, makes it a writer: it upserts them by 'writer', prints
// "written" and closes. CHECK_IN, a monitor's address, gives the module's checkIns (docs/alerts.md).
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
  PeriodicHandler,
  PeriodicModule,
  PeriodicRegistry,
  PostgresCoordinator,
  RedisCoordinator,
} from '../../lib/index.js';

const { REPLICA = '?', STORE = 'redis', KEY_PREFIX = 'periodic:', TABLE = 'periodic_leases' } = process.env;
const LEASE_MS = Number(process.env.LEASE_MS ?? 600);
const EVERY = Number(process.env.EVERY ?? 50);
const RUN_MS = Number(process.env.RUN_MS ?? 20);
const JOB = process.env.JOB ?? 'report';
const DELIVERY = process.env.DELIVERY === 'atLeastOnce' ? 'atLeastOnce' : 'atMostOnce';
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
    // The recipe of docs/replicas.md: quit() waits for Redis, which one that is down never answers.
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
  @Periodic({ every: EVERY, exclusive: true, name: JOB, delivery: DELIVERY })
  async send({ fencingToken, signal, scheduledDate, attempt }: PeriodicContext): Promise<void> {
    const [start, wallStart] = [clock(), Date.now()];
    say(`started ${scheduledDate.getTime()} attempt ${attempt}`);
    await sleep(RUN_MS, undefined, { signal }).catch(() => undefined);
    await store.record('runs', [REPLICA, fencingToken, start, clock(), scheduledDate.getTime(), wallStart]);
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

@Injectable()
class TenantReports {
  @PeriodicHandler('tenant-report')
  async report({ fencingToken, signal, scheduledDate, data, name }: PeriodicContext): Promise<void> {
    const [start, wallStart] = [clock(), Date.now()];
    await sleep(RUN_MS, undefined, { signal }).catch(() => undefined);
    await store.record('runs', [
      REPLICA,
      fencingToken,
      start,
      clock(),
      scheduledDate.getTime(),
      wallStart,
      name,
      data,
    ]);
  }
}

@Injectable()
class Syncs {
  @PeriodicHandler('sync')
  sync(): void {}
}

const handlers = (process.env.HANDLERS ?? '').split(',');
@Module({
  imports: [
    PeriodicModule.forRoot({
      coordinator: store.coordinator,
      logger: false,
      ...(process.env.CHECK_IN === undefined ? {} : { checkIns: { url: process.env.CHECK_IN } }),
    }),
  ],
  providers: [
    Reports,
    ...(handlers.includes('tenant-report') ? [TenantReports] : []),
    ...(handlers.includes('sync') ? [Syncs] : []),
  ],
})
class AppModule {}

const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
app.enableShutdownHooks();
const events = app.get(PeriodicEvents);
events.on('leaseAcquired', ({ fencingToken }) => say(`acquired ${fencingToken}`));
events.on('leaseLost', ({ reason }) => say(`lost: ${reason}`));
events.on('missed', ({ count }) => say(`missed ${count}`));
say('ready');
if (process.env.WRITE !== undefined) {
  await app.get(PeriodicRegistry).schedules.upsertMany(JSON.parse(process.env.WRITE), { by: 'writer' });
  say('written');
  await app.close();
}
