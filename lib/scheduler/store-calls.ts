// The calls a replica makes to its coordinator, each bounded in time, checked, and reported to the store's log.
import type {
  PeriodicCoordinator,
  PeriodicFleetRead,
  PeriodicFleetSchedule,
  PeriodicHeartbeat,
  PeriodicHeartbeatReply,
  PeriodicIncidentKind,
  PeriodicIncidentRecord,
  PeriodicLeaseHeld,
  PeriodicOperation,
  PeriodicRunEntry,
  PeriodicScheduleWrite,
  PeriodicScheduleWritten,
  PeriodicStoredAnswer,
  PeriodicStoredChanges,
  PeriodicStoredQuery,
  PeriodicStoredRecord,
  PeriodicStoredWrite,
  PeriodicTriggerAnswer,
  PeriodicTriggerRequest,
  PeriodicTriggerState,
} from './coordinator-port.js';
import { DeadlineTimer, now } from './deadline-timer.js';
import { describeValue } from './errors.js';
import type { LeaseTiming } from './lease-timing.js';
import {
  BOOLEAN,
  capable,
  checked,
  FLEET_READ,
  heartbeatProblem,
  INCIDENT,
  OPERATION,
  RUN,
  SCHEDULE,
  STORED,
  STORED_ANSWER,
  STORED_CHANGES,
  TOKEN,
  TRIGGER_ANSWER,
  wrongOperation,
} from './reply-checks.js';
import type { StoreLog } from './store-log.js';

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
    return capable(this.coordinator, 'fleet');
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
    return this.bounded(what, () => send(), problem);
  }

  /** Whether the coordinator pauses and audits the fleet's jobs as one: it has the steps for it. */
  get operated(): boolean {
    return this.batched && capable(this.coordinator, 'audit');
  }

  /** Records an operation (and a pause or its end) in the store; fails when it has not answered in `leaseMs / 3`. */
  operate(name: string, operation: PeriodicOperation, keep: number): Promise<void> {
    const what = `recording the ${operation.action} of "${name}"`;
    return this.bounded(
      what,
      () => this.coordinator.operate!(name, operation, keep),
      () => undefined,
    );
  }

  /** Whether the coordinator opens the fleet's incidents as one (docs/alerts.md): it has the steps for it. */
  get incidents(): boolean {
    return this.batched && capable(this.coordinator, 'incidents');
  }

  /** Opens an incident unless its kind is open: whether this call opened it; within `leaseMs / 3`. */
  openIncident(
    incident: PeriodicIncidentRecord,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<boolean> {
    return this.bounded(
      `opening the ${incident.kind} incident of "${incident.name}"`,
      () => this.coordinator.openIncident!(incident, operation, keep),
      (reply) =>
        typeof reply === 'boolean'
          ? undefined
          : `openIncident() answered ${describeValue(reply)}, not true or false`,
    );
  }

  /** Closes an incident: the one closed, or null when none of its kind was open; within `leaseMs / 3`. */
  closeIncident(
    name: string,
    kind: PeriodicIncidentKind,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<PeriodicIncidentRecord | null> {
    return this.bounded(
      `closing the ${kind} incident of "${name}"`,
      () => this.coordinator.closeIncident!(name, kind, operation, keep),
      (reply) =>
        reply === null || INCIDENT.accepts(reply)
          ? undefined
          : `closeIncident() answered ${describeValue(reply)}, not null or ${INCIDENT.expected}`,
    );
  }

  /** The incidents open in the fleet, at most `limit`; within `leaseMs / 3`. */
  readIncidents(limit: number): Promise<PeriodicIncidentRecord[]> {
    return this.bounded(
      'reading the open incidents',
      () => this.coordinator.readIncidents!(limit),
      (reply) =>
        Array.isArray(reply) && reply.every((incident) => INCIDENT.accepts(incident))
          ? undefined
          : `readIncidents() answered ${describeValue(reply)}, not an array of ${INCIDENT.expected}`,
    );
  }

  /** The fleet's pause of a job, read from the store within `leaseMs / 3`. */
  readPause(name: string): Promise<PeriodicOperation | null> {
    return this.bounded(
      `reading the pause of "${name}"`,
      () => this.coordinator.readPause!(name),
      (reply) =>
        reply === null || OPERATION.accepts(reply) ? undefined : wrongOperation('readPause', reply),
    );
  }

  /** A job's audit trail, read from the store within `leaseMs / 3`. */
  readAudit(name: string, limit: number): Promise<PeriodicOperation[]> {
    return this.bounded(
      `reading the audit trail of "${name}"`,
      () => this.coordinator.readAudit!(name, limit),
      (reply) =>
        Array.isArray(reply) && reply.every((entry) => OPERATION.accepts(entry))
          ? undefined
          : wrongOperation('readAudit', reply),
    );
  }

  /** Whether the coordinator keeps the fleet's run history and tells what it knows of a job: it has the steps. */
  get recorded(): boolean {
    return this.batched && capable(this.coordinator, 'history');
  }

  /** Records runs; fails when the store has not answered within `leaseMs / 3` (the records are lost). */
  recordRuns(runs: PeriodicRunEntry[], keep: number): Promise<void> {
    return this.bounded(
      `recording ${runs.length === 1 ? 'a run' : `${runs.length} runs`} of ${names(runs)}`,
      () => this.coordinator.recordRuns!(runs, keep),
      () => undefined,
    );
  }

  /** A job's history, read from the store within `leaseMs / 3`. */
  readHistory(name: string, limit: number, before: number | null, keep: number): Promise<PeriodicRunEntry[]> {
    return this.bounded(
      `reading the history of "${name}"`,
      () => this.coordinator.readHistory!(name, limit, before, keep),
      (reply) =>
        Array.isArray(reply) && reply.every((entry) => RUN.accepts(entry))
          ? undefined
          : `readHistory() answered ${describeValue(reply)}, not ${RUN.expected}`,
    );
  }

  /** A job's schedule as the fleet keeps it, read within `leaseMs / 3`. */
  readSchedule(name: string): Promise<PeriodicFleetSchedule | null> {
    return this.bounded(
      `reading the schedule of "${name}"`,
      () => this.coordinator.readSchedule(name),
      (reply) =>
        SCHEDULE.accepts(reply)
          ? undefined
          : `readSchedule() answered ${describeValue(reply)}, not ${SCHEDULE.expected}`,
    );
  }

  /** What the store knows of jobs, read within `leaseMs / 3`. */
  readFleet(jobs: string[]): Promise<PeriodicFleetRead[]> {
    return this.bounded(
      `reading the fleet's state of ${names(jobs.map((name) => ({ name })))}`,
      () => this.coordinator.readFleet!(jobs),
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
    return this.batched && capable(this.coordinator, 'trigger');
  }

  /** Leaves a trigger for the holder; fails when the store has not answered within `leaseMs / 3`. */
  requestTrigger(request: PeriodicTriggerRequest): Promise<void> {
    return this.bounded(
      `asking the holder of "${request.name}" for a trigger`,
      () => this.coordinator.requestTrigger!(request),
      () => undefined,
    );
  }

  /** Where a trigger stands, read within `leaseMs / 3`. */
  readTrigger(name: string, id: string, withdraw: boolean): Promise<PeriodicTriggerState> {
    return this.bounded(
      `reading the answer to a trigger of "${name}"`,
      () => this.coordinator.readTrigger!(name, id, withdraw),
      (reply) =>
        reply === 'pending' || reply === 'taken' || reply === 'withdrawn' || TRIGGER_ANSWER.accepts(reply)
          ? undefined
          : `readTrigger() answered ${describeValue(reply)}, not ${TRIGGER_ANSWER.expected}`,
    );
  }

  /** Answers a trigger for the replica that asked; fails when the store has not answered within `leaseMs / 3`. */
  answerTrigger(name: string, id: string, answer: PeriodicTriggerAnswer): Promise<void> {
    return this.bounded(
      `answering a trigger of "${name}"`,
      () => this.coordinator.answerTrigger!(name, id, answer),
      () => undefined,
    );
  }

  /** Whether the coordinator keeps stored schedules for the fleet: it has the steps for them. */
  get stores(): boolean {
    return this.batched && capable(this.coordinator, 'schedules');
  }

  /**
   * Writes stored schedules. A write is not abandoned: a store that is slow is reported as hanging (as a
   * heartbeat is), and the caller waits for its answer, which says what was written.
   */
  writeStored(
    writes: PeriodicStoredWrite[],
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer[]> {
    return this.call(
      `writing the stored schedule ${names(writes)}`,
      () => this.coordinator.writeStored!(writes, operation, keep),
      (reply) =>
        Array.isArray(reply) &&
        reply.length === writes.length &&
        reply.every((answer) => STORED_ANSWER.accepts(answer))
          ? undefined
          : `writeStored() answered ${describeValue(reply)}, not ${STORED_ANSWER.expected} per write (${writes.length})`,
    );
  }

  /** Removes a stored schedule; waits for the answer as `writeStored` does. */
  removeStored(
    name: string,
    ifVersion: number | undefined,
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer> {
    return this.call(
      `removing the stored schedule "${name}"`,
      () => this.coordinator.removeStored!(name, ifVersion, operation, keep),
      (reply) =>
        STORED_ANSWER.accepts(reply)
          ? undefined
          : `removeStored() answered ${describeValue(reply)}, not ${STORED_ANSWER.expected}`,
    );
  }

  /** A stored schedule, read within `leaseMs / 3`. */
  readStored(name: string): Promise<PeriodicStoredRecord | null> {
    return this.bounded(
      `reading the stored schedule "${name}"`,
      () => this.coordinator.readStored!(name),
      (reply) =>
        reply === null || STORED.accepts(reply)
          ? undefined
          : `readStored() answered ${describeValue(reply)}, not null or ${STORED.expected}`,
    );
  }

  /** A page of the stored schedules, read within `leaseMs / 3`. */
  listStored(query: PeriodicStoredQuery): Promise<PeriodicStoredRecord[]> {
    return this.bounded(
      'listing the stored schedules',
      () => this.coordinator.listStored!(query),
      (reply) =>
        Array.isArray(reply) && reply.length <= query.limit && reply.every((record) => STORED.accepts(record))
          ? undefined
          : `listStored() answered ${describeValue(reply)}, not an array of at most ${query.limit} of ${STORED.expected}`,
    );
  }

  /** The changes to the stored schedules after `since`; waits for the answer as a heartbeat does. */
  readStoredChanges(since: number, limit: number): Promise<PeriodicStoredChanges> {
    return this.call(
      'reading the changes to the stored schedules',
      () => this.coordinator.readStoredChanges!(since, limit),
      (reply) =>
        STORED_CHANGES.accepts(reply)
          ? undefined
          : `readStoredChanges() answered ${describeValue(reply)}, not ${STORED_CHANGES.expected}`,
    );
  }

  /** Releases leases, and with `leave` the member's record; waits for the store at most `leaseMs / 3`. */
  releaseAll(owner: string, leases: PeriodicLeaseHeld[], leave: boolean): Promise<void> {
    const what = `releasing the lease of ${names(leases)}`;
    const { coordinator } = this;
    const send = this.batched
      ? () => coordinator.releaseAll!(owner, leases, leave)
      : () => Promise.all(leases.map(({ name }) => coordinator.release(name, owner))).then(() => undefined);
    return this.bounded(
      what,
      () => send(),
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
  private call<T>(
    what: string,
    send: () => Promise<unknown>,
    problem: (reply: unknown) => string | undefined,
    answers: (reply: T) => boolean = () => true,
  ): Promise<T> {
    return this.exchange(what, send, problem, answers, false);
  }

  /**
   * As `call`, for a command that must not hold its caller up: one that has not answered within `leaseMs / 3`
   * fails then (`NoAnswer`), and an answer that comes later is ignored.
   */
  private bounded<T>(
    what: string,
    send: () => Promise<T>,
    problem: (reply: unknown) => string | undefined,
  ): Promise<T> {
    return this.exchange(what, send, problem, () => true, true);
  }

  private async exchange<T>(
    what: string,
    send: () => Promise<unknown>,
    problem: (reply: unknown) => string | undefined,
    answers: (reply: T) => boolean,
    giveUp: boolean,
  ): Promise<T> {
    const limit = this.timing.heartbeatMs;
    // A command that hangs is reported as such, not again when the driver gives up on it.
    let hanging = false;
    const sent = now();
    let stop: (error: NoAnswer) => void = () => undefined;
    const stopped = new Promise<never>((_, reject) => (stop = reject));
    const hung = new DeadlineTimer({
      onDeadline: () => {
        if (giveUp) return stop(new NoAnswer(`no answer after ${Math.round(now() - sent)}ms`));
        // A replica that has left reports nothing more, and keeps no timer for it.
        if (this.silent) return;
        hanging = true;
        this.failed(what, new Error(`no answer after ${Math.round(now() - sent)}ms`));
        hung.armAt(now() + this.coordinator.leaseMs);
      },
    });
    hung.armAt(sent + limit);
    try {
      // A race settles once; the command's own rejection after it is still handled, and ignored.
      const answer: unknown = await (giveUp ? Promise.race([send(), stopped]) : send());
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

  private failed(what: string, error: unknown): void {
    if (!this.silent) this.store.failed(what, error);
  }
}

/** A command to the store that has not answered in time: it may still be carried out when the store answers. */
export class NoAnswer extends Error {
  override readonly name = 'NoAnswer';
}

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

/** The names of jobs as a message shows them: `"a"`, or `"a" and 11 more`. */
function names(leases: readonly { name: string }[]): string {
  const [first] = leases;
  if (first === undefined) return 'no job';
  return leases.length === 1 ? `"${first.name}"` : `"${first.name}" and ${leases.length - 1} more`;
}
