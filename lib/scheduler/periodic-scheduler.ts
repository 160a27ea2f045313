// The story of one tick, from the timer to the end of the run. What can be done with a scheduler (start, stop,
// manual ticks, trigger, pause, resume, status) and the state it keeps are SchedulerControls's, in controls.ts.
import { DeadlineTimer, now } from './clock.js';
import { SchedulerControls } from './controls.js';
import type { PeriodicFleetSchedule } from './coordinator.js';
import type { JobExitReason } from './events.js';
import { isThenable, Run, type RunOutcome } from './run.js';

/**
 * One scheduler runs one job: it ticks on a monotonic clock, evaluates the guard, applies the overlap
 * policy, starts runs, stops them on timeout or shutdown, and reports every step as an event. Plain
 * TypeScript: usable without Nest. An `exclusive` job starts runs only while this replica holds its lease.
 */
export class PeriodicScheduler extends SchedulerControls {
  private lastJobId = 0;
  /** Jitter: the tick (its deadline and slot) waiting for its delay. */
  private jittered: { scheduledAt: number; slot: number } | undefined;

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
    this.jitterTimer ??= new DeadlineTimer({ onDeadline: () => this.tickJittered() });
    this.jitterTimer.armAt(scheduledAt + Math.random() * jitter);
  }

  private tickJittered(): void {
    const { scheduledAt, slot } = this.jittered!;
    this.jittered = undefined;
    this.jitterTimer!.cancel();
    void this.handleTick(scheduledAt, slot, undefined);
  }

  /** @internal Manual mode: a tick asked for by `tick` or `syncTick`. */
  protected async manualTick(waiter: Run['waiter']): Promise<Run | undefined> {
    this.ticks.manualTick();
    return this.handleTick(now(), Date.now(), waiter);
  }

  /**
   * @internal Claims the slot of an exclusive job's timer tick (`slot`: its wall-clock time), evaluates the guard, then
   * starts a run. Stays synchronous unless the slot is claimed or the guard returns a promise. A `triggered`
   * tick (asked for in auto mode) claims no slot and arms no next tick: the grid does not move.
   */
  protected handleTick(
    scheduledAt: number,
    slot: number,
    waiter: Run['waiter'],
    triggered = false,
  ): Run | undefined | Promise<Run | undefined> {
    if (this.phase !== 'ticking') return undefined;
    const { lease } = this;
    // Without the lease, or paused, a tick starts nothing: no guard, no event.
    if (lease?.held === false) {
      if (!triggered && this.options.mode === 'auto') this.fleet!.unheld(slot);
      return this.endTickWithoutRun(triggered);
    }
    if (this.paused) return this.endTickWithoutRun(triggered);
    // One guard at a time; and one claim at a time, which a trigger does not make.
    if (this.guardPending || (this.claimPending && !triggered)) {
      this.missed(1);
      return this.endTickWithoutRun(triggered);
    }
    if (lease === undefined || this.options.mode === 'manual' || triggered)
      return this.passGuard(scheduledAt, slot, waiter, triggered);
    // The slot is the fleet's: claimed in the store first, it runs in no other replica, now or later.
    this.claimPending = true;
    this.waitingSince = now();
    const fleet = this.fleet!;
    return fleet.claim(slot).then((held) => {
      this.claimPending = false;
      if (!held) return this.endTickWithoutRun();
      // Closing meanwhile: the claimed slot is given back to the fleet when the lease is released.
      if (this.phase !== 'ticking') return undefined;
      // Paused meanwhile, or a trigger's guard is pending: the slot was claimed, and is dropped.
      if (this.paused || this.guardPending) {
        fleet.settled();
        if (this.guardPending) this.missed(1);
        return this.endTickWithoutRun();
      }
      fleet.hold(slot);
      const started = this.passGuard(scheduledAt, slot, waiter);
      if (!isThenable(started)) {
        fleet.settled();
        return started;
      }
      return started.then((run) => {
        // A guard that answers once the job is closing leaves its slot to be given back.
        if (this.phase === 'ticking') fleet.settled();
        return run;
      });
    });
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
    this.guardPending = true;
    this.waitingSince = now();
    return Promise.resolve(verdict).then(
      (passed) => {
        this.guardPending = false;
        // The lease may have been lost, or the job paused, while the guard was pending.
        return passed && this.lease?.held !== false && !this.paused
          ? this.startRun(scheduledAt, slot, waiter, triggered)
          : this.endTickWithoutRun(triggered);
      },
      (error: unknown) => {
        this.guardPending = false;
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
    this.record.runStarted(Date.now());
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
    const durationMs = Math.round((now() - run.context.startedAt) * 1000) / 1000;
    this.record.runEnded(reason, Date.now(), durationMs, failed, error);
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

  // ---- The lease of an exclusive job ----

  /** @internal This replica now holds the job's lease: it continues the fleet's schedule. */
  leaseAcquired(fencingToken: number, stored: PeriodicFleetSchedule | null): void {
    if (this.events.wants('leaseAcquired'))
      this.events.emit({ type: 'leaseAcquired', name: this.name, fencingToken });
    if (this.options.mode !== 'auto' || this.phase !== 'ticking') return;
    const wallNow = Date.now();
    const next = this.fleet!.takeOver(stored, this.ticks.slot, wallNow);
    if (next !== undefined) this.ticks.continueAt(next, wallNow);
  }

  /** @internal This replica no longer holds the job's lease: its runs are stopped (`'leaseLost'`). */
  leaseLost(reason: string): void {
    if (this.events.wants('leaseLost')) this.events.emit({ type: 'leaseLost', name: this.name, reason });
    for (const run of this.runs.slice()) run.stop('leaseLost');
  }
}
