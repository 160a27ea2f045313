// What stored schedules cost at scale (SPEC 23), on one Redis and on one PostgreSQL:
// - `upsertMany` of 10,000 schedules, in one call (target: under 2 s);
// - a replica that boots with N stored schedules, in a fresh process: from `init()` to the last of them
//   registered (target: 100,000 under 10 s), and its heap per stored schedule (target: under 200 B for one it does
//   not hold), the heap after the boot against the heap before the application was made, both after a GC.
//
//   npm run build && node --expose-gc bench/schedules.mjs [--count 100000]   (writes bench/results/schedules.json)
import 'reflect-metadata';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
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
function storeOf(kind, suffix = `${process.pid}_${Date.now().toString(36)}`) {
  const closing = [];
  if (kind === 'redis') {
    const keyPrefix = `bench-schedules-${suffix}:`;
    return {
      suffix,
      closing,
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
    suffix,
    closing,
    coordinator() {
      const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4 }).on('error', () => undefined);
      closing.push(() => pool.end());
      return new PostgresCoordinator({ pool, table });
    },
    async clean() {
      for (const close of closing.splice(0)) await close();
      const pool = new pg.Pool({ connectionString: DATABASE_URL });
      const tables = ['', '_members', '_audit', '_runs', '_summary', '_trigger', '_stored', '_incident'];
      await pool.query(`DROP TABLE IF EXISTS ${tables.map((end) => `"${table}${end}"`).join(', ')}`);
      await pool.end();
    },
  };
}

/**
 * An application with the handler `tenant-report` on `coordinator`; `handler: false` has another instead, so that
 * it reads the stored schedules and holds none of them.
 */
async function application(coordinator, replica, handler = true) {
  class Reports {
    send() {}
  }
  PeriodicHandler(handler ? 'tenant-report' : 'invoice-reminder')(
    Reports.prototype,
    'send',
    Object.getOwnPropertyDescriptor(Reports.prototype, 'send'),
  );
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

if (process.argv.includes('--reader')) {
  const at = process.argv.indexOf('--reader');
  const store = storeOf(process.argv[at + 1], process.argv[at + 2]);
  const before = heap();
  const began = performance.now();
  const reader = await application(
    store.coordinator(),
    'reader',
    !process.argv.includes('--without-handler'),
  );
  const registry = reader.get(PeriodicRegistry);
  while (registry.getAll().length < COUNT) await sleep(100);
  const ms = Math.round(performance.now() - began);
  const bytes = Math.round((heap() - before) / COUNT);
  await reader.close();
  for (const close of store.closing) await close();
  console.log(JSON.stringify({ ms, bytes }));
  process.exit(0);
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

    // A replica that boots with them, alone: it holds every one. Then one that lacks their handler: it holds none.
    const boot = (...more) => {
      const reader = spawnSync(
        process.execPath,
        [
          '--expose-gc',
          import.meta.filename,
          '--reader',
          kind,
          store.suffix,
          '--count',
          String(COUNT),
          ...more,
        ],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
      );
      return JSON.parse(reader.stdout.trim().split('\n').at(-1));
    };
    const booted = boot();
    figures.boot = { ms: booted.ms };
    figures.heapPerSchedule = { bytes: booted.bytes, note: 'every schedule held by the one replica' };
    figures.heapPerScheduleNotHeld = {
      bytes: boot('--without-handler').bytes,
      note: 'a replica that lacks their handler, and holds none',
    };
  } catch (error) {
    figures.error = String(error?.stack ?? error);
  } finally {
    await store.clean();
  }
  results.stores[kind] = figures;
  console.log(kind, JSON.stringify(figures));
}
// The fleet's figures (bench/fleet.mjs --stored) are kept as they were.
const path = join(import.meta.dirname, 'results', 'schedules.json');
const fleet = existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')).fleet : undefined;
writeFileSync(path, `${JSON.stringify({ ...results, fleet }, null, 2)}\n`);
