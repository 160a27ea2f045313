import { afterEach, beforeEach, jest } from '@jest/globals';
import { type PeriodicCoordinator } from '../../lib/scheduler/coordinator-port.js';
import { StoreLog } from '../../lib/scheduler/store-log.js';
import type { HistorySettings } from '../../lib/scheduler/history.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { Replica } from '../../lib/scheduler/replica.js';
import { spreadOver } from '../../lib/scheduler/spread.js';
import type { PeriodicEvent, PeriodicEventType } from '../../lib/scheduler/events.js';
import type { PeriodicSchedulerOptions } from '../../lib/scheduler/options.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';

/** An event sink that keeps every event, with short views for assertions. */
export class EventLog {
  readonly events: PeriodicEvent[] = [];
  readonly sink = (event: PeriodicEvent): void => {
    this.events.push(event);
  };

  /** The event types in order, e.g. `['nextTick', 'started', 'finished']`. */
  types(): PeriodicEventType[] {
    return this.events.map((event) => event.type);
  }

  of<T extends PeriodicEventType>(type: T): Extract<PeriodicEvent, { type: T }>[] {
    return this.events.filter((event): event is Extract<PeriodicEvent, { type: T }> => event.type === type);
  }

  clear(): void {
    this.events.length = 0;
  }
}

type Options = Omit<PeriodicSchedulerOptions, 'name' | 'run'> &
  Partial<Pick<PeriodicSchedulerOptions, 'name' | 'run'>>;

/** A started scheduler named "job" with an event log; the run defaults to one that returns at once. */
export function startScheduler(options: Options): { scheduler: PeriodicScheduler; log: EventLog } {
  const log = new EventLog();
  const scheduler = new PeriodicScheduler({ name: 'job', run: () => undefined, ...options }, log.sink);
  scheduler.start();
  return { scheduler, log };
}

/**
 * Two replicas of `store`, each with the exclusive job "job" of `options`, started: first the one the fleet's
 * spread gives the job (the holder), then the other; named r1 and r2 in either order. Their store failures are
 * not reported.
 */
export function twoReplicas(
  store: PeriodicCoordinator,
  options: Omit<Options, 'coordinator' | 'exclusive'>,
  history?: HistorySettings,
): { scheduler: PeriodicScheduler; log: EventLog; name: string }[] {
  const replicas = ['r1', 'r2'].map(
    (name) => new Replica(new StoreLog(store, { error: () => undefined, log: () => undefined }), name),
  );
  const owner = spreadOver(
    ['job'],
    replicas.map((replica) => replica.owner),
  ).get('job');
  if (replicas[1].owner === owner) replicas.reverse();
  return replicas.map((replica) => {
    const log = new EventLog();
    const scheduler = new PeriodicScheduler(
      { name: 'job', run: () => undefined, ...options, exclusive: true, coordinator: store },
      log.sink,
      { replica, history },
    );
    scheduler.start();
    return { scheduler, log, name: replica.name };
  });
}

/** Advances the fake timers by `ms`, then lets the promises they settled run. */
export async function advance(ms: number): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
  await flush();
}

/** Every test of the calling file runs on Jest's fake timers, with its mocks restored afterwards. */
export function useFakeTimers(): void {
  beforeEach(() => {
    jest.useFakeTimers();
  });
  afterEach(() => {
    jest.restoreAllMocks();
    jest.useRealTimers();
  });
}

/** A promise with its settle functions, for runs and guards that end when the test says so. */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

export function deferred<T = void>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A job whose runs return, in turn, the promises of `runs`: each run ends when the test settles its promise. */
export function runsInTurn(count: number): { runs: Deferred<void>[]; run: () => Promise<void> } {
  const runs = Array.from({ length: count }, () => deferred());
  let next = 0;
  return { runs, run: () => runs[next++].promise };
}

/** A run that settles only when its signal is aborted (it honours cancellation). */
export function honouringRun({ signal }: PeriodicContext): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve()));
}

/** A run that never settles and ignores its signal. */
export function stuckRun(): Promise<never> {
  return new Promise<never>(() => undefined);
}

/** Lets pending promise callbacks run (real microtasks; Jest's fake timers do not touch promises). */
export async function flush(): Promise<void> {
  for (let i = 0; i < 50; i++) await Promise.resolve();
}

/**
 * Jobs of the calling file started on Jest's fake timers at a date of the test's choice, recording the slots of
 * their runs as ISO strings; stopped, with the real timers back, after each test.
 */
export function useDatedJobs(): (
  start: string,
  options: Options,
) => { scheduler: PeriodicScheduler; slots: string[]; contexts: PeriodicContext[]; log: EventLog } {
  const schedulers: PeriodicScheduler[] = [];
  afterEach(async () => {
    await Promise.all(schedulers.splice(0).map((scheduler) => scheduler.stop()));
    jest.restoreAllMocks();
    jest.useRealTimers();
  });
  return (start, options) => {
    jest.useFakeTimers({ now: new Date(start) });
    const slots: string[] = [];
    const contexts: PeriodicContext[] = [];
    const log = new EventLog();
    const scheduler = new PeriodicScheduler(
      {
        name: 'job',
        ...options,
        run: (context) => {
          slots.push(context.scheduledDate.toISOString());
          contexts.push(context);
          return options.run?.(context);
        },
      },
      log.sink,
    );
    scheduler.start();
    schedulers.push(scheduler);
    return { scheduler, slots, contexts, log };
  };
}
