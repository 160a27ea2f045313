import { DeadlineTimer, now } from './clock.js';
import type { PeriodicFleetSchedule } from './coordinator.js';
import { PeriodicConfigError } from './errors.js';
import { JobEvents, type PeriodicEventSink } from './events.js';
import { FleetSlots } from './fleet.js';
import { Lease } from './lease.js';
import {
  noCoordinator,
  type PeriodicSchedulerOptions,
  resolveOptions,
  type ResolvedPeriodicOptions,
} from './options.js';
import type { Run, SyncTickResult, TickResult } from './run.js';
import { JobRecord, type PeriodicJobStatus, statusOf } from './status.js';
import { runToEnd, syncTickTimeout } from './sync-tick.js';
import { TickTimer } from './tick-timer.js';

/**
 * What can be done with a scheduler, and the state it keeps: start and stop it, tick it by hand, trigger, pause
 * and resume it, read its status. What a tick does is {@link PeriodicScheduler}'s (periodic-scheduler.ts),
 * which extends this class.
 */
export abstract class SchedulerControls {
  /** The job's name. */
  readonly name: string;
  /** The job's options, validated, with defaults filled in. */
  readonly options: ResolvedPeriodicOptions;
  /** @internal The job's function. */
  protected readonly job: PeriodicSchedulerOptions['run'];
  /** @internal */
  protected readonly events: JobEvents;
  /** @internal */
  protected phase: 'idle' | 'ticking' | 'stopped' = 'idle';
  /** @internal Paused: ticks start nothing until `resume()`; the timer keeps the grid. */
  protected paused = false;
  /** What the job did: see `record`. */
  private recorded: JobRecord | undefined;
  /** @internal The runs being tracked, in start order: an array, lighter than a Set for the one or two a job has. */
  protected readonly runs: Run[] = [];
  /** @internal When the job's ticks come. */
  protected readonly ticks: TickTimer;
  /**
   * @internal A tick's async guard, or an exclusive job's claim of its slot, is pending: a tick that comes meanwhile
   * is missed (a trigger only for a guard). `waitingSince` is when the guard or claim began, on the `now()` timeline.
   */
  protected guardPending = false;
  protected claimPending = false;
  protected waitingSince = 0;
  private stopped: Promise<void> | undefined;
  /** @internal Resolves `stop()` once the last run has ended. */
  protected drained: (() => void) | undefined;
  /** @internal Jitter: the wait of a tick before it is handled. */
  protected jitterTimer: DeadlineTimer | undefined;
  /** @internal Exclusive jobs: the lease this replica must hold to start a run. */
  protected readonly lease: Lease | undefined;
  /** @internal Exclusive jobs: this replica's part in the fleet's schedule. */
  protected readonly fleet: FleetSlots | undefined;

  /**
   * @param options the job's options with its `name` and the `run` function; invalid ones throw a
   *   {@link PeriodicConfigError}.
   * @param events where the scheduler reports its events.
   * @param where how error messages name the job, e.g. `@Periodic() on Cleanup.purge`.
   */
  constructor(options: PeriodicSchedulerOptions, events?: PeriodicEventSink, where?: string) {
    const name: unknown = options?.name;
    where ??= `job ${typeof name === 'string' && name !== '' ? JSON.stringify(name) : '(unnamed)'}`;
    const { options: resolved, calendar } = resolveOptions(options, where);
    this.options = resolved;
    if (this.options.exclusive) {
      if (options.coordinator === undefined) throw noCoordinator(where, '{ coordinator } in the options');
      this.lease = new Lease(options.coordinator, this.options.name, this);
      this.fleet = new FleetSlots(this.lease, this.options, (slot) => this.ticks.slotAfter(slot));
    }
    this.name = this.options.name;
    this.job = options.run;
    this.events = new JobEvents(this.name, events, where);
    this.ticks = new TickTimer(this.options, calendar, this.events, this);
  }

  /** `'idle'` until `start()`, `'ticking'` (or `'paused'`) until `stop()`, then `'stopped'` for good. */
  get state(): PeriodicJobStatus['state'] {
    return this.paused && this.phase === 'ticking' ? 'paused' : this.phase;
  }

  /** The number of runs being tracked: started, and neither settled nor abandoned. */
  get running(): number {
    return this.runs.length;
  }

  /** Starts ticking: the first tick comes `initialDelay` ms from now (auto mode). Idempotent. */
  start(): void {
    if (this.phase === 'ticking') return;
    if (this.phase === 'stopped') {
      throw new PeriodicConfigError(
        `job "${this.name}" was stopped and cannot start again; create a new PeriodicScheduler instead`,
      );
    }
    this.phase = 'ticking';
    this.lease?.start();
    this.ticks.start();
  }

  /**
   * Stops ticking, stops every run (`'shutdown'`, grace `jobShutdown`) and resolves once each has settled
   * or been abandoned, and a lease this replica holds has been released. Idempotent: every call returns the
   * same promise.
   */
  stop(): Promise<void> {
    if (this.stopped === undefined) {
      this.halt();
      let drained: Promise<void>;
      if (this.runs.length === 0) {
        drained = Promise.resolve();
      } else {
        drained = new Promise((resolve) => (this.drained = resolve));
        for (const run of this.runs.slice()) run.stop('shutdown');
      }
      const { fleet } = this;
      this.stopped = fleet === undefined ? drained : drained.then(() => fleet.release());
    }
    return this.stopped;
  }

  /**
   * @internal Stops ticking for good: no tick starts anything any more, while the runs in flight go on until
   * `stop()`. An application that begins to close halts every job at once, and drains each in its turn.
   */
  halt(): void {
    if (this.phase === 'stopped') return;
    this.phase = 'stopped';
    this.ticks.release();
    this.jitterTimer?.cancel();
    // The lease is renewed while runs drain, so that no other replica starts the job meanwhile.
    this.lease?.retire();
  }

  /** Manual mode: performs one tick; resolves once the guard has been evaluated and the run, if any, started. */
  async tick(): Promise<TickResult> {
    if (this.options.mode !== 'manual') return { ok: false, error: 'notInManualMode' };
    return this.trigger();
  }

  /**
   * Performs one tick now, in either mode, as a manual tick does (guard, overlap policy, events); the grid does
   * not move. Resolves once the guard has been evaluated and the run, if any, started.
   */
  async trigger(): Promise<TickResult> {
    const refusal = this.refuseTick();
    if (refusal !== undefined) return refusal;
    const run = await (this.options.mode === 'manual'
      ? this.manualTick(undefined)
      : this.handleTick(now(), Date.now(), undefined, true));
    return run === undefined ? { ok: false, error: 'jobNotStarted' } : { ok: true, jobId: run.jobId };
  }

  /**
   * Ticks start nothing (no guard, no run) until `resume()`; runs in flight go on, and the grid keeps its
   * place. Local to this process: an exclusive job's lease is kept.
   */
  pause(): void {
    this.paused = true;
  }

  /** Ticks start runs again: the next is the next slot of the grid; in shifted mode, `every` from now. */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    // A shifted job with a run in flight arms its next tick when that run ends.
    if (this.options.delayMode === 'shifted' && this.ticks.armed) this.armNext(this.options.every);
  }

  /**
   * @internal Auto mode: whether a tick has been due for more than two intervals and has not come, as when its
   * timer died, or has waited that long for its guard. A shifted job with a run in flight is not due.
   */
  get overdue(): boolean {
    if (this.state !== 'ticking' || this.options.mode !== 'auto') return false;
    const { interval } = this.ticks;
    if (interval === undefined) return false;
    // A tick stuck on its guard (or its claim): the ticks after it come, and are all missed.
    if ((this.guardPending || this.claimPending) && now() - this.waitingSince > 2 * interval) return true;
    if (this.options.delayMode === 'shifted' && this.runs.length > 0) return false;
    return this.ticks.lateness > 2 * interval;
  }

  /** What the job is doing, and what it did last. */
  status(): PeriodicJobStatus {
    const ticking = this.state === 'ticking' && this.ticks.armed;
    return statusOf(
      {
        options: this.options,
        state: this.state,
        running: this.runs.length,
        nextSlot: ticking ? this.ticks.slot : 0,
        lease: this.lease,
      },
      this.recorded,
    );
  }

  /**
   * Manual mode: performs one tick and resolves when the run it started has ended. Rejects with a
   * `PeriodicTimeoutError` when `timeout` ms pass first; the run goes on.
   */
  async syncTick(options: { timeout?: number } = {}): Promise<SyncTickResult> {
    const timeout = syncTickTimeout(this.name, options);
    if (this.options.mode !== 'manual') return { ok: false, error: 'notInManualMode' };
    return this.refuseTick() ?? runToEnd(this.name, timeout, (waiter) => this.manualTick(waiter));
  }

  /** @internal Arms the next tick `delay` ms from now (the first tick, shifted mode); manual mode only reports it. */
  protected armNext(delay: number): void {
    this.ticks.armNext(delay, this.fleet);
  }

  /** Why a tick asked for now would start nothing, if it is known before the tick. */
  private refuseTick(): Extract<TickResult, { ok: false }> | undefined {
    if (this.phase !== 'ticking') return { ok: false, error: 'jobNotStarted' };
    if (this.paused) return { ok: false, error: 'paused' };
    if (this.lease?.held === false) return { ok: false, error: 'notLeaseHolder' };
    return undefined;
  }

  /** @internal What the job did, made when it first has something to count. */
  protected get record(): JobRecord {
    return (this.recorded ??= new JobRecord());
  }

  // ---- What a tick does: PeriodicScheduler's ----

  /** @internal A tick asked for by `tick` or `syncTick` (manual mode). */
  protected abstract manualTick(waiter: Run['waiter']): Promise<Run | undefined>;

  /** @internal A tick, through the lease, the guard and the overlap policy; `triggered`: asked for in auto mode. */
  protected abstract handleTick(
    scheduledAt: number,
    slot: number,
    waiter: Run['waiter'],
    triggered?: boolean,
  ): Run | undefined | Promise<Run | undefined>;

  /** @internal What the tick timer tells (a `TickTarget`). */
  abstract tickDue(scheduledAt: number, slot: number): void;
  /** @internal What the tick timer tells (a `TickTarget`). */
  abstract slotsDropped(count: number): boolean;
  /** @internal What the lease tells (a `LeaseHolder`). */
  abstract leaseAcquired(fencingToken: number, stored: PeriodicFleetSchedule | null): void;
  /** @internal What the lease tells (a `LeaseHolder`). */
  abstract leaseLost(reason: string): void;
}
