// Properties of the scheduler over generated jobs and timelines (fast-check, on Jest's fake timers): random
// options in both modes, runs that return, throw, resolve, reject, hang or honour their signal, guards that
// pass, fail, throw or take their time, manual ticks, clock stalls, and stop() at a random point. NUM_RUNS (default 1000) sets how many
// cases `npm test` generates; `npm run test:fuzz` generates many more.
import { describe, expect, it, jest } from '@jest/globals';
import fc from 'fast-check';
import { armedDeadlines } from '../../lib/scheduler/deadline-timer.js';
import type { PeriodicEvent } from '../../lib/scheduler/events.js';
import type { JobShutdown, OverlapPolicy } from '../../lib/scheduler/options.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import { useFakeTimers } from './helpers.js';

useFakeTimers();

const NUM_RUNS = Number(process.env.NUM_RUNS ?? 1000);
// A failing property prints its seed and path; SEED and SEED_PATH replay exactly that case.
const { SEED, SEED_PATH } = process.env;
const RUNS: fc.Parameters<unknown> =
  SEED === undefined
    ? { numRuns: NUM_RUNS }
    : { numRuns: NUM_RUNS, seed: Number(SEED), path: SEED_PATH, endOnFailure: true };
// A case takes a few milliseconds; the limit leaves a slow machine room to spare.
jest.setTimeout(Math.max(60_000, NUM_RUNS * 30));

type RunBehaviour =
  | { kind: 'return' }
  | { kind: 'throw'; value: unknown }
  | { kind: 'resolve'; after: number }
  | { kind: 'reject'; after: number; value: unknown }
  | { kind: 'hang' }
  | { kind: 'honour'; cleanup: number };

type GuardBehaviour =
  { kind: 'verdict'; pass: boolean } | { kind: 'throw' } | { kind: 'slow'; after: number; pass: boolean };

type Step =
  { kind: 'advance'; ms: number } | { kind: 'stall'; ms: number } | { kind: 'tick' } | { kind: 'stop' };

interface Case {
  every: number;
  initialDelay: number | undefined;
  delayMode: 'regular' | 'shifted';
  onOverlap: OverlapPolicy;
  timeout: number;
  jobShutdown: JobShutdown;
  mode: 'auto' | 'manual';
  runs: RunBehaviour[];
  guards: GuardBehaviour[] | undefined;
  steps: Step[];
}

const thrown = fc.oneof(
  fc.constant(new Error('boom')),
  fc.string(),
  fc.constant(undefined),
  fc.constant(null),
  fc.record({ code: fc.integer() }),
);

const runBehaviour: fc.Arbitrary<RunBehaviour> = fc.oneof(
  fc.constant({ kind: 'return' as const }),
  thrown.map((value) => ({ kind: 'throw' as const, value })),
  fc.integer({ min: 0, max: 80 }).map((after) => ({ kind: 'resolve' as const, after })),
  fc
    .tuple(fc.integer({ min: 0, max: 80 }), thrown)
    .map(([after, value]) => ({ kind: 'reject' as const, after, value })),
  fc.constant({ kind: 'hang' as const }),
  fc.integer({ min: 0, max: 60 }).map((cleanup) => ({ kind: 'honour' as const, cleanup })),
);

const guardBehaviour: fc.Arbitrary<GuardBehaviour> = fc.oneof(
  fc.boolean().map((pass) => ({ kind: 'verdict' as const, pass })),
  fc.constant({ kind: 'throw' as const }),
  fc
    .tuple(fc.integer({ min: 0, max: 60 }), fc.boolean())
    .map(([after, pass]) => ({ kind: 'slow' as const, after, pass })),
);

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 8, arbitrary: fc.integer({ min: 0, max: 60 }).map((ms) => ({ kind: 'advance' as const, ms })) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 150 }).map((ms) => ({ kind: 'stall' as const, ms })) },
  { weight: 2, arbitrary: fc.constant({ kind: 'tick' as const }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'stop' as const }) },
);

const job: fc.Arbitrary<Case> = fc
  .record({
    every: fc.integer({ min: 1, max: 40 }),
    initialDelay: fc.option(fc.integer({ min: 0, max: 40 }), { nil: undefined }),
    delayMode: fc.constantFrom('regular' as const, 'shifted' as const),
    onOverlap: fc.constantFrom('run' as const, 'ignore' as const, 'stopPrevious' as const),
    timeout: fc.oneof(fc.constant(Infinity), fc.integer({ min: 1, max: 100 })),
    jobShutdown: fc.oneof(
      fc.constant('brutalKill' as const),
      fc.constant(Infinity),
      fc.integer({ min: 0, max: 50 }),
    ),
    mode: fc.constantFrom('auto' as const, 'manual' as const),
    runs: fc.array(runBehaviour, { minLength: 1, maxLength: 5 }),
    guards: fc.option(fc.array(guardBehaviour, { minLength: 1, maxLength: 4 }), { nil: undefined }),
    steps: fc.array(step, { minLength: 1, maxLength: 20 }),
  })
  // With no grace limit, stop() waits for every run to settle (as documented): a run that never does would
  // hold it for ever, so those two do not meet here.
  .filter((c) => c.jobShutdown !== Infinity || c.runs.every((run) => run.kind !== 'hang'));

/** The longest a run of these behaviours takes to settle once stopped: the bound with no grace limit. */
const LONGEST_RUN = 80;

type Seen = PeriodicEvent & { seenAt: number; afterStop: boolean };

/** Runs one case to its end: the steps, then stop() (if no step did) and time until every run has ended. */
async function play(c: Case) {
  let stall = 0;
  const fakeNow = performance.now.bind(performance);
  const clock = jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + stall);
  try {
    return await playOn(c, (ms) => (stall += ms));
  } finally {
    clock.mockRestore();
  }
}

/** The case itself, with `stallBy` jumping the clock ahead without firing any timer, as a stalled process. */
async function playOn(c: Case, stallBy: (ms: number) => void) {
  const seen: Seen[] = [];
  let stopCalled = false;
  const sink = (event: PeriodicEvent) =>
    seen.push({ ...event, seenAt: performance.now(), afterStop: stopCalled });
  let tick = 0;
  const run = (context: PeriodicContext): unknown => {
    const behaviour = c.runs[(context.jobId - 1) % c.runs.length];
    switch (behaviour.kind) {
      case 'return':
        return 'done';
      case 'throw':
        throw behaviour.value;
      case 'resolve':
        return new Promise((resolve) => setTimeout(resolve, behaviour.after));
      case 'reject':
        return new Promise((_, reject) => setTimeout(() => reject(behaviour.value), behaviour.after));
      case 'hang':
        return new Promise(() => undefined);
      case 'honour':
        return new Promise((resolve) => {
          const settle = () => setTimeout(resolve, behaviour.cleanup);
          if (context.signal.aborted) settle();
          else context.signal.addEventListener('abort', settle);
        });
    }
  };
  const guards = c.guards;
  const when =
    guards === undefined
      ? undefined
      : () => {
          const behaviour = guards[tick++ % guards.length];
          if (behaviour.kind === 'verdict') return behaviour.pass;
          if (behaviour.kind === 'throw') throw new Error('guard failed');
          return new Promise<boolean>((resolve) =>
            setTimeout(() => resolve(behaviour.pass), behaviour.after),
          );
        };

  const { every, initialDelay, delayMode, onOverlap, timeout, jobShutdown, mode } = c;
  const scheduler = new PeriodicScheduler(
    { name: 'job', every, initialDelay, delayMode, onOverlap, timeout, jobShutdown, mode, when, run },
    sink,
  );
  const startedAt = performance.now();
  scheduler.start();

  let stopCalledAt = 0;
  let stopResolvedAt: number | undefined;
  const stop = () => {
    if (stopCalled) return;
    stopCalled = true;
    stopCalledAt = jest.now();
    void scheduler.stop().then(() => (stopResolvedAt = jest.now()));
  };
  for (const s of c.steps) {
    if (s.kind === 'advance') await jest.advanceTimersByTimeAsync(s.ms);
    else if (s.kind === 'stall') stallBy(s.ms);
    else if (s.kind === 'tick') void scheduler.tick();
    else stop();
  }
  stop();
  // Every grace here is at most 50 ms: stop() must have resolved well within 200 ms of fake time.
  for (let waited = 0; stopResolvedAt === undefined && waited < 200; waited++) {
    await jest.advanceTimersByTimeAsync(1);
  }
  return { seen, startedAt, stopCalledAt, stopResolvedAt, deadlines: armedDeadlines() };
}

const of = <T extends PeriodicEvent['type']>(seen: Seen[], type: T) =>
  seen.filter((event): event is Extract<Seen, { type: T }> => event.type === type);

describe('properties over generated jobs', () => {
  it('every started run has exactly one finished, with a reason that fits what happened', async () => {
    await fc.assert(
      fc.asyncProperty(job, async (c) => {
        const { seen, stopResolvedAt } = await play(c);
        expect(stopResolvedAt).toBeDefined();
        const started = of(seen, 'started');
        const finished = of(seen, 'finished');
        expect(started.map((e) => e.jobId)).toEqual(started.map((_, i) => i + 1));
        expect(finished.map((e) => e.jobId).sort((a, b) => a - b)).toEqual(started.map((e) => e.jobId));
        for (const end of finished) {
          const behaviour = c.runs[(end.jobId - 1) % c.runs.length];
          const failing = behaviour.kind === 'throw' || behaviour.kind === 'reject';
          if (end.reason === 'timeout') expect(c.timeout).not.toBe(Infinity);
          if (end.reason === 'killed') expect(c.onOverlap === 'stopPrevious' || end.afterStop).toBe(true);
          if (end.reason === 'shutdown') expect(end.afterStop).toBe(true);
          if (end.reason === 'error') expect(failing).toBe(true);
          if (end.reason === 'normal')
            expect(behaviour.kind === 'return' || behaviour.kind === 'resolve').toBe(true);
          // An error is passed on for a run that threw or rejected, whatever stopped it first; never otherwise.
          if ('error' in end) expect(failing).toBe(true);
          if (end.reason === 'error') expect('error' in end).toBe(true);
        }
      }),
      RUNS,
    );
  });

  it("with 'ignore' or 'stopPrevious', no run starts while another is tracked", async () => {
    await fc.assert(
      fc.asyncProperty(
        job.filter((c) => c.onOverlap !== 'run'),
        async (c) => {
          const { seen } = await play(c);
          let inFlight = 0;
          for (const event of seen) {
            if (event.type === 'started') expect(inFlight++).toBe(0);
            if (event.type === 'finished') inFlight--;
          }
        },
      ),
      RUNS,
    );
  });

  it('regular mode: runs start on the grid and never early; ticks and missed slots account for every slot', async () => {
    await fc.assert(
      fc.asyncProperty(
        job.filter((c) => c.delayMode === 'regular' && c.mode === 'auto'),
        async (c) => {
          const { seen, startedAt } = await play(c);
          const first = startedAt + (c.initialDelay ?? c.every);
          for (const run of of(seen, 'started')) {
            const slot = (run.scheduledAt - first) / c.every;
            expect(Number.isInteger(slot) && slot >= 0).toBe(true);
            expect(run.startedAt).toBeGreaterThanOrEqual(run.scheduledAt);
          }
          // A guard still pending reports its own missed ticks; the slot accounting is for jobs without.
          if (c.guards?.some((guard) => guard.kind === 'slow')) return;
          const ticks = of(seen, 'nextTick').slice(1); // the first reports the start, each later one a tick
          if (ticks.length === 0) return;
          const missed = of(seen, 'missed').reduce((sum, event) => sum + event.count, 0);
          const last = ticks.at(-1)!.seenAt;
          expect(ticks.length + missed).toBe(Math.floor((last - first) / c.every) + 1);
        },
      ),
      RUNS,
    );
  });

  it('shifted mode: the next tick comes no sooner than every after the previous run ended', async () => {
    await fc.assert(
      fc.asyncProperty(
        job.filter((c) => c.delayMode === 'shifted' && c.mode === 'auto'),
        async (c) => {
          const { seen } = await play(c);
          const ends = new Map(of(seen, 'finished').map((event) => [event.jobId, event.seenAt]));
          for (const run of of(seen, 'started').slice(1)) {
            const previousEnd = ends.get(run.jobId - 1)!;
            expect(run.scheduledAt - previousEnd).toBeGreaterThanOrEqual(c.every);
          }
        },
      ),
      RUNS,
    );
  });

  it('after stop() nothing starts, no deadline remains, and stop() resolves within the grace', async () => {
    await fc.assert(
      fc.asyncProperty(job, async (c) => {
        const { seen, stopCalledAt, stopResolvedAt, deadlines } = await play(c);
        expect(seen.filter((event) => event.type === 'started' && event.afterStop)).toEqual([]);
        expect(deadlines).toBe(0);
        const grace =
          c.jobShutdown === 'brutalKill'
            ? 0
            : c.jobShutdown === Infinity
              ? LONGEST_RUN
              : Math.max(c.jobShutdown, 1);
        expect(stopResolvedAt! - stopCalledAt).toBeLessThanOrEqual(grace);
      }),
      RUNS,
    );
  });
});
