// How the failures of a coordinator's store are reported, once per lease period for a whole application, and
// what the scheduler's status says of the store.
import type { PeriodicCoordinator } from './coordinator-port.js';
import { now } from './deadline-timer.js';
import { messageOf, oneLine } from './errors.js';
import { type LeaseTiming, leaseTiming } from './lease-timing.js';

/** Where the failures of a coordinator are reported, and their end. */
export interface CoordinatorLog {
  error(message: string): void;
  log(message: string): void;
}

/** Without Nest, failures of a coordinator become process warnings (code `PERIODIC_COORDINATOR`). */
const WARNINGS: CoordinatorLog = {
  error: (message) => process.emitWarning(message, { code: 'PERIODIC_COORDINATOR' }),
  log: () => undefined,
};

/**
 * The failures of one coordinator as one application reports them, shared by every job of the application that
 * uses it: at most once per `leaseMs`, with a count of those in between, and the first success after failures
 * once. The Nest module makes one per application, with Nest's logger; a scheduler made without one reports
 * its own, as process warnings.
 */
export class StoreLog {
  /** When the last failure was reported, on the `now()` timeline. */
  private reportedAt = -Infinity;
  private unreported = 0;
  /** A failure was reported, and no answer came since: the next answer is reported as the recovery. */
  private down = false;
  /** Whether the store answered the last command that ended, as status shows it; and since when, and why not. */
  reachable = true;
  since = Date.now();
  /** When the store last answered again after it did not (wall clock); 0 if it never stopped answering. */
  backAt = 0;
  lastError: string | null = null;
  /** When the store last answered, on the `now()` timeline. */
  answeredAt = now();
  /** When the store's slowness was last said, on the `now()` timeline. */
  private slowReportedAt = -Infinity;
  /** When the refusal of each job refused was last said, on the `now()` timeline. */
  private readonly refusalsSaid = new Map<string, number>();

  /** The times derived from the lease's length, for every replica of the application. */
  readonly timing: LeaseTiming;

  constructor(
    readonly coordinator: PeriodicCoordinator,
    private readonly log: CoordinatorLog = WARNINGS,
  ) {
    this.timing = leaseTiming(coordinator.leaseMs);
  }

  failed(what: string, error: unknown): void {
    const at = now();
    if (this.reachable) [this.reachable, this.since] = [false, Date.now()];
    this.lastError = messageOf(error);
    const { leaseMs } = this.coordinator;
    if (at - this.reportedAt < leaseMs) {
      this.unreported++;
      return;
    }
    const more = this.unreported === 0 ? '' : ` (${this.unreported} more failed since the last report)`;
    this.log.error(
      oneLine(
        `${storeName(this.coordinator)} failed while ${what}: ${messageOf(error)}${more}. Exclusive jobs ` +
          `start no run until their lease is held again; the next report comes in ${leaseMs}ms at the earliest`,
      ),
    );
    this.reportedAt = at;
    this.unreported = 0;
    this.down = true;
  }

  /** The store answers, but too slowly for `what`: said at most once per `leaseMs`. */
  slow(what: string): void {
    const at = now();
    if (at - this.slowReportedAt < this.coordinator.leaseMs) return;
    this.slowReportedAt = at;
    this.log.log(oneLine(`${storeName(this.coordinator)} ${what}`));
  }

  /**
   * The store refused job `name`'s data (`error`), as a heartbeat answered: said once per job per `leaseMs`. It is
   * that job's failure, not the store's: the store answers, and the other jobs go on.
   */
  refused(name: string, error: string): void {
    const at = now();
    if (at - (this.refusalsSaid.get(name) ?? -Infinity) < this.coordinator.leaseMs) return;
    this.refusalsSaid.set(name, at);
    this.log.error(
      oneLine(
        `${storeName(this.coordinator)} refused the data of job "${name}": ${error}. The job takes no lease, and ` +
          'starts no run, until the store accepts it; the other jobs go on (docs/replicas.md, "A job the store ' +
          'refuses")',
      ),
    );
  }

  /** The store lost the fleet's records (`lost`), as a heartbeat found: said once per loss, whatever the logger. */
  reset(lost: string[]): void {
    this.log.error(
      `${storeName(this.coordinator)} lost the fleet's records (${lost.join(', ')}): the store restarted ` +
        'without persistence, or was flushed or truncated. Jobs that the fleet had paused run again, and ' +
        'histories and audit trails start over. Keep them with the store’s persistence (docs/operations.md, ' +
        '"A store that lost its data")',
    );
  }

  recovered(): void {
    this.answeredAt = now();
    this.lastError = null;
    if (!this.reachable) [this.reachable, this.since, this.backAt] = [true, Date.now(), Date.now()];
    if (!this.down) return;
    this.down = false;
    this.log.log(
      `${storeName(this.coordinator)} answers again: exclusive jobs run again once they hold their lease`,
    );
  }
}

/** The coordinator as log lines name it: its class, or "The coordinator" for a plain object. */
function storeName(coordinator: PeriodicCoordinator): string {
  const name = coordinator.constructor?.name;
  return name === undefined || name === '' || name === 'Object' ? 'The coordinator' : name;
}
