import { DeadlineTimer, now } from './deadline-timer.js';
import { describeValue, messageOf, oneLine } from './errors.js';
import { type LeaseTiming, leaseTiming } from './lease-timing.js';
import type { JobExitReason } from './events.js';

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

/** A replica of the fleet as its heartbeat leaves it in the store (docs/replicas.md, "Coordination at scale"). */
export interface PeriodicFleetMember {
  /** The replica's session: the owner of its leases, one for each run of a process. */
  owner: string;
  /** The replica's name, as status and logs show it. */
  replica: string;
  /** A digest of the names of the exclusive jobs the replica has: replicas with the same jobs have the same. */
  jobs: string;
}

/** A lease an owner holds, with the fencing token of its holding. */
export interface PeriodicLeaseHeld {
  name: string;
  fencingToken: number;
}

/** What one heartbeat of a replica asks of the store, in one atomic step (or one round trip of them). */
export interface PeriodicHeartbeat {
  /** Written with an expiry `leaseMs` from the store's clock; members whose record expired are forgotten. */
  member: PeriodicFleetMember;
  /** Leases to extend by `leaseMs`, each if `member.owner` still holds it with that token. */
  renew: PeriodicLeaseHeld[];
  /** Leases to take for `member.owner`, each if no one holds it. */
  acquire: string[];
}

/** What the store answers a heartbeat. */
export interface PeriodicHeartbeatReply {
  /** The members whose records have not expired, the one that sent the heartbeat included. */
  members: PeriodicFleetMember[];
  /** For each entry of `renew`, in order: whether it was still held, and is renewed. */
  renewed: boolean[];
  /**
   * For each entry of `acquire`, in order: the new holding (its fencing token, as `acquire` issues it, and the
   * job's schedule as `readSchedule` reads it), or null when it was not taken.
   */
  acquired: ({ fencingToken: number; schedule: PeriodicFleetSchedule | null } | null)[];
  /** The names of the jobs the fleet has paused (`operate`), from a coordinator that pauses them. */
  paused?: string[];
  /**
   * The triggers asked of other replicas for jobs whose lease this heartbeat renewed, taken from the store for
   * this replica to carry out and answer (`answerTrigger`), from a coordinator that carries them.
   */
  triggers?: PeriodicTriggerRequest[];
  /**
   * What names the fleet's records in the store: written by the first heartbeat that finds none (unique: the
   * owner that sent it and the store's time, say), and kept with them. Another value than the last heartbeat read means that the store
   * lost the records in between (restarted without persistence, flushed, truncated): the replica reports it
   * as `storeReset` (docs/operations.md). Absent from a coordinator that cannot tell.
   */
  fleet?: string;
  /**
   * The jobs of `renew` and `acquire` whose data the store refused (a name its encoding cannot hold, say), with
   * the store's error: their renewal answers false and their taking null, and the other jobs of the heartbeat
   * go on. Absent or empty when it refused none.
   */
  refused?: PeriodicJobRefusal[];
}

/** A job whose data the store refused, and the store's error: that job's step fails, and no other's. */
export interface PeriodicJobRefusal {
  name: string;
  error: string;
}

/** A write of a job's schedule by the owner of its lease, as `writeSchedule` makes it. */
export interface PeriodicScheduleWrite extends PeriodicLeaseHeld {
  schedule: PeriodicFleetSchedule;
}

/** An operation on a job from `pause`, `resume` or `trigger`, as the job's audit trail keeps it. */
export interface PeriodicOperation {
  action: 'pause' | 'resume' | 'trigger';
  /** Who asked for it, as the caller named them; null when not named. */
  by: string | null;
  note: string | null;
  /** The replica that was asked. */
  replica: string;
  /** When, in wall-clock milliseconds since the epoch. */
  at: number;
}

/**
 * A run of a job as the store keeps it: written when the run starts, and again, whole, when it ends.
 * Times are wall-clock milliseconds since the epoch.
 */
export interface PeriodicRunEntry {
  /** Which run this is, unique in the fleet and across jobs: its replica session's random prefix, and a count. */
  id: string;
  name: string;
  jobId: number;
  replica: string;
  fencingToken: number | null;
  slot: number | null;
  origin: 'schedule' | 'trigger' | 'manual' | 'retry' | 'recovery';
  attempt: number;
  startedAt: number;
  finishedAt: number | null;
  reason: JobExitReason | null;
  durationMs: number | null;
  error: { name: string; message: string } | null;
  /**
   * A failed run whose slot runs again (`retry`): its slot has not failed yet, and the fleet's
   * `consecutiveFailures` does not count it. Absent otherwise.
   */
  retrying?: true;
}

/** What the store knows of a job of the fleet, as `readFleet` reads it. */
export interface PeriodicFleetRead {
  name: string;
  /** The lease's holder (its session, `<replica>/<id>`) and token, until when by the store's clock; null when free. */
  holder: { owner: string; fencingToken: number; until: number } | null;
  pause: PeriodicOperation | null;
  schedule: PeriodicFleetSchedule | null;
  /** The latest run recorded, in flight or ended. */
  lastRun: PeriodicRunEntry | null;
  /** When the last run that ended `'normal'` ended, anywhere in the fleet; null if none is known. */
  lastSucceededAt: number | null;
  /** Runs ended `'error'`, `'timeout'`, `'killed'` or `'leaseLost'` since the last `'normal'` one, anywhere. */
  consecutiveFailures: number;
}

/** A trigger asked of a replica that does not hold the job's lease, carried to the holder by the store. */
export interface PeriodicTriggerRequest {
  /** Unique in the fleet. */
  id: string;
  name: string;
  by: string | null;
  /** The replica that was asked. */
  replica: string;
  /** When, in wall-clock milliseconds since the epoch. */
  at: number;
}

/** What the holder answers a trigger: the run it started, or why none. */
export type PeriodicTriggerAnswer =
  { ok: true; jobId: number; replica: string } | { ok: false; error: string; replica: string };

/**
 * Where a trigger carried by the store stands, as the replica that asked for it reads it: answered, still
 * waiting for a holder to take it (`'pending'`), taken and not answered yet, or withdrawn (no holder took it).
 */
export type PeriodicTriggerState = PeriodicTriggerAnswer | 'pending' | 'taken' | 'withdrawn';

/** What the store answers a write of a schedule: taken, taken while the fleet has paused the job, or refused. */
export type PeriodicScheduleWritten = boolean | 'paused';

/**
 * A store that the replicas of an application share, holding the leases of its `exclusive` jobs (one lease per
 * job name, held by one owner at a time) and each job's schedule. Each method is one atomic step in the store.
 * The package ships `InMemoryCoordinator`, `RedisCoordinator` and `PostgresCoordinator`; an application may write
 * its own (docs/replicas.md shows one), and check it with the contract in `test/coordinators/contract.ts`.
 *
 * The steps for one job are required. The batched steps, `heartbeat`, `writeSchedules` and `releaseAll`, are what
 * keeps a fleet's traffic to the store independent of the number of jobs and spreads the jobs over the
 * replicas; a coordinator without them works as one replica alone, with a command per job.
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
  /**
   * One replica's heartbeat, in one step: its member record, the renewal of the leases it holds, and the taking
   * of those it should hold. The owner of a lease is the member's session; a renewal checks the token too.
   */
  heartbeat?(request: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply>;
  /**
   * Several writes of `writeSchedule` in one step, each of a different job: for each, in order, whether the
   * store took it. Unlike `writeSchedule`, it may take a write whose lease ran out or was given up, as long as
   * no other owner took the lease since (the token is still the job's latest) and `owner`'s member record
   * lives: nobody can have moved the schedule in between (the Redis coordinator checks one record per step
   * rather than a key per job). A coordinator with `operate` answers `'paused'` for a write it took of a job
   * that the fleet has paused.
   */
  writeSchedules?(owner: string, writes: PeriodicScheduleWrite[]): Promise<PeriodicScheduleWritten[]>;
  /**
   * Gives up `leases`, each if `owner` still holds it with that token; with `leave`, also forgets the member
   * `owner`, so that the others take its share of the jobs at their next heartbeat.
   */
  releaseAll?(owner: string, leases: PeriodicLeaseHeld[], leave: boolean): Promise<void>;
  /**
   * Records an operation in job `name`'s audit trail, which keeps the latest `keep`; a `'pause'` also pauses the
   * job for the fleet (until a `'resume'`), and then `writeSchedules` takes its writes but answers `'paused'`,
   * so that its holder starts nothing. With `readPause` and `readAudit`, the steps of a fleet that is paused
   * and audited as one (docs/replicas.md); a coordinator without them pauses each replica on its own.
   */
  operate?(name: string, operation: PeriodicOperation, keep: number): Promise<void>;
  /** The fleet's pause of job `name` (the operation that paused it), or null when it is not paused. */
  readPause?(name: string): Promise<PeriodicOperation | null>;
  /** The latest `limit` operations of job `name`'s audit trail, newest first. */
  readAudit?(name: string, limit: number): Promise<PeriodicOperation[]>;
  /**
   * Records runs, each in its job's history, which keeps the latest `keep`: a run whose `id` is there already
   * (its start) is replaced by its new record (its end). A run that ended also sets what `readFleet` answers
   * of the job's successes and failures.
   */
  recordRuns?(runs: PeriodicRunEntry[], keep: number): Promise<void>;
  /**
   * The latest `limit` runs of job `name` that started before `before` (if not null), newest first, among the
   * latest `keep` recorded (a store may keep a few more than `keep` for a while; 100 if not given).
   */
  readHistory?(
    name: string,
    limit: number,
    before: number | null,
    keep?: number,
  ): Promise<PeriodicRunEntry[]>;
  /** What the store knows of each of the jobs `names`, in order: holder, pause, schedule and latest runs. */
  readFleet?(names: string[]): Promise<PeriodicFleetRead[]>;
  /**
   * Leaves a trigger for the holder of the job's lease, which takes it with its next heartbeat (`triggers` of
   * the reply). With `readTrigger` and `answerTrigger`, the steps of a trigger from any replica.
   */
  requestTrigger?(request: PeriodicTriggerRequest): Promise<void>;
  /**
   * Where trigger `id` of job `name` stands; an answer read is forgotten. With `withdraw`, a trigger no holder
   * has taken yet is withdrawn (`'withdrawn'`), and will not be.
   */
  readTrigger?(name: string, id: string, withdraw: boolean): Promise<PeriodicTriggerState>;
  /** The holder's answer to trigger `id` of job `name`, for the replica that asked. */
  answerTrigger?(name: string, id: string, answer: PeriodicTriggerAnswer): Promise<void>;
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
  /** Whether the store answered the last command that ended, as status shows it; and since when, and why not. */
  reachable = true;
  since = Date.now();
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
    if (!this.reachable) [this.reachable, this.since] = [true, Date.now()];
    if (!this.down) return;
    this.down = false;
    this.log.log(
      `${storeName(this.coordinator)} answers again: exclusive jobs run again once they hold their lease`,
    );
  }
}

/**
 * The calls a replica makes to its coordinator: a heartbeat, writes of schedules and releases, each in one step
 * where the coordinator has the batched steps, and made of the steps for one job where it has not (then the
 * replica is a fleet of one: every replica competes for every job, as each job's lease does on its own). A
 * reply of the wrong shape (a token that is not a safe integer, an answer that is not a boolean) is a failure,
 * never a lease. Every failure goes to the replica's {@link StoreLog}.
 */
export class StoreCalls {
  readonly coordinator: PeriodicCoordinator;
  /** Set once the replica has left: answers that come later (a command still out) are not reported. */
  private silent = false;

  constructor(readonly store: StoreLog) {
    this.coordinator = store.coordinator;
  }

  get leaseMs(): number {
    return this.coordinator.leaseMs;
  }

  /** The times derived from the lease's length. */
  get timing(): LeaseTiming {
    return this.store.timing;
  }

  /** Whether the coordinator spreads jobs over the replicas: it has the batched steps. */
  get batched(): boolean {
    const { heartbeat, writeSchedules, releaseAll } = this.coordinator;
    return [heartbeat, writeSchedules, releaseAll].every((step) => typeof step === 'function');
  }

  /**
   * Sends a heartbeat. Made of the steps for one job, a step that fails leaves the others (each job's lease on its
   * own, as with no batched steps): its renewal counts as failed (`failed`), its taking as not taken, and the
   * failure is reported.
   */
  async heartbeat(request: PeriodicHeartbeat): Promise<HeartbeatAnswer> {
    const { coordinator } = this;
    const what = heartbeatWhat(request);
    if (this.batched) {
      return this.call(
        what,
        () => coordinator.heartbeat!(request),
        (reply) => heartbeatProblem(request, reply),
      );
    }
    const answer = await this.call<HeartbeatAnswer>(
      what,
      () => heartbeatOneByOne(coordinator, request),
      () => undefined,
      (reply) => reply.failures?.length === 0,
    );
    for (const [step, error] of answer.failures ?? []) this.failed(step, error);
    return answer;
  }

  /**
   * Writes schedules; a store that has not answered within `leaseMs / 3` fails them all (a tick waits for its
   * claim, and would otherwise hold its job up for ever while its lease is renewed).
   */
  writeSchedules(owner: string, writes: PeriodicScheduleWrite[]): Promise<PeriodicScheduleWritten[]> {
    const what = `writing the schedule of ${names(writes)}`;
    const { coordinator } = this;
    const send = this.batched
      ? () => coordinator.writeSchedules!(owner, writes)
      : () =>
          Promise.all(
            writes.map(({ name, fencingToken, schedule }) =>
              coordinator.writeSchedule(name, owner, fencingToken, schedule),
            ),
          );
    const problem = (reply: unknown) =>
      Array.isArray(reply) &&
      reply.length === writes.length &&
      reply.every((ok) => typeof ok === 'boolean' || ok === 'paused')
        ? undefined
        : `writeSchedules() answered ${describeValue(reply)}, not true, false or 'paused' per write ` +
          `(${writes.length})`;
    return this.call(what, () => this.within(send()), problem);
  }

  /** Whether the coordinator pauses and audits the fleet's jobs as one: it has the steps for it. */
  get operated(): boolean {
    const { operate, readPause, readAudit } = this.coordinator;
    return this.batched && [operate, readPause, readAudit].every((step) => typeof step === 'function');
  }

  /** Records an operation (and a pause or its end) in the store; fails when it has not answered in `leaseMs / 3`. */
  operate(name: string, operation: PeriodicOperation, keep: number): Promise<void> {
    const what = `recording the ${operation.action} of "${name}"`;
    return this.call(
      what,
      () => this.within(this.coordinator.operate!(name, operation, keep)),
      () => undefined,
    );
  }

  /** The fleet's pause of a job, read from the store within `leaseMs / 3`. */
  readPause(name: string): Promise<PeriodicOperation | null> {
    return this.call(
      `reading the pause of "${name}"`,
      () => this.within(this.coordinator.readPause!(name)),
      (reply) =>
        reply === null || OPERATION.accepts(reply) ? undefined : wrongOperation('readPause', reply),
    );
  }

  /** A job's audit trail, read from the store within `leaseMs / 3`. */
  readAudit(name: string, limit: number): Promise<PeriodicOperation[]> {
    return this.call(
      `reading the audit trail of "${name}"`,
      () => this.within(this.coordinator.readAudit!(name, limit)),
      (reply) =>
        Array.isArray(reply) && reply.every((entry) => OPERATION.accepts(entry))
          ? undefined
          : wrongOperation('readAudit', reply),
    );
  }

  /** Whether the coordinator keeps the fleet's run history and tells what it knows of a job: it has the steps. */
  get recorded(): boolean {
    const { recordRuns, readHistory, readFleet } = this.coordinator;
    return this.batched && [recordRuns, readHistory, readFleet].every((step) => typeof step === 'function');
  }

  /** Records runs; fails when the store has not answered within `leaseMs / 3` (the records are lost). */
  recordRuns(runs: PeriodicRunEntry[], keep: number): Promise<void> {
    return this.call(
      `recording ${runs.length === 1 ? 'a run' : `${runs.length} runs`} of ${names(runs)}`,
      () => this.within(this.coordinator.recordRuns!(runs, keep)),
      () => undefined,
    );
  }

  /** A job's history, read from the store within `leaseMs / 3`. */
  readHistory(name: string, limit: number, before: number | null, keep: number): Promise<PeriodicRunEntry[]> {
    return this.call(
      `reading the history of "${name}"`,
      () => this.within(this.coordinator.readHistory!(name, limit, before, keep)),
      (reply) =>
        Array.isArray(reply) && reply.every((entry) => RUN.accepts(entry))
          ? undefined
          : `readHistory() answered ${describeValue(reply)}, not ${RUN.expected}`,
    );
  }

  /** What the store knows of jobs, read within `leaseMs / 3`. */
  readFleet(jobs: string[]): Promise<PeriodicFleetRead[]> {
    return this.call(
      `reading the fleet's state of ${names(jobs.map((name) => ({ name })))}`,
      () => this.within(this.coordinator.readFleet!(jobs)),
      (reply) =>
        Array.isArray(reply) &&
        reply.length === jobs.length &&
        reply.every((read) => FLEET_READ.accepts(read))
          ? undefined
          : `readFleet() answered ${describeValue(reply)}, not ${FLEET_READ.expected} per job (${jobs.length})`,
    );
  }

  /** Whether the coordinator carries triggers from any replica to the holder: it has the steps for it. */
  get triggered(): boolean {
    const { requestTrigger, readTrigger, answerTrigger } = this.coordinator;
    return (
      this.batched && [requestTrigger, readTrigger, answerTrigger].every((step) => typeof step === 'function')
    );
  }

  /** Leaves a trigger for the holder; fails when the store has not answered within `leaseMs / 3`. */
  requestTrigger(request: PeriodicTriggerRequest): Promise<void> {
    return this.call(
      `asking the holder of "${request.name}" for a trigger`,
      () => this.within(this.coordinator.requestTrigger!(request)),
      () => undefined,
    );
  }

  /** Where a trigger stands, read within `leaseMs / 3`. */
  readTrigger(name: string, id: string, withdraw: boolean): Promise<PeriodicTriggerState> {
    return this.call(
      `reading the answer to a trigger of "${name}"`,
      () => this.within(this.coordinator.readTrigger!(name, id, withdraw)),
      (reply) =>
        reply === 'pending' || reply === 'taken' || reply === 'withdrawn' || TRIGGER_ANSWER.accepts(reply)
          ? undefined
          : `readTrigger() answered ${describeValue(reply)}, not ${TRIGGER_ANSWER.expected}`,
    );
  }

  /** Answers a trigger for the replica that asked; fails when the store has not answered within `leaseMs / 3`. */
  answerTrigger(name: string, id: string, answer: PeriodicTriggerAnswer): Promise<void> {
    return this.call(
      `answering a trigger of "${name}"`,
      () => this.within(this.coordinator.answerTrigger!(name, id, answer)),
      () => undefined,
    );
  }

  /** Releases leases, and with `leave` the member's record; waits for the store at most `leaseMs / 3`. */
  releaseAll(owner: string, leases: PeriodicLeaseHeld[], leave: boolean): Promise<void> {
    const what = `releasing the lease of ${names(leases)}`;
    const { coordinator } = this;
    const send = this.batched
      ? () => coordinator.releaseAll!(owner, leases, leave)
      : () => Promise.all(leases.map(({ name }) => coordinator.release(name, owner))).then(() => undefined);
    return this.call(
      what,
      () => this.within(send()),
      () => undefined,
    ) as Promise<void>;
  }

  /** The replica has left (or joins again): nothing the store answers from now on is reported (or it is). */
  silence(silent = true): void {
    this.silent = silent;
  }

  /**
   * Sends one command and checks its reply. A command that has not answered within `leaseMs / 3` of being sent
   * is reported as failed then, and again each lease period while it still has not, whatever the driver does
   * with it meanwhile (ioredis queues commands while it reconnects, and fails them only after many attempts);
   * its answer is still awaited. `problem` says what is wrong with a reply, if anything.
   */
  private async call<T>(
    what: string,
    send: () => Promise<unknown>,
    problem: (reply: unknown) => string | undefined,
    answers: (reply: T) => boolean = () => true,
  ): Promise<T> {
    const limit = this.timing.heartbeatMs;
    // A command that hangs is reported as such, not again when the driver gives up on it.
    let hanging = false;
    const sent = now();
    const hung = new DeadlineTimer({
      onDeadline: () => {
        // A replica that has left reports nothing more, and keeps no timer for it.
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
      const wrong = problem(answer);
      if (wrong !== undefined) throw new Error(wrong);
      if (!this.silent && answers(answer as T)) this.store.recovered();
      return answer as T;
    } catch (error) {
      hung.cancel();
      if (!hanging) this.failed(what, error);
      throw error;
    }
  }

  /** The store's answer, or a failure when none comes within `leaseMs / 3`; an answer that comes later is ignored. */
  private within<T>(answer: Promise<T>): Promise<T> {
    const limit = this.timing.heartbeatMs;
    return new Promise((resolve, reject) => {
      const timer = new DeadlineTimer({
        onDeadline: () => reject(new NoAnswer(`no answer within ${Math.round(limit)}ms`)),
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

  private failed(what: string, error: unknown): void {
    if (!this.silent) this.store.failed(what, error);
  }
}

/** A command to the store that has not answered in time: it may still be carried out when the store answers. */
export class NoAnswer extends Error {}

/** What a heartbeat answers, with the failures of the steps for one job it was made of. */
export interface HeartbeatAnswer extends PeriodicHeartbeatReply {
  /** What failed, and how: the steps of a heartbeat made of the steps for one job. */
  failures?: [what: string, error: unknown][];
  /** The jobs whose renewal failed (not refused), with why. */
  failedRenewals?: Map<string, unknown>;
}

/** What a heartbeat does, as a failure line says it. */
function heartbeatWhat({ member, renew, acquire }: PeriodicHeartbeat): string {
  const taking = acquire.map((name) => ({ name }));
  if (taking.length === 0 && renew.length === 0) return `sending the heartbeat of ${member.replica}`;
  if (taking.length === 0) return `renewing the lease of ${names(renew)}`;
  if (renew.length === 0) return `acquiring the lease of ${names(taking)}`;
  return `renewing the lease of ${names(renew)} and acquiring that of ${names(taking)}`;
}

/** A heartbeat made of the steps for one job: the replica alone, as if no other were there. */
async function heartbeatOneByOne(
  coordinator: PeriodicCoordinator,
  { member, renew, acquire }: PeriodicHeartbeat,
): Promise<HeartbeatAnswer> {
  const { owner } = member;
  const failures: [string, unknown][] = [];
  const failedRenewals = new Map<string, unknown>();
  const renewed = Promise.all(
    renew.map(async ({ name }) => {
      try {
        return checked('renew', await coordinator.renew(name, owner), BOOLEAN);
      } catch (error) {
        failures.push([`renewing the lease of "${name}"`, error]);
        failedRenewals.set(name, error);
        return false;
      }
    }),
  );
  const acquired = Promise.all(
    acquire.map(async (name) => {
      let step = `acquiring the lease of "${name}"`;
      let fencingToken = 0;
      try {
        fencingToken = checked('acquire', await coordinator.acquire(name, owner), TOKEN);
        if (fencingToken === 0) return null;
        step = `reading the schedule of "${name}"`;
        const schedule = checked('readSchedule', await coordinator.readSchedule(name), SCHEDULE);
        return { fencingToken, schedule };
      } catch (error) {
        failures.push([step, error]);
        // A lease taken without its schedule is given back.
        if (fencingToken !== 0) await coordinator.release(name, owner).catch(() => undefined);
        return null;
      }
    }),
  );
  return { members: [member], renewed: await renewed, acquired: await acquired, failures, failedRenewals };
}

/** A reply of one step for one job, checked: one of the wrong type is a failure, never a lease. */
function checked<T>(
  step: string,
  reply: unknown,
  type: { accepts(value: unknown): value is T; expected: string },
): T {
  if (!type.accepts(reply))
    throw new Error(`${step}() answered ${describeValue(reply)}, not ${type.expected}`);
  return reply;
}

const TOKEN = { accepts: isWhole, expected: 'a fencing token (a safe integer ≥ 0)' };

const BOOLEAN = {
  accepts: (value: unknown): value is boolean => typeof value === 'boolean',
  expected: 'true or false',
};

/** What is wrong with a heartbeat's reply, if anything: the first entry that does not answer `request`. */
function heartbeatProblem(request: PeriodicHeartbeat, reply: unknown): string | undefined {
  const { members, renewed, acquired } = (reply ?? {}) as Partial<PeriodicHeartbeatReply>;
  const wrong = (what: string, value: unknown, expected: string) =>
    `heartbeat() answered ${what} ${describeValue(value)}, not ${expected}`;
  if (typeof reply !== 'object' || reply === null) {
    return `heartbeat() answered ${describeValue(reply)}, not ${HEARTBEAT}`;
  }
  if (!Array.isArray(members)) return wrong('members', members, 'an array of members');
  const member = members.find(
    (one) =>
      typeof one?.owner !== 'string' || typeof one.replica !== 'string' || typeof one.jobs !== 'string',
  );
  if (member !== undefined)
    return wrong('the member', member, 'a member { owner, replica, jobs } of strings');
  if (!Array.isArray(renewed) || renewed.length !== request.renew.length) {
    return wrong('renewed', renewed, `a boolean per renewal (${request.renew.length})`);
  }
  const renewal = renewed.findIndex((ok) => typeof ok !== 'boolean');
  if (renewal >= 0) return wrong(`renewed[${renewal}]`, renewed[renewal], BOOLEAN.expected);
  if (!Array.isArray(acquired) || acquired.length !== request.acquire.length) {
    return wrong('acquired', acquired, `a holding or null per lease to take (${request.acquire.length})`);
  }
  for (const [i, taken] of acquired.entries()) {
    if (taken === null) continue;
    const { fencingToken, schedule } = (taken ?? {}) as { fencingToken?: unknown; schedule?: unknown };
    if (!isWhole(fencingToken) || fencingToken === 0) {
      return wrong(`acquired[${i}].fencingToken`, fencingToken, 'a fencing token (a safe integer > 0)');
    }
    if (!SCHEDULE.accepts(schedule)) return wrong(`acquired[${i}].schedule`, schedule, SCHEDULE.expected);
  }
  const { paused, triggers, fleet } = reply as PeriodicHeartbeatReply;
  if (fleet !== undefined && (typeof fleet !== 'string' || fleet === '')) {
    return wrong('fleet', fleet, 'a string that names the fleet’s records');
  }
  if (
    triggers !== undefined &&
    !(Array.isArray(triggers) && triggers.every((request) => TRIGGER.accepts(request)))
  ) {
    return wrong('triggers', triggers, TRIGGER.expected);
  }
  if (paused !== undefined && !(Array.isArray(paused) && paused.every((name) => typeof name === 'string'))) {
    return wrong('paused', paused, 'an array of job names');
  }
  const { refused } = reply as PeriodicHeartbeatReply;
  if (
    refused !== undefined &&
    !(
      Array.isArray(refused) &&
      refused.every((one) => typeof one?.name === 'string' && typeof one.error === 'string')
    )
  ) {
    return wrong('refused', refused, 'an array of { name, error } of strings');
  }
  return undefined;
}

/** The names of jobs as a message shows them: `"a"`, or `"a" and 11 more`. */
function names(leases: readonly { name: string }[]): string {
  const [first] = leases;
  if (first === undefined) return 'no job';
  return leases.length === 1 ? `"${first.name}"` : `"${first.name}" and ${leases.length - 1} more`;
}

/** The coordinator as log lines name it: its class, or "The coordinator" for a plain object. */
function storeName(coordinator: PeriodicCoordinator): string {
  const name = coordinator.constructor?.name;
  return name === undefined || name === '' || name === 'Object' ? 'The coordinator' : name;
}

const HEARTBEAT =
  '{ members, renewed, acquired }: the members, a boolean per renewal, and a holding { fencingToken, ' +
  'schedule } or null per lease to take';

const SCHEDULE = {
  accepts: (value: unknown): value is PeriodicFleetSchedule | null => {
    if (value === null) return true;
    const { grid, last, next } = (value ?? {}) as Partial<PeriodicFleetSchedule>;
    return typeof grid === 'string' && isWhole(last) && isWhole(next);
  },
  expected: 'null or a schedule { grid: string, last: number, next: number }',
};

const OPERATION = {
  accepts: (value: unknown): value is PeriodicOperation => {
    const { action, by, note, replica, at } = (value ?? {}) as Partial<PeriodicOperation>;
    const text = (field: unknown) => field === null || typeof field === 'string';
    return (
      (action === 'pause' || action === 'resume' || action === 'trigger') &&
      text(by) &&
      text(note) &&
      typeof replica === 'string' &&
      isWhole(at)
    );
  },
  expected: 'an operation { action, by, note, replica, at }',
};

const RUN = {
  accepts: (value: unknown): value is PeriodicRunEntry => {
    const entry = (value ?? {}) as Partial<PeriodicRunEntry>;
    return (
      typeof entry.id === 'string' &&
      typeof entry.name === 'string' &&
      isWhole(entry.jobId) &&
      typeof entry.replica === 'string' &&
      isWhole(entry.startedAt) &&
      (entry.finishedAt === null || isWhole(entry.finishedAt))
    );
  },
  expected: 'an array of runs { id, name, jobId, replica, startedAt, finishedAt, … }',
};

const FLEET_READ = {
  accepts: (value: unknown): value is PeriodicFleetRead => {
    const read = (value ?? {}) as Partial<PeriodicFleetRead>;
    const holder = read.holder as Partial<NonNullable<PeriodicFleetRead['holder']>> | null | undefined;
    return (
      typeof read.name === 'string' &&
      (holder === null ||
        (typeof holder?.owner === 'string' && isWhole(holder.fencingToken) && isWhole(holder.until))) &&
      (read.pause === null || OPERATION.accepts(read.pause)) &&
      SCHEDULE.accepts(read.schedule) &&
      (read.lastRun === null || RUN.accepts(read.lastRun)) &&
      (read.lastSucceededAt === null || isWhole(read.lastSucceededAt)) &&
      isWhole(read.consecutiveFailures)
    );
  },
  expected: '{ name, holder, pause, schedule, lastRun, lastSucceededAt, consecutiveFailures }',
};

const TRIGGER = {
  accepts: (value: unknown): value is PeriodicTriggerRequest => {
    const request = (value ?? {}) as Partial<PeriodicTriggerRequest>;
    return (
      typeof request.id === 'string' &&
      typeof request.name === 'string' &&
      (request.by === null || typeof request.by === 'string') &&
      typeof request.replica === 'string' &&
      isWhole(request.at)
    );
  },
  expected: 'an array of triggers { id, name, by, replica, at }',
};

const TRIGGER_ANSWER = {
  accepts: (value: unknown): value is PeriodicTriggerAnswer => {
    const answer = (value ?? {}) as { ok?: unknown; jobId?: unknown; error?: unknown; replica?: unknown };
    return (
      typeof answer.replica === 'string' &&
      ((answer.ok === true && isWhole(answer.jobId)) ||
        (answer.ok === false && typeof answer.error === 'string'))
    );
  },
  expected: "'pending', 'taken', 'withdrawn' or an answer { ok, jobId | error, replica }",
};

function wrongOperation(step: string, reply: unknown): string {
  return `${step}() answered ${describeValue(reply)}, not ${step === 'readAudit' ? 'an array of operations' : `null or ${OPERATION.expected}`}`;
}

/** A safe integer ≥ 0. */
function isWhole(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}
