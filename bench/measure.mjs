// One measurement, in a process of its own (so that heaps and timers of one peer never touch another's):
//   node --expose-gc bench/measure.mjs '{"scenario":"timing","peer":"setInterval","load":true}'
// prints one line of JSON with the figures.
import { tracingChannel } from 'node:diagnostics_channel';
import { syncBuiltinESMExports } from 'node:module';
import timers from 'node:timers';
import { setTimeout as sleep } from 'node:timers/promises';
import { makeCronPeer, makePeer } from './peers.mjs';

/**
 * Lateness below this counts as an early start. The bench reads t0 when a scheduler calls setTimeout or
 * setInterval, a little after the scheduler read its clock: for nestjs-periodic, whose first scheduledAt
 * tells, 0.03 to 0.07 ms after.
 */
const EARLY_MARGIN = 0.1;

/** One job every 10 ms for 500 ticks; with `load`, a second job burns 2 ms of CPU on each of its ticks. */
async function timing({ peer, load, every = 10, ticks = 500 }) {
  const times = new Float64Array(ticks);
  let count = 0;
  let done;
  const finished = new Promise((resolve) => (done = resolve));
  const jobs = [
    {
      every,
      run: () => {
        if (count < ticks) times[count++] = performance.now();
        if (count === ticks) done();
      },
    },
  ];
  if (load) jobs.push({ every, run: () => burn(2) });
  installRecorder();
  await warmUp(peer, Math.min(every, 10));
  const scheduler = makePeer(peer, jobs, { perProvider: 2 });
  await scheduler.prepare();
  // No garbage collection between the moment the scheduler reads its clock and the moment it arms.
  heapAfterGc();
  const [t0] = await recordArms(() => scheduler.start());
  await finished;
  await scheduler.stop();
  const lateness = Array.from(times, (time, k) => time - (t0 + (k + 1) * every));
  const sorted = [...lateness].sort((a, b) => a - b);
  return {
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    max: sorted.at(-1),
    drift: median(lateness.slice(-50)),
    early: lateness.filter((late) => late < -EARLY_MARGIN).length,
    lateness: lateness.map((late) => Math.round(late * 1000) / 1000),
  };
}

/**
 * One job every 3 s, 3 ticks: lateness after a long wait, where Linux lets the sleep of a process end 0.1% of it
 * late (3 ms of 3 s, its timer slack) on top of Node's millisecond.
 */
async function longWait({ peer }) {
  const { p50, max, early, lateness } = await timing({ peer, load: false, every: 3000, ticks: 3 });
  return { p50, max, early, lateness };
}

/** 10,000 jobs every 100 ms, for 5 s once they have run for a second (compiled, and their first ticks past). */
async function scale({ peer, jobs = 10_000, every = 100 }) {
  let runs = 0;
  const scheduler = makePeer(
    peer,
    Array.from({ length: jobs }, () => ({ every, run: () => void (runs += 1) })),
    { perProvider: 100 },
  );
  await scheduler.prepare();
  const arms = await recordArms(() => scheduler.start());
  await sleep(1000);
  const runsBefore = runs;
  const cpuBefore = process.cpuUsage();
  const from = performance.now();
  await sleep(5000);
  const cpu = process.cpuUsage(cpuBefore);
  const to = performance.now();
  const ran = runs - runsBefore;
  await scheduler.stop();
  // Every slot of every job from the start of the window to half an interval before its end should have
  // produced a run inside the window. (A slot just before the end may still be waiting for its run: late, not
  // missed.)
  const end = to - every / 2;
  const expected = arms.reduce(
    (sum, armedAt) => sum + Math.floor((end - armedAt) / every) - Math.floor((from - armedAt) / every),
    0,
  );
  return {
    cpuPerRunUs: (cpu.user + cpu.system) / ran,
    missed: Math.max(0, expected - ran),
  };
}

/**
 * 10,000 jobs every minute, scheduled and not yet run: heap per job after GC. Started without the recorder of
 * `scale`, whose wrapped timers nestjs-periodic would take for a test's fake timers (a Node timer per job).
 */
async function idle({ peer, jobs = 10_000 }) {
  const scheduler = makePeer(
    peer,
    Array.from({ length: jobs }, () => ({ every: 60_000, run: () => {} })),
    { perProvider: 100 },
  );
  await scheduler.prepare();
  const heapBefore = heapAfterGc();
  await scheduler.start();
  const heapPerJob = (heapAfterGc() - heapBefore) / jobs;
  await scheduler.stop();
  return { heapPerJob };
}

/**
 * 1,000 cron jobs '* * * * * *' (every second) for 6 s: CPU per run, heap per job, and lateness against the
 * second each run is for (the wall clock's last whole second when it started).
 */
async function cron({ peer }) {
  const jobs = 1000;
  const lateness = [];
  let runs = 0;
  let measuring = false;
  const wall = () => performance.timeOrigin + performance.now();
  const run = () => {
    runs += 1;
    if (!measuring) return;
    const now = wall();
    lateness.push(now - Math.floor(now / 1000) * 1000);
  };
  const app = makeCronPeer(
    peer,
    Array.from({ length: jobs }, () => ({ cron: '* * * * * *', run })),
  );
  await app.prepare();
  const heapBefore = heapAfterGc();
  await app.start();
  const heapPerJob = (heapAfterGc() - heapBefore) / jobs;
  // One slot to settle, then six measured.
  await sleep(1500 - (wall() % 1000));
  measuring = true;
  const runsBefore = runs;
  const cpuBefore = process.cpuUsage();
  await sleep(6000);
  const cpu = process.cpuUsage(cpuBefore);
  measuring = false;
  const ran = runs - runsBefore;
  await app.stop();
  const sorted = lateness.sort((a, b) => a - b);
  return {
    cpuPerRunUs: (cpu.user + cpu.system) / ran,
    heapPerJob,
    runsPerSecond: ran / 6,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
  };
}

/** An application of 1,000 providers with 2 scheduled methods each (every minute): compile and init. */
async function bootstrap({ peer }) {
  const jobs = Array.from({ length: 2000 }, () => ({ every: 60_000, run: () => {} }));
  const app = makePeer(peer, jobs, { perProvider: 2 });
  const heapBefore = heapAfterGc();
  const start = performance.now();
  await app.prepare();
  const compiled = performance.now();
  await app.start();
  const ready = performance.now();
  const heapMb = (heapAfterGc() - heapBefore) / 2 ** 20;
  await app.stop();
  return { bootstrapMs: ready - start, initMs: ready - compiled, heapMb };
}

/**
 * close() of 1,000 idle jobs; or of 100 jobs whose runs are in flight. A run honours its signal where it
 * gets one (a 10 ms cleanup after the abort); without a signal it goes on for 1 s.
 */
async function shutdown({ peer, inFlight }) {
  const count = inFlight ? 100 : 1000;
  let started = 0;
  let running = 0;
  let lastEnd = 0;
  let allStarted;
  const ready = new Promise((resolve) => (allStarted = resolve));
  const run = (context) => {
    started += 1;
    running += 1;
    if (started === count) allStarted();
    return new Promise((resolve) => {
      const end = () => {
        running -= 1;
        lastEnd = performance.now();
        resolve();
      };
      if (context === undefined) setTimeout(end, 1000);
      else context.signal.addEventListener('abort', () => setTimeout(end, 10), { once: true });
    });
  };
  const every = inFlight ? 50 : 60_000;
  const scheduler = makePeer(
    peer,
    Array.from({ length: count }, () => ({ every, run })),
    { periodic: { onOverlap: 'ignore' } },
  );
  await scheduler.prepare();
  await scheduler.start();
  await (inFlight ? ready : sleep(50));
  const start = performance.now();
  await scheduler.stop();
  const resolved = performance.now();
  return {
    closeMs: resolved - start,
    ...(inFlight && { stillRunning: running, afterLastRunMs: running === 0 ? resolved - lastEnd : null }),
  };
}

/** syncTick round trips on a job that does nothing, for 1 s; 'await method()' is the floor. */
async function manualTicks({ peer }) {
  const method = async () => {};
  let call;
  let stop = async () => {};
  if (peer === 'await method()') {
    call = () => method();
  } else {
    const app = makePeer(peer, [{ every: 1000, run: method }], { periodic: { mode: 'manual' } });
    await app.prepare();
    await app.start();
    const registry = app.registry;
    call = () => registry.syncTick('Host0.job0');
    stop = () => app.stop();
  }
  let rounds = 0;
  const end = performance.now() + 1000;
  while (performance.now() < end) {
    await call();
    rounds += 1;
  }
  await stop();
  return { perSecond: rounds };
}

/**
 * What watching runs costs: 1,000 jobs every 100 ms for 5 s through the Nest module, CPU per run with nothing
 * watching, with a subscriber of the tracing channel, and with `telemetry: true` and the OpenTelemetry SDK
 * recording every span and metric into in-memory exporters.
 */
async function observed({ peer }) {
  const observer = peer.slice('nestjs-periodic'.length);
  if (observer === ' + tracing channel') {
    const noop = () => {};
    tracingChannel('nestjs-periodic:run').subscribe({
      start: noop,
      end: noop,
      asyncStart: noop,
      asyncEnd: noop,
      error: noop,
    });
  }
  const telemetry = observer === ' + OpenTelemetry';
  if (telemetry) await recordOpenTelemetry();
  const jobs = 1000;
  const every = 100;
  let runs = 0;
  const scheduler = makePeer(
    'nestjs-periodic',
    Array.from({ length: jobs }, () => ({ every, run: () => void (runs += 1) })),
    { perProvider: 100, module: { telemetry } },
  );
  await scheduler.prepare();
  await scheduler.start();
  await sleep(1000);
  const runsBefore = runs;
  const cpuBefore = process.cpuUsage();
  await sleep(5000);
  const cpu = process.cpuUsage(cpuBefore);
  const ran = runs - runsBefore;
  await scheduler.stop();
  return { cpuPerRunUs: (cpu.user + cpu.system) / ran };
}

/** The OpenTelemetry SDK as an application sets it up, exporting into memory (spans cleared each second). */
async function recordOpenTelemetry() {
  const { context, metrics, trace } = await import('@opentelemetry/api');
  const { AsyncLocalStorageContextManager } = await import('@opentelemetry/context-async-hooks');
  const { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter } =
    await import('@opentelemetry/sdk-trace-base');
  const { InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader, AggregationTemporality } =
    await import('@opentelemetry/sdk-metrics');
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const spans = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(spans, { maxQueueSize: 100_000 })] }),
  );
  setInterval(() => spans.reset(), 1000).unref();
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  metrics.setGlobalMeterProvider(
    new MeterProvider({
      readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 1000 })],
    }),
  );
}

/**
 * What reading the status costs: the status of 1,000 jobs. (Keeping it is a few counters each run updates on
 * its way, counted in the CPU per run of the other tables.)
 */
async function status() {
  const { PeriodicScheduler } = await import('../dist/esm/index.js');
  const jobs = Array.from(
    { length: 1000 },
    (_, i) => new PeriodicScheduler({ name: `job${i}`, every: 60_000, run: () => undefined }),
  );
  for (const job of jobs) job.start();
  const read = () => jobs.map((job) => job.status());
  read();
  const readFrom = performance.now();
  for (let i = 0; i < 100; i++) read();
  const statusAllMs = (performance.now() - readFrom) / 100;
  await Promise.all(jobs.map((job) => job.stop()));
  return { statusAllMs };
}

// ---- Plumbing ----

/**
 * Starts the peer once with one job for a few ticks and stops it, so that the measured run does not pay for
 * compiling its code paths: that would sit between the moment the peer reads its clock and the moment the
 * bench sees its timer armed, and skew the grid.
 */
async function warmUp(peer, every) {
  const scheduler = makePeer(peer, [{ every, run: () => {} }]);
  await scheduler.prepare();
  await scheduler.start();
  await sleep(every * 5);
  await scheduler.stop();
}

function burn(ms) {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

function median(values) {
  return quantile(
    [...values].sort((a, b) => a - b),
    0.5,
  );
}

function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function heapAfterGc() {
  globalThis.gc();
  globalThis.gc();
  return process.memoryUsage().heapUsed;
}

/**
 * Runs `start` and returns when each timer it armed was armed: every peer arms with setTimeout or setInterval.
 * The recording wrappers are installed before any warm-up: replacing a global function throws away compiled
 * code that read it, and recompiling between the moment a scheduler reads its clock and the moment it arms
 * would put the recorded t0 late. Node's own functions are back once `start` has resolved: nestjs-periodic
 * takes wrapped timers for a test's fake timers and then arms a timer per job, where on Node's own it shares
 * one between all its jobs.
 */
async function recordArms(start) {
  const restore = installRecorder();
  const arms = (recorder.arms = []);
  try {
    await start();
  } finally {
    recorder.arms = undefined;
    restore();
  }
  return arms;
}

const recorder = { arms: undefined, restore: undefined };

/**
 * Wraps setTimeout and setInterval, once, the globals and those of `node:timers` alike (a scheduler that finds
 * them different takes the globals for a test's fake timers); returns what puts Node's own back.
 */
function installRecorder() {
  if (recorder.restore !== undefined) return recorder.restore;
  const { setTimeout: realTimeout, setInterval: realInterval } = globalThis;
  const record = () => {
    if (recorder.arms !== undefined) recorder.arms.push(performance.now());
  };
  const use = (setTimeout, setInterval) => {
    globalThis.setTimeout = timers.setTimeout = setTimeout;
    globalThis.setInterval = timers.setInterval = setInterval;
    syncBuiltinESMExports();
  };
  use(
    (...args) => (record(), realTimeout(...args)),
    (...args) => (record(), realInterval(...args)),
  );
  return (recorder.restore = () => use(realTimeout, realInterval));
}

/**
 * The dashboard's list with 100,000 jobs (every hour, 1,000 of them exclusive on an in-memory coordinator, every
 * hundredth paused): the size (kB) and the time (ms) of the list's first page and of the API's, and the time of
 * the page a search finds, of the paused jobs' and of a page deep in the list (its cursor), each the median of 10
 * requests after 3.
 */
async function dashboard({ jobs = 100_000 }) {
  const { NestFactory } = await import('@nestjs/core');
  const { Module } = await import('@nestjs/common');
  const { InMemoryCoordinator, PeriodicModule, PeriodicRegistry } = await import('../dist/esm/index.js');
  const { PeriodicDashboardModule } = await import('../dist/esm/dashboard/index.js');
  class AppModule {}
  Module({
    imports: [
      PeriodicModule.forRoot({ logger: false, coordinator: new InMemoryCoordinator() }),
      PeriodicDashboardModule.forRoot({ access: () => 'operate' }),
    ],
  })(AppModule);
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const registry = app.get(PeriodicRegistry);
  for (let i = 0; i < jobs; i++) {
    registry.add(`tenant-${i}.report`, () => undefined, { every: 3_600_000, exclusive: i % 100 === 1 });
  }
  for (let i = 0; i < jobs; i += 100) await registry.pause(`tenant-${i}.report`);
  const url = `${(await app.getUrl()).replace('[::1]', '127.0.0.1')}/periodic`;
  const timed = async (path) => {
    const times = [];
    let bytes = 0;
    for (let request = 0; request < 13; request++) {
      const started = performance.now();
      const response = await fetch(`${url}${path}`);
      const body = await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`${path} answered ${response.status}`);
      if (request >= 3) times.push(performance.now() - started);
      bytes = body.byteLength;
    }
    return { bytes, ms: median(times) };
  };
  // A cursor near the end of the list: the last of the first 100 names that hold "tenant-99" is tenant-99089's.
  const deep = await (await fetch(`${url}/api/jobs?q=tenant-99`)).json();
  const page = await timed('');
  const api = await timed('/api/jobs');
  const result = {
    pageKb: page.bytes / 1000,
    pageMs: page.ms,
    apiKb: api.bytes / 1000,
    apiMs: api.ms,
    searchMs: (await timed('?q=tenant-4242')).ms,
    pausedMs: (await timed('?state=paused')).ms,
    deepMs: (await timed(`/api/jobs?cursor=${encodeURIComponent(deep.nextCursor)}`)).ms,
  };
  await app.close();
  return result;
}

const scenarios = {
  timing,
  longWait,
  scale,
  idle,
  cron,
  bootstrap,
  shutdown,
  manualTicks,
  status,
  observed,
  dashboard,
};
const task = JSON.parse(process.argv[2]);
const result = await scenarios[task.scenario](task);
process.stdout.write(`${JSON.stringify(result)}\n`);
process.exit(0);
