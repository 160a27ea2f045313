import { DeadlineTimer, now } from './deadline-timer.js';
import { describeValue, messageOf } from './errors.js';

/**
 * The schedule an exclusive job keeps in its coordinator, so that every replica that comes to hold the lease
 * continues it (docs/replicas.md, "One schedule for the whole fleet"). Times are wall-clock milliseconds since the epoch.
 */
export interface PeriodicFleetSchedule {
  /** The options the schedule was written under, e.g. `'every 60000 regular'`: a holder with others starts a new grid. */
  grid: string;
  /** The slot of the last tick the fleet handled (its run started, or its guard said no); 0 before the first. */
  last: number;
  /** When the fleet's next tick is due; 0 while a shifted-mode run is in flight (its end is not known yet). */
  next: number;
}

/**
 * A store that the replicas of an application share, holding the leases of its `exclusive` jobs (one lease per
 * job name, held by one owner at a time) and each job's schedule. Each method is one atomic step in the store.
 * The package ships
 * `InMemoryCoordinator`, `RedisCoordinator` and `PostgresCoordinator`; an application may write its own
 * (docs/replicas.md shows one), and check it with the contract in `test/coordinators/contract.ts`.
 */
export interface PeriodicCoordinator {
  /** How long a lease lasts from the moment it is taken or renewed, in integer milliseconds. */
  readonly leaseMs: number;
  /**
   * Takes the lease of job `name` for `owner` unless another owner holds it. Resolves the new fencing token,
   * a positive safe integer greater than every token issued before for `name`, even if the store lost its
   * data in between (floor it at the store's clock in microseconds); or 0 when another owner holds the lease.
   */
  acquire(name: string, owner: string): Promise<number>;
  /** Extends the lease by `leaseMs` if `owner` holds it still: true; false if it does not. */
  renew(name: string, owner: string): Promise<boolean>;
  /** Gives the lease up if `owner` holds it still, so that another owner may take it at once: true if it did. */
  release(name: string, owner: string): Promise<boolean>;
  /** The schedule last written for job `name`, or null if none was (or the store lost it). */
  readSchedule(name: string): Promise<PeriodicFleetSchedule | null>;
  /**
   * Stores the schedule of job `name` if `owner` holds its lease still, with `fencingToken` as the lease's
   * current token, and `schedule.last` is not below the stored one: true if it did. A replica that lost its lease
   * can therefore never move the schedule, nor move it back.
   */
  writeSchedule(
    name: string,
    owner: string,
    fencingToken: number,
    schedule: PeriodicFleetSchedule,
  ): Promise<boolean>;
}

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

  constructor(
    readonly coordinator: PeriodicCoordinator,
    private readonly log: CoordinatorLog = WARNINGS,
  ) {}

  failed(what: string, error: unknown): void {
    const at = now();
    const { leaseMs } = this.coordinator;
    if (at - this.reportedAt < leaseMs) {
      this.unreported++;
      return;
    }
    const more = this.unreported === 0 ? '' : ` (${this.unreported} more failed since the last report)`;
    this.log.error(
      `${storeName(this.coordinator)} failed while ${what}: ${messageOf(error)}${more}. Exclusive jobs start ` +
        `no run until their lease is held again; the next report comes in ${leaseMs}ms at the earliest`,
    );
    this.reportedAt = at;
    this.unreported = 0;
    this.down = true;
  }

  recovered(): void {
    if (!this.down) return;
    this.down = false;
    this.log.log(
      `${storeName(this.coordinator)} answers again: exclusive jobs run again once they hold their lease`,
    );
  }
}

/**
 * The calls the engine makes to a coordinator. A reply of the wrong type (a token that is not a safe integer,
 * an answer that is not a boolean) is a failure, never a lease; every failure is logged at most once per
 * `leaseMs`, with a count of those in between, and the first success after failures is logged once.
 */
export class CoordinatorCalls {
  private readonly coordinator: PeriodicCoordinator;
  /** Set once the lease is released: answers that come later (a command still out) are not reported. */
  private silent = false;

  constructor(private readonly store: StoreLog) {
    this.coordinator = store.coordinator;
  }

  get leaseMs(): number {
    return this.coordinator.leaseMs;
  }

  acquire(name: string, owner: string): Promise<number> {
    return this.call('acquire', name, () => this.coordinator.acquire(name, owner), TOKEN);
  }

  renew(name: string, owner: string): Promise<boolean> {
    return this.call('renew', name, () => this.coordinator.renew(name, owner), BOOLEAN);
  }

  release(name: string, owner: string): Promise<boolean> {
    return this.call('release', name, () => this.coordinator.release(name, owner), BOOLEAN);
  }

  readSchedule(name: string): Promise<PeriodicFleetSchedule | null> {
    const { coordinator } = this;
    return this.call('readSchedule', name, () => this.within(coordinator.readSchedule(name)), SCHEDULE);
  }

  writeSchedule(
    name: string,
    owner: string,
    fencingToken: number,
    schedule: PeriodicFleetSchedule,
  ): Promise<boolean> {
    const { coordinator } = this;
    return this.call(
      'writeSchedule',
      name,
      () => this.within(coordinator.writeSchedule(name, owner, fencingToken, schedule)),
      BOOLEAN,
    );
  }

  /**
   * Sends one command and checks its reply. A command that has not answered within `leaseMs / 3` of being sent
   * is reported as failed then, and again each lease period while it still has not, whatever the driver does
   * with it meanwhile (ioredis queues commands while it reconnects, and fails them only after many attempts);
   * its answer is still awaited.
   */
  private async call<T>(
    step: keyof typeof STEPS,
    name: string,
    send: () => Promise<T>,
    reply: { accepts(value: unknown): value is T; expected: string },
  ): Promise<T> {
    const what = `${STEPS[step]} "${name}"`;
    const limit = this.coordinator.leaseMs / 3;
    // A command that hangs is reported as such, not again when the driver gives up on it.
    let hanging = false;
    const sent = now();
    const hung = new DeadlineTimer({
      onDeadline: () => {
        // A replica done with the lease reports nothing more, and keeps no timer for it.
        if (this.silent) return;
        hanging = true;
        this.failed(what, new Error(`no answer after ${Math.round(now() - sent)}ms`));
        hung.armAt(now() + this.coordinator.leaseMs);
      },
    });
    hung.armAt(sent + limit);
    try {
      const answer: unknown = await send();
      hung.cancel();
      if (!reply.accepts(answer)) {
        throw new Error(`${step}() answered ${describeValue(answer)}, not ${reply.expected}`);
      }
      this.recovered();
      return answer;
    } catch (error) {
      hung.cancel();
      if (!hanging) this.failed(what, error);
      throw error;
    }
  }

  /**
   * The store's answer to a read or write of a schedule, or a failure when none comes within `leaseMs / 3` (a
   * connection that hangs): a tick waits for its claim, and would otherwise hold the job up for ever while the
   * lease is renewed. An answer that comes later is ignored. (Acquire and renew are not bounded here: a hung renewal
   * ends with the lease's validity, and one acquire at a time is waited for.)
   */
  private within<T>(answer: Promise<T>): Promise<T> {
    const limit = this.coordinator.leaseMs / 3;
    return new Promise((resolve, reject) => {
      const timer = new DeadlineTimer({
        onDeadline: () => reject(new Error(`no answer within ${Math.round(limit)}ms`)),
      });
      timer.armAt(now() + limit);
      answer.then(
        (value) => {
          timer.cancel();
          resolve(value);
        },
        (error: unknown) => {
          timer.cancel();
          reject(error);
        },
      );
    });
  }

  /** The replica is done with the lease: nothing the store answers from now on is reported. */
  silence(): void {
    this.silent = true;
  }

  private recovered(): void {
    if (!this.silent) this.store.recovered();
  }

  private failed(what: string, error: unknown): void {
    if (!this.silent) this.store.failed(what, error);
  }
}

/** The coordinator as log lines name it: its class, or "The coordinator" for a plain object. */
function storeName(coordinator: PeriodicCoordinator): string {
  const name = coordinator.constructor?.name;
  return name === undefined || name === '' || name === 'Object' ? 'The coordinator' : name;
}

const STEPS = {
  acquire: 'acquiring the lease of',
  renew: 'renewing the lease of',
  release: 'releasing the lease of',
  readSchedule: 'reading the schedule of',
  writeSchedule: 'writing the schedule of',
};

const TOKEN = {
  accepts: isWhole,
  expected: 'a fencing token (a safe integer ≥ 0)',
};

const SCHEDULE = {
  accepts: (value: unknown): value is PeriodicFleetSchedule | null => {
    if (value === null) return true;
    const { grid, last, next } = (value ?? {}) as Partial<PeriodicFleetSchedule>;
    return typeof grid === 'string' && isWhole(last) && isWhole(next);
  },
  expected: 'null or a schedule { grid: string, last: number, next: number }',
};

/** A safe integer ≥ 0. */
function isWhole(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

const BOOLEAN = {
  accepts: (value: unknown): value is boolean => typeof value === 'boolean',
  expected: 'true or false',
};
