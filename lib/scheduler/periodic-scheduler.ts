import { DeadlineTimer, now } from './clock.js';
import { PeriodicConfigError } from './errors.js';
import { type JobExitReason, JobEvents, type PeriodicEventSink } from './events.js';
import { type PeriodicSchedulerOptions, resolveOptions, type ResolvedPeriodicOptions } from './options.js';
import type { PeriodicFleetSchedule } from './coordinator.js';
import { FleetSlots } from './fleet.js';
import { Lease } from './lease.js';
import { runToEnd, syncTickTimeout } from './sync-tick.js';
import { TickTimer } from './tick-timer.js';
import { isThenable, Run, type RunOutcome, type SyncTickResult, type TickResult } from './run.js';
import { JobRecord, type PeriodicJobStatus, statusOf } from './status.js';

/**
 * One scheduler runs one job: it ticks on a monotonic clock, evaluates the guard, applies the overlap
 * policy, starts runs, stops them on timeout or shutdown, and reports every step as an event. Plain
 * TypeScript: usable without Nest. An `exclusive` job starts runs only while this replica holds its lease.
 * It is the listener of its tick timer, the owner of its runs and the holder of its lease, through methods
 * kept out of the published declarations; it does not declare those interfaces, which would name members
 * the declarations leave out.
 */
export class PeriodicScheduler {
  /** The job's name. */
  readonly name: string;
  /** The job's options, validated, with defaults filled in. */
  readonly options: ResolvedPeriodicOptions;
  private readonly job: PeriodicSchedulerOptions['run'];
  private readonly events: JobEvents;
  private phase: 'idle' | 'ticking' | 'stopped' = 'idle';
  /** Paused: ticks start nothing until `resume()`; the timer keeps the grid. */
  private paused = false;
  /** What the job did: see `record`. */
  private recorded: JobRecord | undefined;
  /** The runs being tracked, in start order: an array, lighter than a Set for the one or two a job has. */
  private readonly runs: Run[] = [];
  private lastJobId = 0;
  /** When the job's ticks come. */
  private readonly ticks: TickTimer;
  /**
   * A tick is waiting for its jitter, for its slot to be claimed or for its guard: a tick that comes meanwhile is
   * missed. `pendingSince` is when it began to wait, on the `now()` timeline.
   */
  private pending = false;
  private pendingSince = 0;
  private stopped: Promise<void> | undefined;
  private drained: (() => void) | undefined;
  /** Jitter: the wait of a tick before it is handled, and the tick (its deadline and slot) while it waits. */
  private jitterTimer: DeadlineTimer | undefined;
  private jittered: { scheduledAt: number; slot: number } | undefined;
  /** Exclusive jobs: the lease this replica must hold to start a run. */
  private readonly lease: Lease | undefined;
  /** Exclusive jobs: this replica's part in the fleet's schedule. */
  private readonly fleet: FleetSlots | undefined;

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
      if (options.coordinator === undefined) {
        throw new PeriodicConfigError(
          `${where}: "exclusive" needs a coordinator to share the job's lease between replicas, and none was ` +
            'given: pass { coordinator } with the options, a RedisCoordinator, a PostgresCoordinator or an ' +
            'InMemoryCoordinator, or remove "exclusive"',
        );
      }
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
    this.ticks.cancel();
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
    const { interval } = this.ticks;
    if (this.state !== 'ticking' || this.options.mode !== 'auto' || interval === undefined) return false;
    // A tick stuck on its guard (or its claim): the ticks after it come, and are all missed.
    if (this.pending && now() - this.pendingSince > 2 * interval) return true;
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

  // ---- One tick ----

  /**
   * @internal Reports the slots a late tick dropped; a replica without the lease reports nothing of the job but
   * its next tick. Returns false when a listener stopped the scheduler (or removed the job).
   */
  slotsDropped(count: number): boolean {
    // A paused job drops its ticks on purpose.
    if (this.lease?.held !== false && !this.paused) this.missed(count);
    return this.phase === 'ticking';
  }

  private missed(count: number): void {
    this.record.missed += count;
    if (this.events.wants('missed')) this.events.emit({ type: 'missed', name: this.name, count });
  }

  /**
   * @internal Handles a timer tick, after a random delay under `jitter` past its slot if there is one (at once
   * if the tick comes that late).
   */
  tickDue(scheduledAt: number, slot: number): void {
    const { jitter } = this.options;
    // A replica without the lease has nothing to delay.
    if (jitter === 0 || this.lease?.held === false) {
      void this.handleTick(scheduledAt, slot, undefined);
      return;
    }
    // A tick still waiting when the next comes (a pattern's gap that day was shorter than the jitter) goes now.
    if (this.jittered !== undefined) this.tickJittered();
    this.jittered = { scheduledAt, slot };
    this.waiting();
    this.jitterTimer ??= new DeadlineTimer({ onDeadline: () => this.tickJittered() });
    this.jitterTimer.armAt(scheduledAt + Math.random() * jitter);
  }

  private tickJittered(): void {
    const { scheduledAt, slot } = this.jittered!;
    this.jittered = undefined;
    this.jitterTimer!.cancel();
    this.pending = false;
    void this.handleTick(scheduledAt, slot, undefined);
  }

  /** Manual mode: a tick asked for by `tick` or `syncTick`. */
  private async manualTick(waiter: Run['waiter']): Promise<Run | undefined> {
    this.ticks.manualTick();
    return this.handleTick(now(), Date.now(), waiter);
  }

  /**
   * Claims the slot of an exclusive job's timer tick (`slot`: its wall-clock time), evaluates the guard, then
   * starts a run. Stays synchronous unless the slot is claimed or the guard returns a promise. A `triggered`
   * tick (asked for in auto mode) claims no slot and arms no next tick: the grid does not move.
   */
  private handleTick(
    scheduledAt: number,
    slot: number,
    waiter: Run['waiter'],
    triggered = false,
  ): Run | undefined | Promise<Run | undefined> {
    if (this.phase !== 'ticking') return undefined;
    const { lease } = this;
    // Without the lease, or paused, a tick starts nothing: no guard, no event.
    if (lease?.held === false || this.paused) return this.endTickWithoutRun(triggered);
    if (this.pending) {
      this.missed(1);
      return this.endTickWithoutRun(triggered);
    }
    if (lease === undefined || this.options.mode === 'manual' || triggered)
      return this.passGuard(scheduledAt, slot, waiter, triggered);
    // The slot is the fleet's: claimed in the store first, it runs in no other replica, now or later.
    this.waiting();
    const fleet = this.fleet!;
    return fleet.claim(
      slot,
      (held) => {
        this.pending = false;
        // Paused meanwhile: the slot was claimed, and is dropped as any tick of a paused job.
        if (!held || this.paused) return this.endTickWithoutRun();
        fleet.hold(slot);
        return this.passGuard(scheduledAt, slot, waiter);
      },
      () => this.phase === 'stopped',
    );
  }

  private passGuard(
    scheduledAt: number,
    slot: number,
    waiter: Run['waiter'],
    triggered = false,
  ): Run | undefined | Promise<Run | undefined> {
    const guard = this.options.when;
    if (guard === undefined) return this.startRun(scheduledAt, slot, waiter, triggered);
    let verdict: unknown;
    try {
      verdict = guard();
      if (!isThenable(verdict)) {
        return verdict
          ? this.startRun(scheduledAt, slot, waiter, triggered)
          : this.endTickWithoutRun(triggered);
      }
    } catch (error) {
      return this.guardFailed(error, triggered);
    }
    this.waiting();
    return Promise.resolve(verdict).then(
      (passed) => {
        this.pending = false;
        // The lease may have been lost, or the job paused, while the guard was pending.
        return passed && this.lease?.held !== false && !this.paused
          ? this.startRun(scheduledAt, slot, waiter, triggered)
          : this.endTickWithoutRun(triggered);
      },
      (error: unknown) => {
        this.pending = false;
        return this.guardFailed(error, triggered);
      },
    );
  }

  /** Applies the overlap policy, then starts a run. */
  private startRun(
    scheduledAt: number,
    slot: number,
    waiter: Run['waiter'],
    triggered: boolean,
  ): Run | undefined {
    if (this.phase !== 'ticking') return undefined;
    if (this.runs.length > 0 && this.options.onOverlap !== 'run') {
      if (this.options.onOverlap === 'ignore') {
        this.record.skipped++;
        if (this.events.wants('skipped')) {
          const [stillRunning] = this.runs;
          this.events.emit({ type: 'skipped', name: this.name, stillRunning: stillRunning.jobId });
        }
        return this.endTickWithoutRun(triggered);
      }
      for (const previous of this.runs.slice()) {
        // In shifted mode the run that replaces one of the grid's arms the next tick in its place.
        if (!previous.triggered) triggered = false;
        previous.stop('stopPrevious');
        if (this.events.wants('stoppedPrevious')) {
          this.events.emit({ type: 'stoppedPrevious', name: this.name, jobId: previous.jobId });
        }
      }
      // An abort listener of the stopped run may have stopped this scheduler.
      if (this.phase !== 'ticking') return undefined;
    }
    const run = new Run(this.options, ++this.lastJobId, scheduledAt, slot, this, this.lease?.fencingToken);
    run.waiter = waiter;
    run.triggered = triggered;
    this.runs.push(run);
    this.record.runStarted(run.context.startedAt);
    if (this.events.wants('started')) {
      const { jobId, startedAt } = run.context;
      this.events.emit({ type: 'started', name: this.name, jobId, scheduledAt, startedAt });
    }
    run.launch(this.job);
    return run;
  }

  private guardFailed(error: unknown, triggered: boolean): undefined {
    // A guard that fails after its job stopped (a close, a removal) reports nothing.
    if (this.phase !== 'ticking') return undefined;
    this.record.guardFailed++;
    if (this.events.wants('guardFailed')) this.events.emit({ type: 'guardFailed', name: this.name, error });
    return this.endTickWithoutRun(triggered);
  }

  /** A tick that starts no run: in shifted mode the next tick comes `every` ms after it, unless it was triggered. */
  private endTickWithoutRun(triggered = false): undefined {
    if (this.options.delayMode === 'shifted' && this.phase === 'ticking' && !triggered) {
      this.armNext(this.options.every);
    }
    return undefined;
  }

  /** @internal A run of this job has ended. */
  runEnded(run: Run, reason: JobExitReason, failed: boolean, error: unknown): void {
    this.runs.splice(this.runs.indexOf(run), 1);
    // Read before the next tick is armed, so that the gap from this end to it is never below `every`.
    const endedAt = now();
    const durationMs = endedAt - run.context.startedAt;
    this.record.runEnded(reason, endedAt, durationMs, failed, error);
    // A run replaced by stopPrevious leaves the next tick to the run that replaced it; a triggered one, to
    // the grid.
    if (this.options.delayMode === 'shifted' && this.phase === 'ticking' && !run.replaced && !run.triggered) {
      this.armNext(this.options.every);
    }
    const listening = this.events.wants('finished', reason);
    if (listening || run.waiter !== undefined) {
      const outcome: RunOutcome = failed ? { reason, error, durationMs } : { reason, durationMs };
      if (listening) this.events.emit({ type: 'finished', name: this.name, jobId: run.jobId, ...outcome });
      run.waiter?.(outcome);
    }
    if (this.runs.length === 0) this.drained?.();
  }

  /** Arms the next tick `delay` ms from now (the first tick, shifted mode); manual mode only reports it. */
  private armNext(delay: number): void {
    this.ticks.armNext(delay, this.fleet);
  }

  // ---- The lease of an exclusive job ----

  /** @internal This replica now holds the job's lease: it continues the fleet's schedule. */
  leaseAcquired(fencingToken: number, stored: PeriodicFleetSchedule | null): void {
    if (this.events.wants('leaseAcquired'))
      this.events.emit({ type: 'leaseAcquired', name: this.name, fencingToken });
    if (this.options.mode !== 'auto' || this.phase !== 'ticking') return;
    const next = this.fleet!.takeOver(stored, this.ticks.slot, Date.now());
    if (next !== undefined) this.ticks.continueAt(next);
  }

  /** @internal This replica no longer holds the job's lease: its runs are stopped (`'leaseLost'`). */
  leaseLost(reason: string): void {
    if (this.events.wants('leaseLost')) this.events.emit({ type: 'leaseLost', name: this.name, reason });
    for (const run of this.runs.slice()) run.stop('leaseLost');
  }

  // ---- Plumbing ----

  /** Why a tick asked for now would start nothing, if it is known before the tick. */
  private refuseTick(): Extract<TickResult, { ok: false }> | undefined {
    if (this.phase !== 'ticking') return { ok: false, error: 'jobNotStarted' };
    if (this.paused) return { ok: false, error: 'paused' };
    if (this.lease?.held === false) return { ok: false, error: 'notLeaseHolder' };
    return undefined;
  }

  /** What the job did, made when it first has something to count. */
  private get record(): JobRecord {
    return (this.recorded ??= new JobRecord());
  }

  private waiting(): void {
    this.pending = true;
    this.pendingSince = now();
  }
}
