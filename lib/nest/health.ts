// When a job is up and when it is down, as the terminus health indicator and the dashboard both say it: one rule,
// without @nestjs/terminus, so that the dashboard does not load it.
import type { PeriodicRegistry } from './registry.js';
import type { PeriodicScheduler } from '../scheduler/periodic-scheduler.js';
import type { PeriodicJobStatus } from '../scheduler/status.js';
import type { PeriodicFleetRead } from '../scheduler/coordinator-port.js';
import { readFleet } from '../scheduler/fleet-status.js';
import { now } from '../scheduler/deadline-timer.js';

/**
 * Judges the health of the registry's jobs. A job is down when its runs have failed `maxConsecutiveFailures`
 * times in a row, when it was stopped while the application runs, or when a tick has been due for more than two
 * intervals without coming (its timer is dead). An exclusive job's health is the fleet's, on every replica: down
 * when the fleet has not handled a due slot for more than two intervals (as the store said at its last read), or
 * when this replica has not reached the store for more than `leaseMs`; a replica that does not hold the lease is
 * otherwise up. Paused and manual jobs are up, whatever their runs did, and every job is up while the
 * application closes.
 */
export class JobHealth {
  /**
   * What the store said of the exclusive jobs at the last read, by name; read again in the background when a
   * judgement is asked for and the last read is older than `leaseMs / 3`, so that a check never waits for the
   * store, and a fleet nobody checks costs the store nothing.
   */
  #fleet = new Map<string, PeriodicFleetRead>();
  /** When the last read was asked for, on the `now()` timeline and by the wall clock. */
  #readAt = -Infinity;
  #readWall = 0;
  #reading = false;

  constructor(private readonly registry: PeriodicRegistry) {}

  /** Starts a read of the fleet's schedules when the last one is older than `leaseMs / 3`; never waits for it. */
  refresh(): void {
    const schedulers = this.registry.fleetJobs();
    const replica = schedulers[0]?.fleetReplica;
    if (replica === undefined || this.#reading || now() - this.#readAt < replica.calls.timing.heartbeatMs) {
      return;
    }
    this.#reading = true;
    const asked = { at: now(), wall: Date.now() };
    void readFleet(schedulers)
      .then((reads) => {
        // A read the store did not answer is reported by the replica's log; the store's reachability says it.
        if (reads === undefined) return;
        this.#fleet = reads;
        [this.#readAt, this.#readWall] = [asked.at, asked.wall];
      })
      .finally(() => (this.#reading = false));
  }

  /** Why the job is down, or undefined when it is up. */
  problemOf(
    scheduler: PeriodicScheduler,
    status: PeriodicJobStatus,
    maxConsecutiveFailures: number,
  ): string | undefined {
    // Jobs that are off on purpose or have run all their slots, and jobs stopped because the application closes.
    const { state } = status;
    if (state === 'paused' || state === 'completed' || status.mode === 'manual' || this.registry.closing) {
      return undefined;
    }
    const store = scheduler.storeLog;
    if (store !== undefined) {
      // An exclusive job: the fleet's health.
      const silent = now() - store.answeredAt;
      if (silent > store.coordinator.leaseMs) {
        return `this replica has not reached the coordinator's store for ${Math.round(silent)}ms (more than leaseMs)`;
      }
      // As the store was at the last read: a due slot handled since then is not known yet, but none is taken
      // for missed because the read is old.
      const next = this.#fleet.get(status.name)?.schedule?.next;
      if (next !== undefined && scheduler.fleetOverdue(next, this.#readWall)) {
        return `the fleet has not handled the slot due at ${new Date(next).toISOString()} for more than two intervals`;
      }
      if (status.lease?.held !== true && status.state !== 'stopped') return undefined;
    }
    if (status.consecutiveFailures >= maxConsecutiveFailures) {
      // With retries, what counts is a slot that failed after its last attempt.
      const failed =
        scheduler.options.retry.attempts > 0
          ? 'slots in a row failed their last attempt'
          : 'runs in a row failed';
      return `${status.consecutiveFailures} ${failed} (the limit is ${maxConsecutiveFailures})`;
    }
    if (status.state === 'stopped') return 'stopped while the application runs';
    if (scheduler.overdue) {
      return 'no tick for more than two intervals: its timer is not running, or a tick is stuck (a guard that never settles)';
    }
    return undefined;
  }
}
