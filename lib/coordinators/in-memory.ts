import { randomUUID } from 'node:crypto';
import type {
  PeriodicCoordinator,
  PeriodicFleetMember,
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
} from '../scheduler/coordinator-port.js';
import { now } from '../scheduler/deadline-timer.js';
import { checkedOptions } from '../scheduler/rules.js';
import { countOutcome, newestFirst, outcomeOf, type SlotStreak } from '../scheduler/history.js';
import { byUtf8, LEASE_MS } from './replies.js';

/** Options of {@link InMemoryCoordinator}. */
export interface InMemoryCoordinatorOptions {
  /** How long a lease lasts unless renewed, in integer milliseconds, 100 to 86,400,000 (a day). @default 10_000 */
  leaseMs?: number;
}

/**
 * Leases kept in this process's memory: for applications that share one process (several replicas of an
 * application booted in one Jest test, to watch exactly one of them run an exclusive job), with the token
 * rules of the stores: each fencing token is greater than the last and at least the clock in microseconds.
 * It shares nothing with other processes.
 */
export class InMemoryCoordinator implements PeriodicCoordinator {
  /** How long a lease lasts unless renewed, in ms. */
  readonly leaseMs: number;
  /** The leases held, by job name; protected for subclasses that inject failures in tests. */
  protected readonly leases = new Map<string, { owner: string; expiresAt: number }>();
  /** What names the fleet's records (`PeriodicHeartbeatReply.fleet`), written by the first heartbeat. */
  private fleet: string | undefined;
  private readonly tokens = new Map<string, number>();
  private readonly schedules = new Map<string, PeriodicFleetSchedule>();
  /** The members of the fleet, with the expiry of their records. */
  private readonly members = new Map<string, { member: PeriodicFleetMember; expiresAt: number }>();
  /** The fleet's pauses, and the audit trails (newest last), by job name. */
  private readonly pauses = new Map<string, PeriodicOperation>();
  private readonly audits = new Map<string, PeriodicOperation[]>();
  /** The open incidents, by job name and kind. */
  private readonly incidents = new Map<string, Map<PeriodicIncidentKind, PeriodicIncidentRecord>>();
  /** The run histories (in the order they were recorded), and what the fleet's runs told of each job. */
  private readonly histories = new Map<string, PeriodicRunEntry[]>();
  private readonly outcomes = new Map<string, SlotStreak>();
  /** Triggers no holder has taken yet, by job name; and the answers not read yet, by trigger id. */
  private readonly triggers = new Map<string, PeriodicTriggerRequest[]>();
  private readonly answers = new Map<string, PeriodicTriggerAnswer>();
  /**
   * The stored schedules by name, the count of their changes, and of each removed one the change that removed it
   * and its last version (one created again goes on from it).
   */
  private readonly stored = new Map<string, PeriodicStoredRecord>();
  private storedChange = 0;
  private readonly storedRemoved = new Map<string, { change: number; version: number }>();
  /** Who is told of a change of a stored schedule. */
  private readonly watchers = new Set<() => void>();

  constructor(options: InMemoryCoordinatorOptions = {}) {
    const where = 'new InMemoryCoordinator()';
    const given = checkedOptions(where, options, { leaseMs: LEASE_MS }, '{ leaseMs: 10_000 }');
    this.leaseMs = (given.leaseMs as number | undefined) ?? 10_000;
  }

  async acquire(name: string, owner: string): Promise<number> {
    if (this.holder(name) !== undefined) return 0;
    this.leases.set(name, { owner, expiresAt: now() + this.leaseMs });
    const token = Math.max((this.tokens.get(name) ?? 0) + 1, microseconds());
    this.tokens.set(name, token);
    return token;
  }

  async renew(name: string, owner: string): Promise<boolean> {
    if (this.holder(name) !== owner) return false;
    this.leases.set(name, { owner, expiresAt: now() + this.leaseMs });
    return true;
  }

  async release(name: string, owner: string): Promise<boolean> {
    return this.holder(name) === owner && this.leases.delete(name);
  }

  async readSchedule(name: string): Promise<PeriodicFleetSchedule | null> {
    const schedule = this.schedules.get(name);
    return schedule === undefined ? null : scheduleCopy(schedule);
  }

  async writeSchedule(
    name: string,
    owner: string,
    fencingToken: number,
    schedule: PeriodicFleetSchedule,
  ): Promise<boolean> {
    if (this.holder(name) !== owner || this.tokens.get(name) !== fencingToken) return false;
    if (schedule.last < (this.schedules.get(name)?.last ?? 0)) return false;
    this.schedules.set(name, scheduleCopy(schedule));
    return true;
  }

  /**
   * The heartbeat as the batched steps are made of the steps for one job (which subclasses of tests may make
   * fail): each renewal and each taking is one of them.
   */
  async heartbeat({ member, renew, acquire }: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply> {
    const { owner } = member;
    this.members.set(owner, { member, expiresAt: now() + this.leaseMs });
    const renewed = await Promise.all(
      renew.map(({ name, fencingToken }) =>
        this.tokens.get(name) === fencingToken ? this.renew(name, owner) : false,
      ),
    );
    const take = async (name: string) => {
      const fencingToken = await this.acquire(name, owner);
      if (fencingToken === 0) return null;
      try {
        return { fencingToken, schedule: await this.readSchedule(name) };
      } catch (error) {
        // As in one step: a lease is not taken without its schedule.
        await this.release(name, owner);
        throw error;
      }
    };
    const acquired = await Promise.all(acquire.map(take));
    const members: PeriodicFleetMember[] = [];
    for (const [key, { member: live, expiresAt }] of this.members) {
      if (expiresAt > now()) members.push({ ...live });
      else this.members.delete(key);
    }
    const triggers = renew.flatMap(({ name }, i) => {
      const waiting = renewed[i] ? (this.triggers.get(name) ?? []) : [];
      this.triggers.delete(name);
      return waiting.map((request) => ({ ...request }));
    });
    this.fleet ??= randomUUID();
    return {
      members,
      renewed,
      acquired,
      paused: [...this.pauses.keys()],
      triggers,
      fleet: this.fleet,
      schedules: this.storedChange,
    };
  }

  async writeSchedules(owner: string, writes: PeriodicScheduleWrite[]): Promise<PeriodicScheduleWritten[]> {
    return Promise.all(
      writes.map(async ({ name, fencingToken, schedule }) => {
        const taken = await this.writeSchedule(name, owner, fencingToken, schedule);
        return taken && this.pauses.has(name) ? 'paused' : taken;
      }),
    );
  }

  async operate(name: string, operation: PeriodicOperation, keep: number): Promise<void> {
    if (operation.action === 'pause') this.pauses.set(name, { ...operation });
    if (operation.action === 'resume') this.pauses.delete(name);
    this.audited(name, operation, keep);
  }

  async openIncident(
    incident: PeriodicIncidentRecord,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<boolean> {
    const { name, kind } = incident;
    let open = this.incidents.get(name);
    if (open?.has(kind)) return false;
    if (open === undefined) this.incidents.set(name, (open = new Map()));
    open.set(kind, { ...incident });
    this.audited(name, operation, keep);
    return true;
  }

  async closeIncident(
    name: string,
    kind: PeriodicIncidentKind,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<PeriodicIncidentRecord | null> {
    const open = this.incidents.get(name);
    const incident = open?.get(kind);
    if (incident === undefined) return null;
    open!.delete(kind);
    if (open!.size === 0) this.incidents.delete(name);
    this.audited(name, operation, keep);
    return { ...incident };
  }

  async readIncidents(limit: number): Promise<PeriodicIncidentRecord[]> {
    return [...this.incidents.keys()]
      .sort(byUtf8)
      .flatMap((name) => [...this.incidents.get(name)!.values()].map((incident) => ({ ...incident })))
      .slice(0, limit);
  }

  private audited(name: string, operation: PeriodicOperation, keep: number): void {
    const trail = this.audits.get(name) ?? [];
    trail.push({ ...operation });
    this.audits.set(name, trail.slice(-keep));
  }

  async writeStored(
    writes: PeriodicStoredWrite[],
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer[]> {
    const answers = writes.map(({ name, handler, definition, ifVersion }): PeriodicStoredAnswer => {
      const old = this.stored.get(name);
      if (ifVersion !== undefined && ifVersion !== (old?.version ?? 0)) {
        return { ok: false, currentVersion: old?.version ?? null };
      }
      const record: PeriodicStoredRecord = {
        name,
        handler,
        definition,
        version: (old?.version ?? this.storedRemoved.get(name)?.version ?? 0) + 1,
        createdAt: old?.createdAt ?? operation.at,
        updatedAt: operation.at,
        updatedBy: operation.by,
        change: ++this.storedChange,
      };
      this.stored.set(name, record);
      this.storedRemoved.delete(name);
      this.audited(name, { action: old === undefined ? 'create' : 'update', ...operation }, keep);
      return { ok: true, record: { ...record }, created: old === undefined };
    });
    this.changed();
    return answers;
  }

  async removeStored(
    name: string,
    ifVersion: number | undefined,
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer> {
    const old = this.stored.get(name);
    if (ifVersion !== undefined && ifVersion !== (old?.version ?? 0)) {
      return { ok: false, currentVersion: old?.version ?? null };
    }
    if (old === undefined) return { ok: true, record: null, removed: false };
    this.stored.delete(name);
    this.storedRemoved.set(name, { change: ++this.storedChange, version: old.version });
    this.audited(name, { action: 'remove', ...operation }, keep);
    this.changed();
    return { ok: true, record: null, removed: true };
  }

  async readStored(name: string): Promise<PeriodicStoredRecord | null> {
    const record = this.stored.get(name);
    return record === undefined ? null : { ...record };
  }

  async listStored({
    handler,
    prefix = '',
    after,
    limit,
  }: PeriodicStoredQuery): Promise<PeriodicStoredRecord[]> {
    return [...this.stored.values()]
      .filter(
        (record) =>
          (handler === undefined || record.handler === handler) &&
          record.name.startsWith(prefix) &&
          (after === undefined || byUtf8(record.name, after) > 0),
      )
      .sort((a, b) => byUtf8(a.name, b.name))
      .slice(0, limit)
      .map((record) => ({ ...record }));
  }

  async readStoredChanges(since: number, limit: number): Promise<PeriodicStoredChanges> {
    const changes: (PeriodicStoredRecord | { name: string; change: number; removed: true })[] = [];
    for (const record of this.stored.values()) if (record.change > since) changes.push(record);
    for (const [name, { change }] of this.storedRemoved) {
      if (change > since) changes.push({ name, change, removed: true });
    }
    changes.sort((a, b) => a.change - b.change);
    const taken = changes.slice(0, limit);
    return {
      records: taken.flatMap((one) => ('removed' in one ? [] : [{ ...one }])),
      removed: taken.flatMap((one) => ('removed' in one ? [one.name] : [])),
      change: taken.length === 0 ? Math.max(since, this.storedChange) : taken.at(-1)!.change,
      complete: taken.length === changes.length,
    };
  }

  watchStored(listener: () => void): () => void {
    const watching = () => listener();
    this.watchers.add(watching);
    return () => this.watchers.delete(watching);
  }

  /** Tells the watchers, after this step: as a notification from a store would, never within it. */
  private changed(): void {
    for (const watcher of this.watchers) setImmediate(watcher);
  }

  async readPause(name: string): Promise<PeriodicOperation | null> {
    const pause = this.pauses.get(name);
    return pause === undefined ? null : { ...pause };
  }

  async readAudit(name: string, limit: number): Promise<PeriodicOperation[]> {
    return (this.audits.get(name) ?? [])
      .slice(-limit)
      .reverse()
      .map((operation) => ({ ...operation }));
  }

  async recordRuns(runs: PeriodicRunEntry[], keep: number): Promise<void> {
    for (const run of runs) {
      let history = this.histories.get(run.name);
      if (history === undefined) this.histories.set(run.name, (history = []));
      // The end of a run replaces its start, most often the latest record: looked for from the newest.
      let at = history.length - 1;
      while (at >= 0 && history[at]!.id !== run.id) at--;
      if (at >= 0) history[at] = copyOf(run);
      else history.push(copyOf(run));
      if (history.length > keep) history.splice(0, history.length - keep);
      let streak = this.outcomes.get(run.name);
      if (streak === undefined) {
        streak = { lastSucceededAt: null, consecutiveFailures: 0 };
        this.outcomes.set(run.name, streak);
      }
      countOutcome(streak, outcomeOf(run), run.finishedAt ?? 0);
    }
  }

  async readHistory(name: string, limit: number, before: number | null): Promise<PeriodicRunEntry[]> {
    return newestFirst(this.histories.get(name) ?? [], limit, before).map(copyOf);
  }

  async readFleet(names: string[]): Promise<PeriodicFleetRead[]> {
    return Promise.all(
      names.map(async (name) => {
        const owner = this.holder(name);
        const [lastRun = null] = await this.readHistory(name, 1, null);
        return {
          name,
          holder:
            owner === undefined
              ? null
              : {
                  owner,
                  fencingToken: this.tokens.get(name)!,
                  until: Math.round(Date.now() + (this.leases.get(name)!.expiresAt - now())),
                },
          pause: await this.readPause(name),
          schedule: await this.readSchedule(name),
          lastRun,
          ...(this.outcomes.get(name) ?? { lastSucceededAt: null, consecutiveFailures: 0 }),
        };
      }),
    );
  }

  async requestTrigger(request: PeriodicTriggerRequest): Promise<void> {
    this.triggers.set(request.name, [
      ...(this.triggers.get(request.name) ?? []),
      { ...request, ...(typeof request.backfill === 'object' ? { backfill: { ...request.backfill } } : {}) },
    ]);
  }

  async readTrigger(name: string, id: string, withdraw: boolean): Promise<PeriodicTriggerState> {
    const answer = this.answers.get(id);
    if (answer !== undefined) {
      this.answers.delete(id);
      return { ...answer };
    }
    const waiting = this.triggers.get(name) ?? [];
    if (!waiting.some((request) => request.id === id)) return 'taken';
    if (!withdraw) return 'pending';
    this.triggers.set(
      name,
      waiting.filter((request) => request.id !== id),
    );
    return 'withdrawn';
  }

  async answerTrigger(_name: string, id: string, answer: PeriodicTriggerAnswer): Promise<void> {
    this.answers.set(id, { ...answer });
  }

  async releaseAll(owner: string, leases: PeriodicLeaseHeld[], leave: boolean): Promise<void> {
    for (const { name, fencingToken } of leases) {
      if (this.tokens.get(name) === fencingToken) await this.release(name, owner);
    }
    if (leave) this.members.delete(owner);
  }

  /** The owner holding the lease of `name` now, if any. */
  protected holder(name: string): string | undefined {
    const lease = this.leases.get(name);
    return lease !== undefined && lease.expiresAt > now() ? lease.owner : undefined;
  }
}

/** A run's record of its own, as a store keeps it apart from the one given. */
function copyOf(run: PeriodicRunEntry): PeriodicRunEntry {
  return { ...run, error: run.error === null ? null : { ...run.error } };
}

let lastMicroseconds = 0;

/** The wall clock in microseconds, never the same twice in this process: the floor of fencing tokens. */
function microseconds(): number {
  lastMicroseconds = Math.max(Math.floor((performance.timeOrigin + now()) * 1000), lastMicroseconds + 1);
  return lastMicroseconds;
}

/** A schedule as the store keeps it, apart from the writer's object: what it holds, and nothing else. */
function scheduleCopy({ grid, last, next, runs, backfill }: PeriodicFleetSchedule): PeriodicFleetSchedule {
  const copy: PeriodicFleetSchedule = { grid, last, next };
  if (runs !== undefined) copy.runs = runs;
  if (backfill !== undefined) copy.backfill = { next: backfill.next, to: backfill.to };
  return copy;
}
