// The fleet benchmark (SPEC 21): N exclusive jobs every `every` ms across R replica processes on one store,
// and what it costs the store and the replicas. Each scenario starts its own redis-server (on a free port, no
// persistence), or uses the machine's PostgreSQL with a table of its own; forks R replicas (bench/fleet/
// replica.mjs), waits for the fleet to settle, then counts over a window: the store's commands (Redis
// `total_commands_processed`, PostgreSQL transactions of the database) and CPU (Redis `used_cpu_*`, the
// PostgreSQL server processes' CPU from /proc), each replica's CPU, and every run's slot. Slots are checked per
// job: each slot of the window run once, none twice. With --kill, one replica is then killed with SIGKILL and
// the failover is timed: until every job is held again by the others.
//
//   npm run build && node bench/fleet.mjs --store redis --jobs 2000 --replicas 4 --every 1000 [--kill]
//   node bench/fleet.mjs --peer bullmq --jobs 2000 --replicas 4           (BullMQ job schedulers, same Redis)
//   npm run bench:fleet                     (the grid of SPEC 21: bench/results/fleet.json, then BENCHMARKS.md)
//   node bench/fleet.mjs --matrix --store postgres [--every 1000]   (that part of the grid again)
//   node bench/fleet.mjs --store redis --stored --jobs 100000 --replicas 4 --every 30000 --window 120
//                                           (the jobs as stored schedules, docs/schedules.md)
import { fork, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import pg from 'pg';

const option = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1];
};
const results = join(import.meta.dirname, 'results', 'fleet.json');

if (process.argv.includes('--matrix')) await matrix();
else {
  const result = await scenario({
    store: option('store', 'redis'),
    peer: option('peer', 'nestjs-periodic'),
    jobs: Number(option('jobs', 2000)),
    replicas: Number(option('replicas', 4)),
    every: Number(option('every', 1000)),
    leaseMs: Number(option('lease', 10_000)),
    windowS: Number(option('window', 30)),
    kill: process.argv.includes('--kill'),
    history: option('history', 'on'),
    stored: process.argv.includes('--stored'),
  });
  console.log(JSON.stringify(result, null, 2));
  // Stored schedules' fleet figures go beside their other figures (bench/schedules.mjs), which BENCHMARKS.md shows.
  if (result.stored) {
    const path = join(import.meta.dirname, 'results', 'schedules.json');
    const kept = existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : {};
    kept.fleet = {
      ...kept.fleet,
      [result.store]: { date: new Date().toISOString(), machine: machine(), ...result },
    };
    writeFileSync(path, `${JSON.stringify(kept, null, 2)}\n`);
  }
}

/** The grid of SPEC 21, each scenario in turn; the results go to bench/results/fleet.json. */
async function matrix() {
  const grid = [];
  for (const every of [1000, 5000]) {
    for (const replicas of [1, 4, 20]) {
      // A replica of each fleet of 4 is killed at the end, to time the failover.
      const kill = replicas === 4;
      for (const jobs of [1000, 10_000, 50_000]) grid.push({ store: 'redis', jobs, replicas, every, kill });
      for (const jobs of [1000, 10_000]) grid.push({ store: 'postgres', jobs, replicas, every, kill });
    }
  }
  for (const jobs of [1000, 5000])
    grid.push({ store: 'redis', peer: 'bullmq', jobs, replicas: 4, every: 1000 });
  for (const row of grid) row.peer ??= 'nestjs-periodic';
  // With --store (and --every), only those scenarios run again, in place of theirs in fleet.json.
  const store = option('store', undefined);
  const every = option('every', undefined);
  const chosen = (row) => (store ?? row.store) === row.store && Number(every ?? row.every) === row.every;
  const same = (a, b) => ['store', 'peer', 'jobs', 'replicas', 'every'].every((key) => a[key] === b[key]);
  const again = store !== undefined || every !== undefined;
  const before = again && existsSync(results) ? JSON.parse(readFileSync(results, 'utf8')) : { results: [] };
  // Each row keeps the day it was measured on.
  const done = before.results
    .filter((result) => !chosen(result))
    .map((result) => ({ date: before.date, ...result }));
  const date = new Date().toISOString();
  for (const settings of grid.filter(chosen)) {
    const result = await scenario({
      peer: 'nestjs-periodic',
      leaseMs: 10_000,
      // Four slots of a job every 5 s at least in the part of the window that is checked.
      windowS: settings.every > 1000 ? 30 : 20,
      kill: false,
      history: 'on',
      ...settings,
    });
    result.date = new Date().toISOString();
    console.log(JSON.stringify(result));
    done.push(result);
    done.sort((a, b) => grid.findIndex((row) => same(row, a)) - grid.findIndex((row) => same(row, b)));
    writeFileSync(results, `${JSON.stringify({ date, machine: machine(), results: done }, null, 2)}\n`);
  }
  // BENCHMARKS.md again, with these figures.
  spawnSync(process.execPath, [join(import.meta.dirname, 'run.mjs'), '--report-only'], { stdio: 'inherit' });
}

/**
 * Waits for the fleet to settle: the spread of the leases, the first ticks, the JIT. At least two lease periods
 * (and three intervals); then, for our replicas, until every lease is held and the spread has not changed for
 * two lease periods, at most five minutes. Answers the seconds it took.
 */
async function settle(children, { peer, jobs, leaseMs, every }) {
  const started = Date.now();
  await sleep(Math.max(2 * leaseMs, Math.min(3 * every, 30_000)));
  if (peer !== 'nestjs-periodic') return round((Date.now() - started) / 1000, 0);
  let spread = '';
  let since = Date.now();
  while (Date.now() - started < 300_000) {
    const held = (await Promise.all(children.map((child) => child.ask({ held: true })))).map(
      (answer) => answer.held,
    );
    const now = `${held}`;
    if (now !== spread) [spread, since] = [now, Date.now()];
    const all = held.reduce((sum, count) => sum + count, 0) === jobs;
    if (all && Date.now() - since >= 2 * leaseMs) break;
    await sleep(1000);
  }
  return round((Date.now() - started) / 1000, 0);
}

async function scenario(settings) {
  const { store, peer, jobs, replicas, every, leaseMs, windowS } = settings;
  const server = store === 'postgres' ? await postgres() : await redis();
  const env = {
    ...server.env,
    PEER: peer,
    JOBS: String(jobs),
    EVERY: String(every),
    LEASE_MS: String(leaseMs),
    HISTORY: settings.history ?? 'on',
    STORED: settings.stored === true ? '1' : '0',
  };
  if (peer === 'bullmq') await server.schedule(jobs, every);
  const children = Array.from({ length: replicas }, (_, i) => startReplica({ ...env, REPLICA: `r${i}` }));
  try {
    await Promise.all(children.map((child) => child.once('ready')));
    const settleS = await settle(children, settings);
    await server.reset?.();
    const storeBefore = await server.usage();
    const started = Date.now();
    for (const child of children) child.send({ window: 'start' });
    await sleep(windowS * 1000);
    const ended = Date.now();
    const answers = await Promise.all(children.map((child) => child.ask({ window: 'end' })));
    const storeAfter = await server.usage();
    const storeDetail = await server.detail?.();
    const seconds = (ended - started) / 1000;
    // The slots of the window but its first and last interval: a run starts a little after its slot.
    const slots = checkSlots(answers, jobs, every, started + every, ended - every);
    const runsPer = answers.map((answer) =>
      Object.values(answer.runs).reduce((sum, list) => sum + list.length, 0),
    );
    const storeCpuMs = storeAfter.cpuMs - storeBefore.cpuMs;
    // Round trips: Redis scripts (EVALSHA, EVAL), PostgreSQL transactions (one statement each).
    const trips = storeAfter.trips - storeBefore.trips;
    const result = {
      ...settings,
      settleS,
      seconds: round(seconds, 1),
      storeCommandsPerS: round((storeAfter.commands - storeBefore.commands) / seconds, 0),
      commandsPerJobSecond: round(
        (storeAfter.commands - storeBefore.commands) / seconds / (jobs * (1000 / every)),
        3,
      ),
      roundTripsPerReplicaS: round(trips / seconds / replicas, 1),
      storeCpuPct: round(storeCpuMs / 10 / seconds, 1),
      storeCpuUsPerJobSecond: round((storeCpuMs * 1000) / (seconds * jobs * (1000 / every)), 2),
      replicaCpuPct: round(
        answers.reduce((sum, answer) => sum + answer.cpuMs, 0) / 10 / seconds / replicas,
        1,
      ),
      replicaCpuPctMax: round(Math.max(...answers.map((answer) => answer.cpuMs)) / 10 / seconds, 1),
      runsMostFewest: round(Math.max(...runsPer) / Math.max(1, Math.min(...runsPer)), 2),
      heldPerReplica: answers.map((answer) => answer.held ?? null),
      ...slots,
      storeDetail,
    };
    if (settings.kill && replicas > 1) Object.assign(result, await failover(children, jobs));
    return result;
  } finally {
    await Promise.all(children.map((child) => child.close()));
    await server.stop();
  }
}

/**
 * Each job's slots in [from, to] as the replicas ran them: the share of the slots due there that ran, how
 * many ran more than once, and how many did not run.
 */
function checkSlots(answers, jobs, every, from, to) {
  const byJob = new Map();
  for (const answer of answers) {
    for (const [job, slots] of Object.entries(answer.runs)) {
      const list = byJob.get(job) ?? [];
      for (const slot of slots) list.push(slot);
      byJob.set(job, list);
    }
  }
  let due = 0;
  let ran = 0;
  let twice = 0;
  for (let i = 0; i < jobs; i++) {
    const slots = (byJob.get(`job-${i}`) ?? []).filter((slot) => slot >= from && slot <= to);
    const distinct = new Set(slots);
    twice += slots.length - distinct.size;
    ran += distinct.size;
    // The slots due in the window, on the job's own grid (any of its slots gives its phase).
    const known = byJob.get(`job-${i}`)?.[0];
    if (known === undefined) due += Math.floor((to - from) / every) + 1;
    else {
      const first = known + Math.ceil((from - known) / every) * every;
      due += first > to ? 0 : Math.floor((to - first) / every) + 1;
    }
  }
  return { slotsDue: due, slotsRan: round(ran / due, 4), slotsTwice: twice, slotsLost: due - ran };
}

/**
 * Kills one replica (SIGKILL) and times, for each job it held, until another replica took its lease: the
 * median and the longest, in ms.
 */
async function failover(children, jobs) {
  const [victim, ...others] = children;
  const killed = Date.now();
  victim.kill();
  for (;;) {
    await sleep(100);
    const answers = await Promise.all(others.map((child) => child.ask({ held: true })));
    if (answers.reduce((sum, answer) => sum + answer.held, 0) >= jobs) break;
    if (Date.now() - killed > 120_000) return { failoverP50Ms: null, failoverMaxMs: null };
  }
  const taken = await Promise.all(others.map((child) => child.ask({ acquired: true })));
  const delays = taken
    .flatMap((answer) => Object.values(answer.acquired))
    .filter((at) => at > killed)
    .map((at) => at - killed)
    .sort((a, b) => a - b);
  return { failoverP50Ms: delays[Math.floor(delays.length / 2)], failoverMaxMs: delays.at(-1) };
}

/** A replica process and its IPC channel. */
function startReplica(env) {
  const child = fork(join(import.meta.dirname, 'fleet', 'replica.mjs'), [], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const waiting = [];
  child.on('message', (message) => waiting.shift()?.resolve(message));
  child.on('exit', (code, signal) => {
    for (const { reject } of waiting.splice(0)) reject(new Error(`a replica exited (${signal ?? code})`));
  });
  const next = () => new Promise((resolve, reject) => waiting.push({ resolve, reject }));
  return {
    once: () => next(),
    send: (message) => child.send(message),
    ask: (message) => {
      const answer = next();
      child.send(message);
      return answer;
    },
    kill: () => child.kill('SIGKILL'),
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ close: true }, () => undefined);
      await Promise.race([exited, sleep(30_000)]);
      child.kill('SIGKILL');
    },
  };
}

/** A redis-server of the scenario's own, on a free port, without persistence. */
async function redis() {
  const port = await freePort();
  const process_ = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const url = `redis://127.0.0.1:${port}`;
  let client;
  for (let tries = 0; !client; tries++) {
    const attempt = new Redis(url, { lazyConnect: true, retryStrategy: () => null }).on(
      'error',
      () => undefined,
    );
    try {
      await attempt.connect();
      client = attempt;
    } catch (error) {
      attempt.disconnect();
      if (tries > 100) throw error;
      await sleep(50);
    }
  }
  const info = async () => {
    const text = await client.info('all');
    const field = (name) => Number(text.match(new RegExp(`^${name}:([\\d.]+)`, 'm'))[1]);
    const calls = (command) =>
      Number(text.match(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm'))?.[1] ?? 0);
    return {
      commands: field('total_commands_processed'),
      cpuMs: (field('used_cpu_user') + field('used_cpu_sys')) * 1000,
      trips: calls('evalsha') + calls('eval'),
    };
  };
  return {
    env: { STORE: 'redis', REDIS_URL: url, KEY_PREFIX: 'bench:', QUEUE: 'bench' },
    usage: info,
    /** The commands Redis ran most often since `reset()`, with their calls and CPU per call. */
    async detail() {
      const text = await client.info('commandstats');
      return [...text.matchAll(/^cmdstat_(\w+):calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)/gm)]
        .map(([, command, calls, usec, perCall]) => ({
          command,
          calls: Number(calls),
          usec: Number(usec),
          perCall: Number(perCall),
        }))
        .sort((a, b) => b.usec - a.usec)
        .slice(0, 8);
    },
    reset: () => client.config('RESETSTAT'),
    async schedule(jobs, every) {
      const { Queue } = await import('bullmq');
      const connection = new Redis(url, { maxRetriesPerRequest: null });
      const queue = new Queue('bench', { connection, prefix: 'bench:' });
      for (let i = 0; i < jobs; i += 100) {
        await Promise.all(
          Array.from({ length: Math.min(100, jobs - i) }, (_, k) =>
            queue.upsertJobScheduler(`job-${i + k}`, { every }, { name: `job-${i + k}` }),
          ),
        );
      }
      await queue.close();
      // BullMQ leaves a connection it was given open.
      connection.disconnect();
    },
    async stop() {
      client.disconnect();
      process_.kill('SIGKILL');
    },
  };
}

/** The machine's PostgreSQL, with a table of the scenario's own; its server processes' CPU from /proc. */
async function postgres() {
  const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const table = `bench_fleet_${process.pid}_${Date.now()}`;
  const database = new URL(url).pathname.slice(1);
  const cpuMs = postgresCpu();
  cpuMs();
  return {
    env: { STORE: 'postgres', DATABASE_URL: url, TABLE: table },
    async usage() {
      const { rows } = await pool.query('SELECT xact_commit FROM pg_stat_database WHERE datname = $1', [
        database,
      ]);
      const commands = Number(rows[0].xact_commit);
      return { commands, cpuMs: cpuMs(), trips: commands };
    },
    async stop() {
      await pool.query(
        `DROP TABLE IF EXISTS "${table}", "${table}_members", "${table}_audit", "${table}_runs", "${table}_summary", "${table}_trigger", "${table}_stored", "${table}_incident"`,
      );
      await pool.end();
    },
  };
}

/**
 * The CPU time of the PostgreSQL server on this machine, in ms, as a counter: the processes named postgres
 * that live, and those that ended since the last reading (a pool's connection closed), which the postmaster's
 * cutime and cstime count whole: their CPU before the last reading is taken off, as it was counted then.
 */
function postgresCpu() {
  let seen = new Map();
  let total = 0;
  return () => {
    const now = new Map();
    for (const pid of spawnSync('pgrep', ['-x', 'postgres'], { encoding: 'utf8' }).stdout.split('\n')) {
      const path = `/proc/${pid}/stat`;
      if (pid === '' || !existsSync(path)) continue;
      const fields = readFileSync(path, 'utf8').split(') ')[1].split(' ');
      // utime, stime; cutime, cstime (the postmaster's: its children that ended).
      now.set(pid, {
        own: Number(fields[11]) + Number(fields[12]),
        children: Number(fields[13]) + Number(fields[14]),
      });
    }
    for (const [pid, { own, children }] of now) {
      const before = seen.get(pid) ?? { own: 0, children: 0 };
      total += own - before.own + children - before.children;
    }
    for (const [pid, { own }] of seen) if (!now.has(pid)) total -= own;
    seen = now;
    return (total * 1000) / 100;
  };
}

function freePort() {
  return new Promise((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function machine() {
  const cpus = spawnSync('nproc', { encoding: 'utf8' }).stdout.trim();
  return { node: process.version, cpus: Number(cpus) };
}

function round(value, digits) {
  const scale = 10 ** digits;
  return Math.round(value * scale) / scale;
}
