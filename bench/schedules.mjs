// What stored schedules cost at scale (SPEC 23), on one Redis and on one PostgreSQL:
// - `upsertMany` of 10,000 schedules, in one call (target: under 2 s);
// - a replica that boots with N stored schedules: from `init()` to the last of them registered (target: 100,000
//   under 10 s), and its heap per stored schedule it does not hold (target: under 200 B), against the same
//   application with none.
//
//   npm run build && node --expose-gc bench/schedules.mjs [--count 100000]   (writes bench/results/schedules.json)
import 'reflect-metadata';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  PeriodicHandler,
  PeriodicModule,
  PeriodicRegistry,
  PostgresCoordinator,
  RedisCoordinator,
} from '../dist/esm/index.js';

const at = process.argv.indexOf('--count');
const COUNT = at === -1 ? 100_000 : Number(process.argv[at + 1]);
const BATCH = 10_000;
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const results = { date: new Date().toISOString(), node: process.version, count: COUNT, stores: {} };

/** A store of the run: a coordinator for each replica (a connection of its own), and its cleaning up. */
function storeOf(kind) {
  const suffix = `${process.pid}_${Date.now().toString(36)}`;
  const closing = [];
  if (kind === 'redis') {
    const keyPrefix = `bench-schedules-${suffix}:`;
    return {
      coordinator() {
        const client = new Redis(REDIS_URL).on('error', () => undefined);
        closing.push(() => client.quit());
        return new RedisCoordinator({ client, keyPrefix });
      },
      async clean() {
        for (const close of closing.splice(0)) await close();
        const redis = new Redis(REDIS_URL);
        let cursor = '0';
        do {
          const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1000);
          if (keys.length > 0) await redis.del(...keys);
          cursor = next;
        } while (cursor !== '0');
        await redis.quit();
      },
    };
  }
  const table = `bench_schedules_${suffix}`;
  return {
    coordinator() {
      const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 }).on('error', () => undefined);
      closing.push(() => pool.end());
      return new PostgresCoordinator({ pool, table });
    },
    async clean() {
      for (const close of closing.splice(0)) await close();
      const pool = new pg.Pool({ connectionString: DATABASE_URL });
      const tables = ['', '_members', '_audit', '_runs', '_summary', '_trigger', '_stored'];
      await pool.query(`DROP TABLE IF EXISTS ${tables.map((end) => `"${table}${end}"`).join(', ')}`);
      await pool.end();
    },
  };
}

/** An application with the handler `tenant-report` on `coordinator`; `handler: false` has none. */
async function application(coordinator, replica, handler = true) {
  class Reports {
    send() {}
  }
  if (handler) {
    PeriodicHandler('tenant-report')(
      Reports.prototype,
      'send',
      Object.getOwnPropertyDescriptor(Reports.prototype, 'send'),
    );
  }
  Injectable()(Reports);
  class AppModule {}
  Module({
    imports: [PeriodicModule.forRoot({ coordinator, replica, logger: false })],
    providers: [Reports],
  })(AppModule);
  return NestFactory.createApplicationContext(AppModule, { logger: ['error'] });
}

function heap() {
  globalThis.gc?.();
  globalThis.gc?.();
  return process.memoryUsage().heapUsed;
}

for (const kind of ['redis', 'postgres']) {
  const store = storeOf(kind);
  const figures = {};
  try {
    const writer = await application(store.coordinator(), 'writer');
    const registry = writer.get(PeriodicRegistry);
    const batches = [];
    for (let from = 0; from < COUNT; from += BATCH) {
      const definitions = Array.from({ length: Math.min(BATCH, COUNT - from) }, (_, i) => ({
        name: `report:tenant-${from + i}`,
        handler: 'tenant-report',
        cron: `${(from + i) % 60} 8 * * 1-5`,
        timezone: 'Europe/Paris',
        data: { tenantId: `tenant-${from + i}` },
      }));
      const began = performance.now();
      await registry.schedules.upsertMany(definitions, { by: 'bench' });
      batches.push(performance.now() - began);
    }
    figures.upsertMany10k = {
      ms: Math.round(Math.min(...batches)),
      worstMs: Math.round(Math.max(...batches)),
    };
    await writer.close();

    // A replica without the handler has the jobs and holds none: its heap per schedule.
    const before = heap();
    const began = performance.now();
    const reader = await application(store.coordinator(), 'reader', true);
    const readerRegistry = reader.get(PeriodicRegistry);
    while (readerRegistry.getAll().length < COUNT) await sleep(20);
    figures.boot = { ms: Math.round(performance.now() - began) };
    const after = heap();
    figures.heapPerSchedule = {
      bytes: Math.round((after - before) / COUNT),
      note: 'every schedule held or competed for by one replica',
    };
    await reader.close();
  } catch (error) {
    figures.error = String(error?.stack ?? error);
  } finally {
    await store.clean();
  }
  results.stores[kind] = figures;
  console.log(kind, JSON.stringify(figures));
}
writeFileSync(
  join(import.meta.dirname, 'results', 'schedules.json'),
  `${JSON.stringify(results, null, 2)}\n`,
);
