// One replica of the fleet benchmark (bench/fleet.mjs), forked with an IPC channel. PEER 'nestjs-periodic':
// a Nest application whose JOBS exclusive jobs (`job-0` …) run every EVERY ms through one coordinator (STORE
// 'redis' at REDIS_URL with KEY_PREFIX, or 'postgres' at DATABASE_URL with TABLE; LEASE_MS; HISTORY 'off' to
// record no run). PEER 'bullmq':
// a BullMQ worker of the queue QUEUE, whose job schedulers the harness made. A run does nothing but count.
// STORED '1': the jobs are stored schedules (docs/schedules.md) of the handler `bench`, which every replica has;
// replica r0 writes them with `registry.schedules.upsertMany`, 10,000 at a time, before it says it is ready.
//
// Messages: the replica sends { ready } once up; { window: 'start' } starts counting (the CPU this process
// uses, and the slot of every run); { window: 'end' } answers { cpuMs, runs: { job: [slot, …] }, held };
// { held: true } answers { held }, the leases this replica holds now; { acquired: true } answers { acquired:
// { job: epoch ms } }, when it last took each lease.
import 'reflect-metadata';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  PeriodicEvents,
  PeriodicHandler,
  PeriodicModule,
  PeriodicRegistry,
  PostgresCoordinator,
  RedisCoordinator,
} from '../../dist/esm/index.js';

const env = process.env;
const JOBS = Number(env.JOBS);
const EVERY = Number(env.EVERY);
const LEASE_MS = Number(env.LEASE_MS ?? 10_000);

let counting = false;
let cpuAtStart;
/** The slots run while counting, by job. */
let runs = {};
const count = (job, slot) => {
  if (counting) (runs[job] ??= []).push(slot);
};

/** The leases this replica holds now: set by the nestjs-periodic peer. */
let held;
/** When this replica last took each lease, in epoch ms. */
const acquired = {};
const close = await (env.PEER === 'bullmq' ? bullmq() : periodic());
process.send({ ready: true });

process.on('message', async (message) => {
  if (message.window === 'start') {
    runs = {};
    counting = true;
    cpuAtStart = process.cpuUsage();
  } else if (message.window === 'end') {
    counting = false;
    const { user, system } = process.cpuUsage(cpuAtStart);
    process.send({ cpuMs: (user + system) / 1000, runs, held: held?.() });
  } else if (message.held) {
    process.send({ held: held?.() });
  } else if (message.acquired) {
    process.send({ acquired });
  } else if (message.close) {
    await close();
    process.send({ closed: true });
    process.exit(0);
  }
});

async function periodic() {
  let connection;
  let coordinator;
  if (env.STORE === 'postgres') {
    // Connections kept open: the harness counts the CPU of the server's processes.
    const options = { connectionString: env.DATABASE_URL, max: 4, idleTimeoutMillis: 0 };
    connection = new pg.Pool(options).on('error', () => undefined);
    coordinator = new PostgresCoordinator({ pool: connection, table: env.TABLE, leaseMs: LEASE_MS });
  } else {
    connection = new Redis(env.REDIS_URL).on('error', () => undefined);
    coordinator = new RedisCoordinator({ client: connection, keyPrefix: env.KEY_PREFIX, leaseMs: LEASE_MS });
  }

  class Jobs {
    constructor(registry) {
      this.registry = registry;
    }

    /** A stored schedule's run. */
    run({ name, scheduledDate }) {
      count(name, scheduledDate.getTime());
    }

    onApplicationBootstrap() {
      if (env.STORED === '1') return;
      for (let i = 0; i < JOBS; i++) {
        const job = `job-${i}`;
        this.registry.add(job, ({ scheduledDate }) => count(job, scheduledDate.getTime()), {
          every: EVERY,
          exclusive: true,
        });
      }
    }
  }
  Injectable()(Jobs);
  Reflect.defineMetadata('design:paramtypes', [PeriodicRegistry], Jobs);
  if (env.STORED === '1') {
    PeriodicHandler('bench')(Jobs.prototype, 'run', Object.getOwnPropertyDescriptor(Jobs.prototype, 'run'));
  }
  class AppModule {}
  // HISTORY=off: no run recorded (the module's `history: false`), to weigh what the history costs.
  const history = env.HISTORY === 'off' ? false : undefined;
  Module({ imports: [PeriodicModule.forRoot({ coordinator, logger: false, history })], providers: [Jobs] })(
    AppModule,
  );

  const app = await NestFactory.createApplicationContext(AppModule, { logger: ['error', 'warn'] });
  const registry = app.get(PeriodicRegistry);
  app.get(PeriodicEvents).on('leaseAcquired', ({ name }) => {
    acquired[name] = Date.now();
  });
  held = () => registry.statusAll().filter((job) => job.lease?.held).length;
  if (env.STORED === '1' && env.REPLICA === 'r0') {
    for (let from = 0; from < JOBS; from += 10_000) {
      const batch = Array.from({ length: Math.min(10_000, JOBS - from) }, (_, i) => ({
        name: `job-${from + i}`,
        handler: 'bench',
        every: EVERY,
      }));
      await registry.schedules.upsertMany(batch, { by: 'bench' });
    }
  }
  return async () => {
    await app.close();
    await (env.STORE === 'postgres' ? connection.end() : connection.quit());
  };
}

async function bullmq() {
  const { Worker } = await import('bullmq');
  const connection = new Redis(env.REDIS_URL, { maxRetriesPerRequest: null });
  const worker = new Worker(
    env.QUEUE,
    async (job) => {
      // A scheduler's job is made for its slot, the time it is due, which ends its id: repeat:<name>:<ms>.
      count(job.name, Number(job.id.split(':').at(-1)));
    },
    { connection, concurrency: 100, prefix: env.KEY_PREFIX },
  );
  await worker.waitUntilReady();
  return async () => {
    await worker.close();
    await connection.quit();
  };
}
