import { Injectable } from '@nestjs/common';
import { HealthIndicatorService } from '@nestjs/terminus';
import { JobHealth } from '../nest/health.js';
import { PeriodicRegistry } from '../nest/registry.js';
import { describeValue, PeriodicConfigError } from '../scheduler/errors.js';
import { checkedOptions, type OptionRule } from '../scheduler/rules.js';
import type { PeriodicJobStatus } from '../scheduler/status.js';
import type { PeriodicIncidentKind } from '../scheduler/coordinator-port.js';

/** What the health check tells of one job: no error message, no stack (health endpoints are often public). */
export interface PeriodicJobHealth {
  status: 'up' | 'down';
  /** Why the job is down. */
  reason?: string;
  state: PeriodicJobStatus['state'];
  lastSucceededAt: Date | null;
  consecutiveFailures: number;
  nextTickAt: Date | null;
  /**
   * The job's open incidents (docs/alerts.md), by kind and since when, without their details (they may hold an
   * error's message); absent when none is open.
   */
  incidents?: { kind: PeriodicIncidentKind; since: Date }[];
}

/** Options of {@link PeriodicHealthIndicator.isHealthy}. */
export interface PeriodicHealthOptions {
  /** A job is down once this many runs in a row have failed: 1 to 1,000,000. @default 3 */
  maxConsecutiveFailures?: number;
}

const HEALTH_RULES = {
  maxConsecutiveFailures: {
    accepts: (value) =>
      Number.isSafeInteger(value) && (value as number) >= 1 && (value as number) <= 1_000_000,
    expected: 'an integer from 1 to 1,000,000',
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
  readonly #judge: JobHealth;

  constructor(
    private readonly registry: PeriodicRegistry,
    private readonly health: HealthIndicatorService,
  ) {
    this.#judge = new JobHealth(registry);
  }

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
    this.#judge.refresh();
    // Without a prototype, so that any job name is a key of its own.
    const jobs = Object.create(null) as Record<string, PeriodicJobHealth>;
    let down = false;
    for (const scheduler of this.registry.getAll()) {
      const status = scheduler.status();
      const reason = this.#judge.problemOf(scheduler, status, maxConsecutiveFailures);
      if (reason !== undefined) down = true;
      jobs[status.name] = {
        status: reason === undefined ? 'up' : 'down',
        ...(reason === undefined ? {} : { reason }),
        state: status.state,
        lastSucceededAt: status.lastSucceededAt,
        consecutiveFailures: status.consecutiveFailures,
        nextTickAt: status.nextTickAt,
      };
      const incidents = scheduler.openIncidents;
      if (incidents.length > 0)
        jobs[status.name].incidents = incidents.map(({ kind, since }) => ({ kind, since }));
    }
    const session = this.health.check(key);
    return down ? session.down({ jobs }) : session.up({ jobs });
  }
}
