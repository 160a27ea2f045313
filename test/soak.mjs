// Soak: 100,000 runs across 100 jobs in one Nest application: runs that end normally, fail (with an Error or
// a string), time out, are stopped by the next tick (stopPrevious), or are abandoned and reject later, and a
// guard that never settles. Compares the heap after garbage collection once 10,000 runs have ended with the
// heap at the end, and checks that nothing piles up or escapes: no run still tracked and no Node timer left
// after close(), no unhandled rejection or uncaught exception. Prints the figures; exits 1 when one fails.
//
//   npm run soak        (builds first; node --expose-gc test/soak.mjs)
import { Test } from '@nestjs/testing';
import { PeriodicEvents, PeriodicModule, PeriodicRegistry } from '../dist/esm/index.js';

const JOBS = 100;
const RUNS = 100_000;
const FIRST = 10_000;
/** How much the heap may grow from the first 10,000 runs to the last: far below one byte per run. */
const HEAP_BOUND = 1024 * 1024;

const timers = () => process.getActiveResourcesInfo().filter((type) => type === 'Timeout').length;
const heap = () => {
  globalThis.gc();
  globalThis.gc();
  return process.memoryUsage().heapUsed;
};

// Nothing may escape: every failure of a run, a guard or a late promise is the scheduler's to catch.
const escaped = [];
process.on('unhandledRejection', (reason) => escaped.push(['unhandled rejection', reason]));
process.on('uncaughtException', (error) => escaped.push(['uncaught exception', error]));

const timersBefore = timers();
const app = await Test.createTestingModule({
  imports: [PeriodicModule.forRoot({ logger: false })],
}).compile();
await app.init();
const registry = app.get(PeriodicRegistry);
const events = app.get(PeriodicEvents);

let finished = 0;
const reasons = {};
let markFirst;
let markAll;
const first = new Promise((resolve) => (markFirst = resolve));
const all = new Promise((resolve) => (markAll = resolve));
// A listener of every event, as a metrics exporter would have.
events.on('*', (event) => {
  if (event.type !== 'finished') return;
  reasons[event.reason] = (reasons[event.reason] ?? 0) + 1;
  finished += 1;
  if (finished === FIRST) markFirst();
  if (finished === RUNS) markAll();
});

const honour = ({ signal }, ms) =>
  new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    });
  });
const kinds = [
  { options: {}, run: () => undefined },
  { options: {}, run: () => Promise.reject(new Error('failed')) },
  { options: { timeout: 1, jobShutdown: 5 }, run: (context) => honour(context, 50) },
  { options: { onOverlap: 'stopPrevious' }, run: (context) => honour(context, 50) },
  {
    options: {},
    run: () => {
      throw 'not an Error';
    },
  },
  // Ignores its signal, is abandoned after its grace, and rejects later still.
  {
    options: { timeout: 1, jobShutdown: 1 },
    run: () => new Promise((_, reject) => setTimeout(() => reject(new Error('too late')), 20)),
  },
  // A guard that never settles: every later tick of the job is reported missed.
  { options: { when: () => new Promise(() => undefined) }, run: () => undefined },
];
for (let i = 0; i < JOBS; i++) {
  const { options, run } = kinds[i % kinds.length];
  registry.add(`job${i}`, run, { every: 1 + (i % 3), initialDelay: 0, ...options });
}

const started = performance.now();
await first;
const heapAtFirst = heap();
const heldAtFirst = registry.getAll().reduce((sum, job) => sum + job.running, 0);
await all;
const heapAtEnd = heap();
const seconds = (performance.now() - started) / 1000;
await app.close();
const timersAfter = timers();
const heldAfter = registry.getAll().reduce((sum, job) => sum + job.running, 0);
// Calls after close, and for a name that does not exist: answers and rejections, none of them unhandled.
const answers = await Promise.allSettled([
  registry.tick('job0'),
  registry.syncTick('job0'),
  registry.remove('job1'),
  registry.tick('nope'),
  registry.syncTick('nope'),
  registry.remove('nope'),
]);
await new Promise((resolve) => setTimeout(resolve, 50)); // late rejections of abandoned runs come in here

const growth = heapAtEnd - heapAtFirst;
const kib = (bytes) => `${(bytes / 1024).toFixed(0)} KiB`;
console.log(`${RUNS.toLocaleString('en')} runs across ${JOBS} jobs in ${seconds.toFixed(1)} s`);
console.log(`exit reasons: ${JSON.stringify(reasons)}`);
console.log(
  `heap after GC: ${kib(heapAtFirst)} after ${FIRST.toLocaleString('en')} runs, ${kib(heapAtEnd)} after ` +
    `${RUNS.toLocaleString('en')}: ${growth >= 0 ? '+' : ''}${kib(growth)} (bound ${kib(HEAP_BOUND)})`,
);
console.log(
  `runs tracked: ${heldAtFirst} in flight after 10,000 runs, ${heldAfter} after close; ` +
    `Node timers: ${timersBefore} before the application, ${timersAfter} after close`,
);

console.log(
  `after close: ${answers.map((answer) => (answer.status === 'fulfilled' ? (JSON.stringify(answer.value) ?? 'done') : answer.reason.name)).join(', ')}`,
);
console.log(`escaped: ${escaped.length} unhandled rejections or uncaught exceptions`);

const broken = [];
if (escaped.length > 0) broken.push(`${escaped.length} failures escaped: ${escaped.map(([what]) => what)}`);
if (growth > HEAP_BOUND) broken.push(`the heap grew by ${kib(growth)}`);
if (timersAfter > timersBefore) broken.push(`${timersAfter - timersBefore} timers outlived the application`);
if (heldAfter > 0) broken.push(`${heldAfter} runs are still tracked after close`);
if (Object.keys(reasons).length < 4)
  broken.push(`not every kind of end happened: ${JSON.stringify(reasons)}`);
if (broken.length > 0) {
  console.error(`soak FAILED: ${broken.join('; ')}`);
  process.exit(1);
}
console.log('soak passed');
process.exit(0);
