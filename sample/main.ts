// A tour of the engine: six jobs that show fixed-rate and fixed-delay ticks, a guard, the overlap policies,
// a timeout and cancellation. Ctrl-C (or SIGTERM) stops every job gracefully, and the process then exits by
// itself, because a stopped scheduler leaves no timer behind. (The Nest application arrives with the module.)
import { setTimeout as sleep } from 'node:timers/promises';
import { type PeriodicContext, type PeriodicEvent, PeriodicScheduler } from '../lib/index.js';

const startedAt = performance.now();

function print(event: PeriodicEvent): void {
  const line = describe(event);
  if (line === undefined) return;
  const seconds = ((performance.now() - startedAt) / 1000).toFixed(3).padStart(7);
  console.log(`[${seconds}s] ${line}`);
}

function describe(event: PeriodicEvent): string | undefined {
  switch (event.type) {
    case 'started':
      return `job ${event.name}#${event.jobId} started (${(event.startedAt - event.scheduledAt).toFixed(2)}ms after its deadline)`;
    case 'finished': {
      const run = `job ${event.name}#${event.jobId}`;
      if (event.reason === 'normal') return `${run} finished, duration=${Math.round(event.durationMs)}ms`;
      if (event.reason === 'error') return `${run} failed: ${String(event.error)}`;
      if (event.reason === 'timeout') return `${run} timed out after ${Math.round(event.durationMs)}ms`;
      if (event.reason === 'shutdown') return `${run} shut down`;
      return `${run} ${event.reason}`;
    }
    case 'skipped':
      return `skipped ${event.name}: the previous run #${event.stillRunning} is still running`;
    case 'stoppedPrevious':
      return `stopped previous run ${event.name}#${event.jobId}`;
    case 'missed':
      return `${event.name} missed ${event.count} ticks`;
    case 'guardFailed':
      return `guard of ${event.name} failed: ${String(event.error)}`;
    default:
      return undefined;
  }
}

/** Work that takes `ms` and stops as soon as the scheduler aborts its signal. */
const work = (ms: number) => (context: PeriodicContext) => sleep(ms, undefined, { signal: context.signal });

const schedulers = [
  // Fixed rate: starts every second on a grid that never drifts.
  new PeriodicScheduler({ name: 'heartbeat', every: 1000, run: () => undefined }, print),
  // Fixed delay: the next run comes 2 s after the previous one ended.
  new PeriodicScheduler({ name: 'report', every: 2000, delayMode: 'shifted', run: work(800) }, print),
  // A guard: runs only in the first half of every 10 s of wall-clock time.
  new PeriodicScheduler(
    { name: 'office-hours', every: 1000, when: () => new Date().getSeconds() % 10 < 5, run: () => undefined },
    print,
  ),
  // Overlap 'ignore': a run takes 2.5 s, so ticks in between are skipped.
  new PeriodicScheduler({ name: 'import', every: 1000, onOverlap: 'ignore', run: work(2500) }, print),
  // Overlap 'stopPrevious': each tick aborts the run still going and starts a fresh one.
  new PeriodicScheduler(
    { name: 'feed-sync', every: 3000, onOverlap: 'stopPrevious', run: work(4000) },
    print,
  ),
  // Timeout: a run may take 1.5 s; its signal is aborted then, and it stops.
  new PeriodicScheduler({ name: 'export', every: 4000, timeout: 1500, run: work(3000) }, print),
];

for (const scheduler of schedulers) scheduler.start();
console.log(`${schedulers.length} jobs started; press Ctrl-C to stop them gracefully.`);

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.log(`${signal}: stopping every job and waiting for its runs to end`);
    void Promise.all(schedulers.map((scheduler) => scheduler.stop())).then(() =>
      console.log('all jobs stopped; nothing is left to keep the process alive, so it exits'),
    );
  });
}
