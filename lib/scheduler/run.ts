import { tracingChannel } from 'node:diagnostics_channel';
import type { PeriodicRunEntry } from './coordinator-port.js';
import { DeadlineTimer, now } from './deadline-timer.js';
import { type AbortReason, PeriodicAbortError } from './errors.js';
import { FAILED_RUNS, type JobExitReason } from './events.js';

/** What a run of a job receives. */
export interface PeriodicContext<TData = unknown> {
  /** The name of the job this run is of, as `@Periodic({ name })` or the registry gave it. */
  readonly name: string;
  /** 1, 2, 3 … per job, in start order. */
  readonly jobId: number;
  /** Aborted when the scheduler stops this run; its `reason` is a {@link PeriodicAbortError}. */
  readonly signal: AbortSignal;
  /** The tick's deadline on the `performance.now()` timeline, in ms. */
  readonly scheduledAt: number;
  /** `performance.now()` when the run started. */
  readonly startedAt: number;
  /** The wall-clock time of the run's slot; a manual tick's slot is the moment it was asked for. */
  readonly scheduledDate: Date;
  /** Exclusive jobs only: grows with every new lease holder, so a resource can refuse a stale one. */
  readonly fencingToken?: number;
  /** 1 for the first run of a slot; 2, 3 … for its retries (`retry`). */
  readonly attempt: number;
  /**
   * A stored schedule's `data` (docs/schedules.md), as its definition had it when the run started, frozen: a
   * run cannot change what the runs after it get. `undefined` for every other job.
   */
  readonly data: TData;
}

/** What `tick()` resolves: the run it started, or why none started. */
export type TickResult =
  /** `replica`: the replica that started the run, for an exclusive job's trigger. */
  | { ok: true; jobId: number; replica?: string }
  | {
      ok: false;
      error:
        | 'jobNotStarted'
        | 'notInManualMode'
        | 'paused'
        | 'completed'
        | 'notLeaseHolder'
        | 'noHolder'
        | 'storeUnreachable';
    };

/** What `syncTick()` resolves: how the run it started ended, or why none started. */
export type SyncTickResult =
  | { ok: true; reason: JobExitReason; error?: unknown; durationMs: number }
  | { ok: false; error: 'jobNotStarted' | 'notInManualMode' | 'paused' | 'completed' | 'notLeaseHolder' };

/** How a run ended: `error` is present when it threw or rejected. */
export type RunOutcome = Omit<Extract<SyncTickResult, { ok: true }>, 'ok'>;

/**
 * Where a tick comes from: its timer, `tick()`/`syncTick()` in manual mode, `trigger()` in auto mode, the retry
 * of a run that failed, or the recovery of a slot whose holder did not finish it (`delivery: 'atLeastOnce'`).
 */
export type TickOrigin = 'timer' | 'manual' | 'trigger' | 'retry' | 'recovery' | 'backfill';

/** What a tick of a job carries, from its deadline until it has started its run or ended without one. */
export interface Tick {
  /** Its deadline on the `now()` timeline. */
  readonly scheduledAt: number;
  /** The wall-clock time it is for, which names it to the fleet; a manual tick's is when it was asked for. */
  readonly slot: number;
  readonly origin: TickOrigin;
  /** `syncTick()`: told how the run ended. */
  readonly waiter: ((outcome: RunOutcome) => void) | undefined;
}

/** What a run reads of its job's options (the resolved options of `options.ts` have them all). */
export interface RunOptions {
  readonly name: string;
  readonly timeout: number;
  readonly jobShutdown: number | 'brutalKill';
}

/** The scheduler of a run: it calls the job, and is told once when the run ends. */
export interface RunOwner {
  readonly options: RunOptions;
  /** Calls the job with the run as its context. */
  call(run: Run): unknown;
  /** The run settled (`failed` tells whether it threw), or was abandoned. */
  runEnded(run: Run, reason: JobExitReason, failed: boolean, error: unknown): void;
}

/**
 * What the tracing channel `nestjs-periodic:run` publishes for each run. Once the run has ended: its
 * `exitReason`; `result`, what a run that ended `'normal'` returned or resolved; `error`, what it threw or
 * rejected, or for a run stopped as a failure (`'timeout'`, `'killed'`, `'leaseLost'`), its signal's reason.
 */
export interface PeriodicRunTrace {
  readonly name: string;
  readonly jobId: number;
  readonly scheduledAt: number;
  readonly fencingToken: number | undefined;
  /** A retry's attempt: 2, 3 … (the first run of a slot has none). */
  readonly attempt?: number;
  exitReason?: JobExitReason;
  result?: unknown;
  error?: unknown;
}

/**
 * Every run, for APM tools, as `traceSync` and `tracePromise` publish a call: `start` (its stores bound for the
 * call) and `end` around the call; a run that returned a promise then publishes `asyncStart` and `asyncEnd`
 * when it ends, settled or abandoned; `error` comes before `end` or `asyncStart` for a run that failed.
 */
const RUNS = tracingChannel<PeriodicRunTrace>('nestjs-periodic:run');

/** The exit reason of a stopped run that settled within its grace. */
const SETTLED_AFTER: Record<AbortReason, JobExitReason> = {
  timeout: 'timeout',
  stopPrevious: 'killed',
  shutdown: 'shutdown',
  leaseLost: 'leaseLost',
};

/** The exit reason of a stopped run that was abandoned. */
const ABANDONED_AFTER: Record<AbortReason, JobExitReason> = { ...SETTLED_AFTER, shutdown: 'killed' };

/** Bits of a run's state. */
const ARMS_NEXT = 1;
const ENDED = 2;
const ASYNC = 4;
const REPLACED = 8;

/**
 * A tick, and the call of the job it starts: made when the tick comes (its deadline, slot and origin), it waits
 * for its jitter, its claim and its guard; if the overlap policy lets it, it starts (`start()`) and is the
 * context the job receives, until it settles or is abandoned. One object per tick, the context included: a run
 * allocates nothing else unless it asks (`signal` and `scheduledDate` are made when first read, and an
 * `AbortController` costs more than the rest of a run together). Stopping a run aborts its signal and gives it a
 * grace to settle; the first stop decides its exit reason.
 */
export class Run implements Tick, PeriodicContext {
  // What the job receives has the context's fields only: the run's own state is private.
  readonly name: string;
  jobId = 0;
  readonly scheduledAt: number;
  startedAt = 0;
  fencingToken: number | undefined = undefined;
  data: unknown = undefined;
  readonly #owner: RunOwner;
  readonly #slot: number;
  readonly #origin: TickOrigin;
  readonly #waiter: Tick['waiter'];
  /** The wall-clock time the run started at (epoch ms). */
  #startedWall = 0;
  /**
   * ARMS_NEXT: in shifted mode, its end arms the next tick; ENDED: whatever it does from now on is swallowed;
   * ASYNC: the call returned a promise, and the trace ends with `asyncStart` and `asyncEnd`.
   */
  #flags = 0;
  /** Why the run was stopped, as its signal's reason; made by the first stop. */
  #abortError: PeriodicAbortError | undefined;
  /** Made when the run first reads its signal, and aborted already if the run was stopped before. */
  #controller: AbortController | undefined;
  #date: Date | undefined;
  /** The timeout while the run runs, then the grace once it has been stopped. */
  #timer: DeadlineTimer | undefined;
  /** What the tracing channel publishes of the run, if it had subscribers when the run started. */
  #trace: PeriodicRunTrace | undefined;
  /** The run's record in its job's history, if the job keeps one. */
  #record: PeriodicRunEntry | undefined = undefined;
  readonly #attempt: number;
  readonly #slotOrigin: TickOrigin;

  constructor(
    owner: RunOwner,
    scheduledAt: number,
    slot: number,
    origin: TickOrigin,
    waiter?: Tick['waiter'],
    /**
     * A retry: its attempt, whether its end arms the next tick (as the first attempt's would have), and where
     * the slot's first attempt came from.
     */
    retry?: { attempt: number; armsNext: boolean; of: TickOrigin },
  ) {
    this.name = owner.options.name;
    this.scheduledAt = scheduledAt;
    this.#owner = owner;
    this.#slot = slot;
    this.#origin = origin;
    this.#waiter = waiter;
    this.#attempt = retry?.attempt ?? 1;
    this.#slotOrigin = retry?.of ?? origin;
    // A triggered run is off the grid: its end arms no tick.
    if (retry === undefined ? origin !== 'trigger' && origin !== 'backfill' : retry.armsNext) {
      this.#flags = ARMS_NEXT;
    }
  }

  /** 1 for the first run of a slot; 2, 3 … for its retries. */
  get attempt(): number {
    return this.#attempt;
  }

  /** @internal Where the slot's first attempt came from: a retry's, or the run's own origin. */
  get slotOrigin(): TickOrigin {
    return this.#slotOrigin;
  }

  get slot(): number {
    return this.#slot;
  }

  get origin(): TickOrigin {
    return this.#origin;
  }

  get waiter(): Tick['waiter'] {
    return this.#waiter;
  }

  /** The run's signal, aborted already if the run was stopped before it first asked. */
  get signal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#abortError !== undefined) this.#controller.abort(this.#abortError);
    }
    return this.#controller.signal;
  }

  get scheduledDate(): Date {
    return (this.#date ??= new Date(this.#slot));
  }

  /** @internal The wall-clock time the run started at (epoch ms). */
  get startedWall(): number {
    return this.#startedWall;
  }

  /** @internal The run's record in its job's history, if the job keeps one. */
  get record(): PeriodicRunEntry | undefined {
    return this.#record;
  }

  set record(entry: PeriodicRunEntry | undefined) {
    this.#record = entry;
  }

  /** @internal Why the run was stopped, as its signal's reason; undefined if it was not. */
  get stopError(): PeriodicAbortError | undefined {
    return this.#abortError;
  }

  /**
   * @internal True once the run has been stopped by `onOverlap: 'stopPrevious'`, also when it was stopping
   * already (a timeout's grace): a later slot's run has taken its place.
   */
  get replaced(): boolean {
    return (this.#flags & REPLACED) !== 0;
  }

  /** @internal In shifted mode, whether the run's end arms the next tick. */
  get armsNext(): boolean {
    return (this.#flags & ARMS_NEXT) !== 0;
  }

  /** @internal The run replaces one of the grid's (`stopPrevious`): its end arms the next tick in its place. */
  replacesGridRun(): void {
    this.#flags |= ARMS_NEXT;
  }

  /** @internal The tick starts its run, numbered `jobId`, with the lease's `fencingToken` for an exclusive job. */
  start(jobId: number, fencingToken: number | undefined, data: unknown): void {
    this.jobId = jobId;
    this.fencingToken = fencingToken;
    this.data = data;
    this.startedAt = now();
    this.#startedWall = Date.now();
  }

  /** @internal Calls the job; a run that returns a promise ends when it settles, any other run ends at once. */
  launch(): void {
    const trace = RUNS.hasSubscribers ? this.#startTrace() : undefined;
    let result: unknown;
    try {
      const owner = this.#owner;
      result = trace === undefined ? owner.call(this) : RUNS.start.runStores(trace, owner.call, owner, this);
    } catch (error) {
      return this.#settle(true, error);
    }
    if (!isThenable(result)) return this.#settle(false, result);
    if (trace !== undefined) {
      this.#flags |= ASYNC;
      RUNS.end.publish(trace);
    }
    // Its `then` is called once, here: a thenable that runs a query on `then` (a query builder) runs it once.
    Promise.resolve(result).then(
      (value) => this.#settle(false, value),
      (error: unknown) => this.#settle(true, error),
    );
    // The job may have stopped its own scheduler; that stop's grace timer must stay.
    const { timeout } = this.#owner.options;
    if (timeout !== Infinity && this.#abortError === undefined) this.#armTimer(this.startedAt + timeout);
  }

  /**
   * @internal Aborts the run's signal, then abandons it when its grace runs out: at once after `'stopPrevious'`
   * or with `jobShutdown: 'brutalKill'`, never with `Infinity`. A run already stopped keeps its first reason.
   */
  stop(reason: AbortReason): void {
    if ((this.#flags & ENDED) !== 0) return;
    if (reason === 'stopPrevious') this.#flags |= REPLACED;
    const grace = reason === 'stopPrevious' ? 'brutalKill' : this.#owner.options.jobShutdown;
    if (this.#abortError !== undefined) {
      if (grace === 'brutalKill') this.#abandon();
      return;
    }
    this.#timer?.cancel();
    this.#abortError = new PeriodicAbortError(reason, this.#abortMessage(reason));
    this.#controller?.abort(this.#abortError);
    // An abort listener may have stopped the scheduler, and with it this run.
    if ((this.#flags & ENDED) !== 0) return;
    if (grace === 'brutalKill') return this.#abandon();
    if (grace !== Infinity) this.#armTimer(now() + grace);
  }

  /** @internal The timeout ran out, or the grace after a stop did. */
  onDeadline(): void {
    if (this.#abortError === undefined) this.stop('timeout');
    else this.#abandon();
  }

  /** Runs without a timeout that are never stopped, the most common kind, allocate no timer at all. */
  #armTimer(deadline: number): void {
    (this.#timer ??= new DeadlineTimer(this)).armAt(deadline);
  }

  /** The run returned or resolved `value`, or threw or rejected it (`failed`). */
  #settle(failed: boolean, value: unknown): void {
    if ((this.#flags & ENDED) !== 0) return;
    const stopped = this.#abortError?.reason;
    const reason = stopped === undefined ? (failed ? 'error' : 'normal') : SETTLED_AFTER[stopped];
    this.#end(reason, failed, value);
  }

  #abandon(): void {
    this.#end(ABANDONED_AFTER[this.#abortError!.reason], false, undefined);
  }

  #end(reason: JobExitReason, failed: boolean, value: unknown): void {
    this.#flags |= ENDED;
    this.#timer?.cancel();
    if (this.#trace !== undefined) this.#endTrace(this.#trace, reason, failed, value);
    this.#owner.runEnded(this, reason, failed, failed ? value : undefined);
  }

  #startTrace(): PeriodicRunTrace {
    const { name, jobId, scheduledAt, fencingToken, attempt } = this;
    const trace = { name, jobId, scheduledAt, fencingToken };
    return (this.#trace = attempt === 1 ? trace : { ...trace, attempt });
  }

  #endTrace(trace: PeriodicRunTrace, reason: JobExitReason, failed: boolean, value: unknown): void {
    trace.exitReason = reason;
    if (failed) trace.error = value;
    // A run stopped as a failure: its signal's reason.
    else if (FAILED_RUNS.has(reason)) trace.error = this.#abortError;
    else if (reason === 'normal') trace.result = value;
    if (failed || trace.error !== undefined) RUNS.error.publish(trace);
    if ((this.#flags & ASYNC) !== 0) {
      RUNS.asyncStart.publish(trace);
      RUNS.asyncEnd.publish(trace);
    } else RUNS.end.publish(trace);
  }

  #abortMessage(reason: AbortReason): string {
    const run = `job ${this.name}#${this.jobId}`;
    switch (reason) {
      case 'timeout':
        return `${run} timed out after ${this.#owner.options.timeout}ms`;
      case 'stopPrevious':
        return `${run} was stopped: a new run started (onOverlap: 'stopPrevious')`;
      case 'shutdown':
        return `${run} was stopped: its scheduler is shutting down`;
      case 'leaseLost':
        return `${run} was stopped: this replica lost the job's lease`;
    }
  }
}

/** Whether a value is a promise or promise-like. */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | null)?.then === 'function';
}
