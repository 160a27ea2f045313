// What one view of the fleet costs (SPEC 17, 18), beside the job without it:
// - triggers asked of a replica without the lease: from the call to the run's start on the holder, on Redis and
//   PostgreSQL (two Nest applications in this process, each with its own connection, `leaseMs` 10 s);
// - run history kept in memory: the heap of 10,000 jobs that keep 100 runs each, and what recording costs a run
//   (1,000 jobs), against `history: false`;
// - the store's round trips per replica per second and CPU per job-second with history on and off, through the
//   fleet harness (bench/fleet.mjs): 1,000 jobs every second in one replica, on Redis and PostgreSQL, and 2,000
//   across four replicas on Redis.
//
//   npm run build && node --expose-gc bench/fleet-view.mjs      (writes bench/results/fleet-view.json)
//   node --expose-gc bench/fleet-view.mjs --memory-only         (the figures of the history in memory again)
import 'reflect-metadata';
import { spawn, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Redis } from 'ioredis';
import pg from 'pg';
import {
  Periodic,
  PeriodicModule,
  PeriodicRegistry,
  PeriodicScheduler,
  PostgresCoordinator,
  RedisCoordinator,
} from '../dist/esm/index.js';

const TRIGGERS = Number(process.env.TRIGGERS ?? 20);
const results = { date: new Date().toISOString(), node: process.version, triggers: {}, history: {} };

const only = process.argv.includes('--memory-only');
if (!only) for (const store of ['redis', 'postgres']) results.triggers[store] = await triggers(store);
results.history = await memory();
results.recording = [];
for (const [store, jobs, replicas] of only
  ? []
  : [
      ['redis', 1000, 1],
      ['postgres', 1000, 1],
      ['redis', 2000, 4],
    ]) {
  for (const history of ['on', 'off']) results.recording.push(fleet({ store, jobs, replicas, history }));
}
// With --memory-only, the other figures are those of the last full run.
const path = join(import.meta.dirname, 'results', 'fleet-view.json');
const kept = only ? { ...JSON.parse(readFileSync(path, 'utf8')), history: results.history } : results;
writeFileSync(path, `${JSON.stringify(kept, null, 2)}\n`);
console.log(JSON.stringify(results, null, 2));

/**
 * Two replicas of an application whose exclusive job runs every hour (no timer run comes in the bench); from the
 * replica without the lease, TRIGGERS triggers one after the other, each after a random pause of up to a second:
 * the time from the call to the run's start, in ms (one process, one clock).
 */
async function triggers(store) {
  const server = store === 'redis' ? await redisServer() : undefined;
  const table = `bench_view_${process.pid}_${Date.now()}`;
  const starts = [];
  const connections = [];
  const apps = [];
  for (const replica of ['a', 'b']) {
    let coordinator;
    if (store === 'redis') {
      const client = new Redis(server.url).on('error', () => undefined);
      connections.push(() => client.quit());
      coordinator = new RedisCoordinator({ client, keyPrefix: 'view:' });
    } else {
      const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
      const pool = new pg.Pool({ connectionString: url, max: 2 }).on('error', () => undefined);
      connections.push(() => pool.end());
      coordinator = new PostgresCoordinator({ pool, table });
    }
    class Report {
      send() {
        starts.push(performance.now());
      }
    }
    Periodic({ every: 3_600_000, exclusive: true, name: 'report' })(
      Report.prototype,
      'send',
      Object.getOwnPropertyDescriptor(Report.prototype, 'send'),
    );
    Injectable()(Report);
    class AppModule {}
    Module({
      imports: [PeriodicModule.forRoot({ coordinator, replica, logger: false })],
      providers: [Report],
    })(AppModule);
    apps.push(await NestFactory.createApplicationContext(AppModule, { logger: ['error'] }));
  }
  const registries = apps.map((app) => app.get(PeriodicRegistry));
  // Once the spread has settled: the first replica takes the lease alone, the second may take it over.
  await sleep(12_000);
  const other = registries.find((registry) => registry.status('report').lease?.held === false);
  const latencies = [];
  let noHolder = 0;
  for (let i = 0; i < TRIGGERS; i++) {
    // Anywhere in the holder's heartbeat period (leaseMs / 3), which carries the trigger.
    await sleep(Math.random() * 3400);
    const asked = performance.now();
    const result = await other.trigger('report', { by: 'bench' });
    if (!result.ok) noHolder++;
    else latencies.push(starts.at(-1) - asked);
  }
  for (const app of apps) await app.close();
  for (const close of connections) await close();
  if (store === 'postgres') {
    const pool = new pg.Pool({
      connectionString: process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    });
    const tables = ['', '_members', '_audit', '_runs', '_summary', '_trigger', '_stored', '_incident'].map(
      (suffix) => `"${table}${suffix}"`,
    );
    await pool.query(`DROP TABLE IF EXISTS ${tables.join(', ')}`);
    await pool.end();
  }
  server?.stop();
  latencies.sort((a, b) => a - b);
  return {
    leaseMs: 10_000,
    triggers: TRIGGERS,
    notRun: noHolder,
    p50Ms: Math.round(latencies[Math.floor(latencies.length / 2)]),
    maxMs: Math.round(latencies.at(-1)),
  };
}

/** A scenario of the fleet harness, its figures as it prints them. */
function fleet({ store, jobs, replicas, history }) {
  const args = [
    '--store',
    store,
    '--jobs',
    jobs,
    '--replicas',
    replicas,
    '--every',
    1000,
    '--history',
    history,
  ];
  const { stdout } = spawnSync(
    process.execPath,
    [join(import.meta.dirname, 'fleet.mjs'), ...args.map(String)],
    {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const result = JSON.parse(stdout.slice(stdout.lastIndexOf('{\n  "store"')));
  const keys = ['store', 'jobs', 'replicas', 'history', 'roundTripsPerReplicaS', 'storeCpuUsPerJobSecond'];
  return Object.fromEntries(
    [...keys, 'commandsPerJobSecond', 'slotsRan', 'slotsTwice'].map((key) => [key, result[key]]),
  );
}

/**
 * Jobs that are not exclusive, ticked by hand, with the history on (100 runs each) and off: the heap that 10,000
 * such jobs keep once each has 100 runs (after a full garbage collection), and the time a tick and its run take,
 * with 1,000 jobs ticked 1,000 times each (their rings full, as in a process that has run for a while).
 */
async function memory() {
  const jobs = (count, history) =>
    Array.from({ length: count }, (_, i) => {
      const scheduler = new PeriodicScheduler(
        { name: `job-${i}`, every: 60_000, mode: 'manual', run: () => undefined },
        undefined,
        { history },
      );
      scheduler.start();
      return scheduler;
    });
  const ticks = async (list, rounds) => {
    for (let round = 0; round < rounds; round++) for (const job of list) await job.tick();
  };
  // The heap and the memory of array buffers outside it, where a ring of typed arrays keeps its numbers.
  const used = () => {
    const { heapUsed, arrayBuffers } = process.memoryUsage();
    return heapUsed + arrayBuffers;
  };
  const heap = async (history) => {
    globalThis.gc?.();
    const before = used();
    const list = jobs(10_000, history);
    await ticks(list, 100);
    // The buffers a ring outgrew are freed after the collection that finds them: collect, let it finish, again.
    globalThis.gc?.();
    await sleep(100);
    globalThis.gc?.();
    const grown = used() - before;
    for (const job of list) await job.stop();
    return grown;
  };
  const time = async (history) => {
    const list = jobs(1000, history);
    await ticks(list, 200);
    const started = performance.now();
    await ticks(list, 1000);
    const ns = ((performance.now() - started) * 1e6) / 1e6;
    for (const job of list) await job.stop();
    return Math.round(ns);
  };
  const history = { keep: 100, errors: 'message' };
  const [heapOff, heapOn] = [await heap(false), await heap(history)];
  const [nsOff, nsOn] = [await time(false), await time(history)];
  return {
    date: new Date().toISOString(),
    jobs: 10_000,
    keep: 100,
    on: { heapMB: Math.round(heapOn / 1e5) / 10, nsPerTick: nsOn },
    off: { heapMB: Math.round(heapOff / 1e5) / 10, nsPerTick: nsOff },
    bytesPerRecord: Math.round((heapOn - heapOff) / 1e6),
    nsPerRecord: nsOn - nsOff,
    gc: typeof globalThis.gc === 'function',
  };
}

/** A redis-server of the bench's own, on a free port, without persistence. */
async function redisServer() {
  const port = await new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port: free } = probe.address();
      probe.close(() => resolve(free));
    });
  });
  const child = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const url = `redis://127.0.0.1:${port}`;
  for (let tries = 0; ; tries++) {
    const probe = new Redis(url, { lazyConnect: true, retryStrategy: () => null }).on(
      'error',
      () => undefined,
    );
    try {
      await probe.connect();
      await probe.quit();
      break;
    } catch (error) {
      probe.disconnect();
      if (tries > 100) throw error;
      await sleep(50);
    }
  }
  return { url, stop: () => child.kill('SIGKILL') };
}
