// The port between the scheduler and a coordinator's store: what a coordinator is, and the records it keeps and
// answers. The file a coordinator's author reads (docs/replicas.md, "Writing a coordinator"); the scheduler's
// side of it, the calls it makes and how it checks and reports their answers, is in store-calls.ts,
// reply-checks.ts and store-log.ts beside it.
import type { JobExitReason, PeriodicIncidentKind } from './events.js';

export type { PeriodicIncidentKind };

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
  /**
   * How many slots of this grid the fleet has claimed, the last one included, for a job with `maxRuns`, whose
   * holder writes it with every write of its schedule; given back as it was written, absent when not written.
   */
  runs?: number;
  /**
   * A backfill under way (`registry.backfill`): the slots of the grid from `next` up to `to` (excluded) are still
   * to run. The holder writes it with every write of the schedule while it lasts; absent when there is none.
   */
  backfill?: { next: number; to: number };
}

/** A replica of the fleet as its heartbeat leaves it in the store (docs/replicas.md, "Coordination at scale"). */
export interface PeriodicFleetMember {
  /** The replica's session: the owner of its leases, one for each run of a process. */
  owner: string;
  /** The replica's name, as status and logs show it. */
  replica: string;
  /** A digest of the names of the exclusive jobs the replica has: replicas with the same jobs have the same. */
  jobs: string;
  /**
   * The handlers of stored schedules the replica can run (`@PeriodicHandler()`), from a replica of a
   * coordinator that stores schedules; absent from older replicas, which run none.
   */
  handlers?: string[];
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
  /**
   * The store's count of changes to its stored schedules (`PeriodicScheduleSteps`), from a coordinator that
   * stores them: a replica that has applied fewer reads the changes it missed.
   */
  schedules?: number;
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

/**
 * An operation on a job, as the job's audit trail keeps it: `pause`, `resume` or `trigger`, a change of a
 * stored schedule (`create`, `update`, `remove`), a backfill, or an incident opened or closed (`incident`,
 * `recovered`, written by the incident steps, not by `operate`).
 */
export interface PeriodicOperation {
  action:
    | 'pause'
    | 'resume'
    | 'trigger'
    | 'create'
    | 'update'
    | 'remove'
    | 'backfill'
    | 'cancelBackfill'
    | 'incident'
    | 'recovered';
  /** Who asked for it, as the caller named them; null when not named. */
  by: string | null;
  note: string | null;
  /** The replica that was asked. */
  replica: string;
  /** When, in wall-clock milliseconds since the epoch. */
  at: number;
  /**
   * A backfill of the slots in `[from, to)` (wall-clock ms) asked of the holder, with the note of the operation, or
   * its cancellation; absent for a trigger. The holder answers with `jobId` the count of slots.
   */
  backfill?: { from: number; to: number; note: string | null } | 'cancel';
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
  origin: 'schedule' | 'trigger' | 'manual' | 'retry' | 'recovery' | 'backfill';
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
  /**
   * A backfill of the slots in `[from, to)` (wall-clock ms) asked of the holder, with the note of the operation, or
   * its cancellation; absent for a trigger. The holder answers with `jobId` the count of slots.
   */
  backfill?: { from: number; to: number; note: string | null } | 'cancel';
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
 * its own (docs/replicas.md shows one), and check it with the contract of `nestjs-periodic/testing`.
 *
 * The steps for one job are required (`PeriodicLeaseSteps`). Each further ability is a capability, a set of
 * steps a coordinator has whole or not at all: the fleet's batched steps (`PeriodicFleetSteps`), which keep a
 * fleet's traffic to the store independent of the number of jobs and spread the jobs over the replicas (a
 * coordinator without them works as one replica alone, with a command per job); and, on top of them, the
 * fleet's pauses and audit trail, its run history, triggers from any replica, stored schedules, and incidents.
 */
export type PeriodicCoordinator = PeriodicLeaseSteps &
  Partial<
    PeriodicFleetSteps &
      PeriodicAuditSteps &
      PeriodicHistorySteps &
      PeriodicTriggerSteps &
      PeriodicScheduleSteps &
      PeriodicIncidentSteps
  >;

/** The steps for one job, which every coordinator has: a job's lease and its schedule. */
export interface PeriodicLeaseSteps {
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

/**
 * What spreads the jobs over the replicas and keeps the fleet's traffic independent of the number of jobs: the
 * batched steps, each one step in the store for many jobs.
 */
export interface PeriodicFleetSteps {
  /**
   * One replica's heartbeat, in one step: its member record, the renewal of the leases it holds, and the taking
   * of those it should hold. The owner of a lease is the member's session; a renewal checks the token too.
   */
  heartbeat(request: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply>;
  /**
   * Several writes of `writeSchedule` in one step, each of a different job: for each, in order, whether the
   * store took it. Unlike `writeSchedule`, it may take a write whose lease ran out or was given up, as long as
   * no other owner took the lease since (the token is still the job's latest) and `owner`'s member record
   * lives: nobody can have moved the schedule in between (the Redis coordinator checks one record per step
   * rather than a key per job). A coordinator with `operate` answers `'paused'` for a write it took of a job
   * that the fleet has paused.
   */
  writeSchedules(owner: string, writes: PeriodicScheduleWrite[]): Promise<PeriodicScheduleWritten[]>;
  /**
   * Gives up `leases`, each if `owner` still holds it with that token; with `leave`, also forgets the member
   * `owner`, so that the others take its share of the jobs at their next heartbeat.
   */
  releaseAll(owner: string, leases: PeriodicLeaseHeld[], leave: boolean): Promise<void>;
}

/** What pauses a job for the whole fleet and keeps its audit trail. */
export interface PeriodicAuditSteps {
  /**
   * Records an operation in job `name`'s audit trail, which keeps the latest `keep`; a `'pause'` also pauses the
   * job for the fleet (until a `'resume'`), and then `writeSchedules` takes its writes but answers `'paused'`,
   * so that its holder starts nothing. With `readPause` and `readAudit`, the steps of a fleet that is paused
   * and audited as one (docs/replicas.md); a coordinator without them pauses each replica on its own.
   */
  operate(name: string, operation: PeriodicOperation, keep: number): Promise<void>;
  /** The fleet's pause of job `name` (the operation that paused it), or null when it is not paused. */
  readPause(name: string): Promise<PeriodicOperation | null>;
  /** The latest `limit` operations of job `name`'s audit trail, newest first. */
  readAudit(name: string, limit: number): Promise<PeriodicOperation[]>;
}

/** What keeps the fleet's run history, and what the store knows of each job for the fleet's status. */
export interface PeriodicHistorySteps {
  /**
   * Records runs, each in its job's history, which keeps the latest `keep`: a run whose `id` is there already
   * (its start) is replaced by its new record (its end). A run that ended also sets what `readFleet` answers
   * of the job's successes and failures.
   */
  recordRuns(runs: PeriodicRunEntry[], keep: number): Promise<void>;
  /**
   * The latest `limit` runs of job `name` that started before `before` (if not null), newest first, among the
   * latest `keep` recorded (a store may keep a few more than `keep` for a while; 100 if not given).
   */
  readHistory(name: string, limit: number, before: number | null, keep?: number): Promise<PeriodicRunEntry[]>;
  /** What the store knows of each of the jobs `names`, in order: holder, pause, schedule and latest runs. */
  readFleet(names: string[]): Promise<PeriodicFleetRead[]>;
}

/** What carries a trigger asked of any replica to the holder of the job's lease, and its answer back. */
export interface PeriodicTriggerSteps {
  /**
   * Leaves a trigger for the holder of the job's lease, which takes it with its next heartbeat (`triggers` of
   * the reply). With `readTrigger` and `answerTrigger`, the steps of a trigger from any replica.
   */
  requestTrigger(request: PeriodicTriggerRequest): Promise<void>;
  /**
   * Where trigger `id` of job `name` stands; an answer read is forgotten. With `withdraw`, a trigger no holder
   * has taken yet is withdrawn (`'withdrawn'`), and will not be.
   */
  readTrigger(name: string, id: string, withdraw: boolean): Promise<PeriodicTriggerState>;
  /** The holder's answer to trigger `id` of job `name`, for the replica that asked. */
  answerTrigger(name: string, id: string, answer: PeriodicTriggerAnswer): Promise<void>;
}

/**
 * A stored schedule as the store keeps it (docs/schedules.md): its definition as the package wrote it, which the
 * store does not read, and what the store counts of it. Times are wall-clock milliseconds since the epoch.
 */
export interface PeriodicStoredRecord {
  name: string;
  /** The `@PeriodicHandler()` that runs it, kept apart from the definition so that a list can be filtered by it. */
  handler: string;
  /** The definition (its options and data) as JSON text, with the version of its format. */
  definition: string;
  /** 1 when created, one more with each update. */
  version: number;
  createdAt: number;
  updatedAt: number;
  /** Who made the last change, as the caller named them; null when not named. */
  updatedBy: string | null;
  /** The store's count of changes (`PeriodicHeartbeatReply.schedules`) when this schedule last changed. */
  change: number;
}

/** A write of a stored schedule, refused unless its version is `ifVersion` when that is given (0: it must not exist). */
export interface PeriodicStoredWrite {
  name: string;
  handler: string;
  definition: string;
  ifVersion?: number;
}

/**
 * What the store answers a write or a removal: the record written (null for a removal), or a refusal with the
 * version the schedule has (null: it does not exist).
 */
export type PeriodicStoredAnswer =
  | {
      ok: true;
      record: PeriodicStoredRecord | null;
      /** A write: whether it created the schedule (again, after a removal, included) rather than updated it. */
      created?: boolean;
      /** A removal: whether there was a schedule to remove. */
      removed?: boolean;
    }
  | { ok: false; currentVersion: number | null };

/** Which stored schedules `listStored` reads. */
export interface PeriodicStoredQuery {
  /** Only those of this handler. */
  handler?: string;
  /** Only those whose names begin with this text. */
  prefix?: string;
  /** Only those whose names come after this one, in the order of their UTF-8 bytes. */
  after?: string;
  limit: number;
}

/** The changes to the stored schedules after a count of changes, in the order they were made. */
export interface PeriodicStoredChanges {
  /** The schedules written since, their latest version each. */
  records: PeriodicStoredRecord[];
  /** The names of those removed since. */
  removed: string[];
  /** The count of changes these bring the reader to: the next read starts after it. */
  change: number;
  /** Whether no change is left after `change`. */
  complete: boolean;
}

/**
 * What keeps the fleet's stored schedules (docs/schedules.md): schedules created, edited and removed at run time,
 * each written with an entry in its job's audit trail in the same step, and counted, so that every replica reads
 * the changes it has not applied (`PeriodicHeartbeatReply.schedules` tells it there are some).
 */
export interface PeriodicScheduleSteps {
  /**
   * Writes schedules, each unless `ifVersion` is given and is not its version (0 when it does not exist): a
   * creation at version 1 (or, of a schedule removed before, one more than the version it was removed at, so that
   * an edit read before the removal conflicts) or an update at one more, each recorded in the job's audit trail
   * (`'create'` or `'update'`, `operation`'s other fields) which keeps the latest `keep`. One answer per write,
   * in order.
   */
  writeStored(
    writes: PeriodicStoredWrite[],
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer[]>;
  /** Removes a schedule unless `ifVersion` is given and is not its version, and records `'remove'` in its audit trail. */
  removeStored(
    name: string,
    ifVersion: number | undefined,
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer>;
  /** The stored schedule `name`, or null. */
  readStored(name: string): Promise<PeriodicStoredRecord | null>;
  /**
   * At most `limit` stored schedules in the order of their names, after the name `after` (if given): only those of
   * `handler`, and those whose names start with `prefix`, when given.
   */
  listStored(query: PeriodicStoredQuery): Promise<PeriodicStoredRecord[]>;
  /** At most about `limit` changes made after the count `since` (0: every schedule stored). */
  readStoredChanges(since: number, limit: number): Promise<PeriodicStoredChanges>;
  /**
   * Optional: calls `listener` soon after any replica changes a stored schedule (Redis pub/sub, PostgreSQL
   * `NOTIFY`), so that replicas apply it before their next heartbeat. Returns what stops it.
   */
  watchStored?(listener: () => void): () => void;
}

/** An open incident of a job, as the store keeps it. `since`: when it opened, wall-clock ms since the epoch. */
export interface PeriodicIncidentRecord {
  name: string;
  kind: PeriodicIncidentKind;
  since: number;
  detail: string;
}

/**
 * What opens each incident once for the fleet (docs/alerts.md): the replica whose step opens it says so, and the
 * others, which find it open, do not. Each step records the incident's opening or closing in the job's audit
 * trail (`'incident'`, `'recovered'`), which keeps the latest `keep`, in the same step.
 */
export interface PeriodicIncidentSteps {
  /** Opens `incident` unless its job has one of its kind open: true if this step opened it. */
  openIncident(
    incident: PeriodicIncidentRecord,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<boolean>;
  /** Closes the incident of `kind` of job `name`: the incident closed, or null when none was open. */
  closeIncident(
    name: string,
    kind: PeriodicIncidentKind,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<PeriodicIncidentRecord | null>;
  /** The incidents open in the fleet, at most `limit` of them, in the order of their jobs' names. */
  readIncidents(limit: number): Promise<PeriodicIncidentRecord[]>;
}
