import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { PeriodicRegistry } from '../nest/registry.js';
import { describeValue, PeriodicConfigError } from '../scheduler/errors.js';
import { checkedOptions, type OptionRule } from '../scheduler/rules.js';
import type { PeriodicScheduler } from '../scheduler/periodic-scheduler.js';
import type { PeriodicJobStatus } from '../scheduler/status.js';
import type { PeriodicFleetRead } from '../scheduler/coordinator-port.js';
import { now } from '../scheduler/deadline-timer.js';

/** What the health check tells of one job: no error message, no stack (health endpoints are often public). */
export interface PeriodicJobHealth {
  status: 'up' | 'down';
  /** Why the job is down. */
  reason?: string;
  state: PeriodicJobStatus['state'];
  lastSucceededAt: Date | null;
  consecutiveFailures: number;
  nextTickAt: Date | null;
}

/** Options of {@link PeriodicHealthIndicator.isHealthy}. */
export interface PeriodicHealthOptions {
  /** A job is down once this many runs in a row have failed. @default 3 */
  maxConsecutiveFailures?: number;
}

const HEALTH_RULES = {
  maxConsecutiveFailures: {
    accepts: (value) => typeof value === 'number' && Number.isSafeInteger(value) && value >= 1,
    expected: 'an integer ≥ 1',
  },
} satisfies Record<keyof PeriodicHealthOptions, OptionRule>;

/**
 * A `@nestjs/terminus` health indicator of every job of the application. A job is down when its runs have
 * failed `maxConsecutiveFailures` times in a row, when it was stopped while the application runs, or when a
 * tick has been due for more than two intervals without coming (its timer is dead). An exclusive job's health
 * is the fleet's, on every replica: down when the fleet has not handled a due slot for more than two intervals
 * (as the store said at its last read), or when this replica has not reached the store for more than
 * `leaseMs`; a replica that does not hold the lease is otherwise up. Paused and manual jobs are up, whatever
 * their runs did, and every job is up while the application closes. Provide it beside `TerminusModule`:
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() { return this.health.check([() => this.periodic.isHealthy('periodic')]); }
 * ```
 */
@Injectable()
export class PeriodicHealthIndicator {
  constructor(
    private readonly registry: PeriodicRegistry,
    private readonly health: HealthIndicatorService,
  ) {}

  /** `up` when every job is up, else `down`; either way with each job's health under `jobs`. */
  isHealthy<const Key extends string = 'periodic'>(
    key: Key = 'periodic' as Key,
    options: PeriodicHealthOptions = {},
  ) {
    const where = 'PeriodicHealthIndicator.isHealthy()';
    if (typeof key !== 'string' || key === '') {
      throw new PeriodicConfigError(
        `${where}: the key must be a non-empty string, the name of the check in the result such as ` +
          `'periodic', got ${describeValue(key)}; the options come second: isHealthy('periodic', { ... })`,
      );
    }
    const given = checkedOptions(where, options, HEALTH_RULES, '{ maxConsecutiveFailures: 3 }');
    const { maxConsecutiveFailures = 3 } = given as PeriodicHealthOptions;
    this.readFleet();
    // Without a prototype, so that any job name is a key of its own.
    const jobs = Object.create(null) as Record<string, PeriodicJobHealth>;
    let down = false;
    for (const scheduler of this.registry.getAll()) {
      const status = scheduler.status();
      const reason = this.problemOf(scheduler, status, maxConsecutiveFailures);
      if (reason !== undefined) down = true;
      jobs[status.name] = {
        status: reason === undefined ? 'up' : 'down',
        ...(reason === undefined ? {} : { reason }),
        state: status.state,
        lastSucceededAt: status.lastSucceededAt,
        consecutiveFailures: status.consecutiveFailures,
        nextTickAt: status.nextTickAt,
      };
    }
    const session = this.health.check(key);
    return down ? session.down({ jobs }) : session.up({ jobs });
  }

  /**
   * What the store said of the exclusive jobs at the last read, by name; read again in the background when a
   * check comes and the last read is older than `leaseMs / 3`, so that a check never waits for the store, and a
   * fleet nobody checks costs the store nothing.
   */
  private fleet = new Map<string, PeriodicFleetRead>();
  /** When the last read was asked for, on the `now()` timeline and by the wall clock. */
  private readAt = -Infinity;
  private readWall = 0;
  private reading = false;

  private readFleet(): void {
    const schedulers = this.registry.getAll().filter((scheduler) => scheduler.fleetReplica !== undefined);
    const replica = schedulers[0]?.fleetReplica;
    if (replica === undefined || this.reading || now() - this.readAt < replica.calls.leaseMs / 3) {
      return;
    }
    this.reading = true;
    const asked = { at: now(), wall: Date.now() };
    replica.calls
      .readFleet(schedulers.map((scheduler) => scheduler.name))
      .then(
        (reads) => {
          this.fleet = new Map(reads.map((read) => [read.name, read]));
          [this.readAt, this.readWall] = [asked.at, asked.wall];
        },
        // Reported by the replica's log; the store's reachability says it.
        () => undefined,
      )
      .finally(() => (this.reading = false));
  }

  private problemOf(
    scheduler: PeriodicScheduler,
    status: PeriodicJobStatus,
    maxConsecutiveFailures: number,
  ): string | undefined {
    // Jobs that are off on purpose, and jobs stopped because the application closes.
    if (status.state === 'paused' || status.mode === 'manual' || this.registry.closing) return undefined;
    const store = scheduler.storeLog;
    if (store !== undefined) {
      // An exclusive job: the fleet's health (SPEC 17).
      const silent = now() - store.answeredAt;
      if (silent > store.coordinator.leaseMs) {
        return `this replica has not reached the coordinator's store for ${Math.round(silent)}ms (more than leaseMs)`;
      }
      // As the store was at the last read: a due slot handled since then is not known yet, but none is taken
      // for missed because the read is old.
      const next = this.fleet.get(status.name)?.schedule?.next;
      if (next !== undefined && scheduler.fleetOverdue(next, this.readWall)) {
        return `the fleet has not handled the slot due at ${new Date(next).toISOString()} for more than two intervals`;
      }
      if (status.lease?.held !== true && status.state !== 'stopped') return undefined;
    }
    if (status.consecutiveFailures >= maxConsecutiveFailures) {
      return `${status.consecutiveFailures} runs in a row failed (the limit is ${maxConsecutiveFailures})`;
    }
    if (status.state === 'stopped') return 'stopped while the application runs';
    if (scheduler.overdue) {
      return 'no tick for more than two intervals: its timer is not running, or a tick is stuck (a guard that never settles)';
    }
    return undefined;
  }
}
