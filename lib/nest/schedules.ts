import { Logger } from '@nestjs/common';
import type {
  PeriodicFleetMember,
  PeriodicOperation,
  PeriodicStoredAnswer,
  PeriodicStoredChanges,
  PeriodicStoredRecord,
} from '../scheduler/coordinator-port.js';
import { describeValue, PeriodicConfigError, PeriodicConflictError, storeRead } from '../scheduler/errors.js';
import { keptBy } from '../scheduler/job-history.js';
import {
  auditEntry,
  auditLimit,
  OPERATION_RULES,
  operatedEvent,
  type PeriodicAuditEntry,
} from '../scheduler/operations.js';
import { historyQuery, type PeriodicRunRecord, runRecord } from '../scheduler/history.js';
import type { StoreCalls } from '../scheduler/store-calls.js';
import { jobOptionsOf, type PeriodicSchedulerOptions } from '../scheduler/options.js';
import type { PeriodicScheduler } from '../scheduler/periodic-scheduler.js';
import type { Replica } from '../scheduler/replica.js';
import { checkedOptions, CONTROL, nearest, type OptionRule } from '../scheduler/rules.js';
import type { PeriodicContext } from '../scheduler/run.js';
import {
  checkDefinition,
  type CheckedDefinition,
  frozenData,
  type PeriodicScheduleChangeOptions,
  type PeriodicScheduleDefinition,
  type PeriodicScheduleList,
  type PeriodicScheduleQuery,
  type PeriodicStoredSchedule,
  readDefinition,
  scheduleWhere,
  StoredFeed,
} from '../scheduler/stored-schedules.js';
import { LOGGER_CONTEXT } from './constants.js';
import type { PeriodicEvents } from './events.js';
import type { ModuleSettings } from './options.js';

/** A `@PeriodicHandler()` method, found at bootstrap: what runs the stored schedules that name it. */
export class HandlerPlace {
  /**
   * The method the instance inherits, shared by the jobs of the handler's schedules (a run calls one that a
   * test's spy puts on the instance instead, as `SchedulerContext.method` says).
   */
  readonly run: (context: PeriodicContext) => unknown;

  constructor(
    readonly handler: string,
    readonly provider: { readonly className: string; readonly module: string; readonly instance: object },
    readonly key: string | symbol,
    /** The objects a run of it hangs on, drained before any of them is destroyed. */
    readonly ties: Set<object>,
  ) {
    this.run = (provider.instance as Record<string | symbol, HandlerPlace['run']>)[key]!;
  }

  /** The instance the method is called on. */
  get target(): object {
    return this.provider.instance;
  }

  toString(): string {
    return `@PeriodicHandler('${this.handler}') on ${this.provider.className}.${String(this.key)} (in ${this.provider.module})`;
  }
}

/** What the registry does for the stored schedules: its jobs, the schedulers made for them, and its phase. */
export interface StoredJobsHost {
  /** A scheduler of a job of this application, as `add()` makes them. */
  schedulerOf(options: PeriodicSchedulerOptions, where: string, method?: HandlerPlace): PeriodicScheduler;
  /** Registers a job; `start`: it starts (else it stays idle: this replica cannot run it). */
  adopt(scheduler: PeriodicScheduler, start?: boolean): void;
  /** Forgets a job whose scheduler has stopped. */
  unregister(scheduler: PeriodicScheduler): void;
  /** The job named so, if there is one. */
  find(name: string): PeriodicScheduler | undefined;
  /** Where a job that is not a stored schedule comes from, for messages. */
  placeOf(name: string): unknown;
  readonly closing: boolean;
}

/**
 * A stored schedule as this replica has it: its job, and what it applied of the store's record (its definition
 * aside: the job holds its options and data).
 */
interface StoredJob {
  scheduler: PeriodicScheduler;
  handler: string;
  version: number;
  /** The store's count of changes when the schedule last changed: an older record of it is not applied. */
  change: number;
  updatedAt: number;
  updatedBy: string | null;
  /**
   * Its options as JSON text, which tells a change of its timing from one of its data only: a record with other
   * options makes a new job, one with other data only does not. Empty when this replica cannot run it (it lacks
   * the handler): any change of such a job makes a new one.
   */
  options: string;
  /** A change (or its removal) under way, if there is one. */
  changing: Changing | undefined;
}

/** A change of a stored schedule that waits for the job's runs to end before it takes effect. */
interface Changing {
  /** Its runs ending. */
  settling: Promise<void>;
  /** The latest change that came meanwhile, applied once it has settled (null: removed). */
  next: PeriodicStoredRecord | null;
}

/**
 * A stored schedule's options as JSON text, as a string of its own: JSON.stringify answers a string made of
 * pieces, which would keep the pieces and a header for each job.
 */
function optionsText(read: { options: Record<string, unknown> }): string {
  return Buffer.from(JSON.stringify(read.options)).toString();
}

/** The job of a stored schedule whose handler this replica lacks: it never runs here (it takes no lease). */
const noHandler = () => undefined;

/** The most schedules one `list()` reads. */
const LIST_MAX = 1000;

/**
 * The stored schedules of the application (`registry.schedules`, docs/schedules.md): schedules kept as data in
 * the coordinator's store, created, edited and removed at run time by any replica, and each an exclusive job of
 * the fleet, run by the `@PeriodicHandler()` it names. Every replica reads every change (`StoredFeed`) and
 * keeps a job for each schedule: one it can run competes for the lease; one whose handler it lacks stays idle,
 * and shows in `fleetStatus` as `handlerMissing` when no live replica can run it.
 */
export class PeriodicSchedules {
  /** The handlers found at bootstrap, by name. */
  readonly #handlers = new Map<string, HandlerPlace>();
  readonly #jobs = new Map<string, StoredJob>();
  #feed: StoredFeed | undefined;
  /** The handlers of stored schedules that this replica lacks, each name once. */
  readonly #otherHandlers = new Map<string, string>();
  /** The handlers this replica lacks that it has said so of, once each. */
  readonly #told = new Set<string>();
  /** `handlerMissing` of each handler, for the live members as a heartbeat found them (null: one has it). */
  #missing: { of: readonly PeriodicFleetMember[]; handlers: Map<string, string[] | null> } | undefined;
  readonly #logger = new Logger(LOGGER_CONTEXT);

  constructor(
    private readonly host: StoredJobsHost,
    private readonly settings: ModuleSettings,
    private readonly events: PeriodicEvents,
  ) {}

  /**
   * Creates or updates a stored schedule for the whole fleet, checked as the decorator's options are before
   * anything is stored; resolves once this replica has it. `ifVersion` refuses a change made since
   * (`PeriodicConflictError`).
   */
  async upsert<TData = unknown>(
    definition: PeriodicScheduleDefinition<TData>,
    options?: PeriodicScheduleChangeOptions,
  ): Promise<PeriodicStoredSchedule<TData>> {
    const where = 'PeriodicRegistry.schedules.upsert()';
    const replica = this.#replica(where);
    const checked = this.#checked(where, definition);
    try {
      const { by, ifVersion } = changeOptions(scheduleWhere(where, checked.name), options, true);
      const [answer] = await replica.calls.writeStored(
        [{ ...checked.write, ...(ifVersion === undefined ? {} : { ifVersion }) }],
        this.#asked(replica, by),
        this.#keep,
      );
      const record = this.#written(where, checked.name, ifVersion, answer!);
      await this.#applied();
      return readDefinition(record).schedule() as PeriodicStoredSchedule<TData>;
    } finally {
      checked.release();
    }
  }

  /** Creates or updates many stored schedules in one step of the store; each is checked before any is stored. */
  async upsertMany(
    definitions: readonly PeriodicScheduleDefinition[],
    options?: Pick<PeriodicScheduleChangeOptions, 'by'>,
  ): Promise<PeriodicStoredSchedule[]> {
    const where = 'PeriodicRegistry.schedules.upsertMany()';
    const replica = this.#replica(where);
    if (!Array.isArray(definitions)) {
      throw new PeriodicConfigError(
        `${where}: the schedules must be an array, got ${describeValue(definitions)}`,
      );
    }
    const { by } = changeOptions(where, options, false);
    const names = new Set<string>();
    const checked: CheckedDefinition[] = [];
    try {
      definitions.forEach((definition, i) => {
        const one = this.#checked(`${where}: [${i}]`, definition);
        checked.push(one);
        if (names.has(one.name)) {
          throw new PeriodicConfigError(
            `${where}: [${i}] names "${one.name}" again; each schedule of a batch must have a name of its own`,
          );
        }
        names.add(one.name);
      });
      if (checked.length === 0) return [];
      const answers = await replica.calls.writeStored(
        checked.map((one) => one.write),
        this.#asked(replica, by),
        this.#keep,
      );
      const records = answers.map((answer, i) => this.#written(where, checked[i]!.name, undefined, answer));
      await this.#applied();
      return records.map((record) => readDefinition(record).schedule());
    } finally {
      for (const one of checked) one.release();
    }
  }

  /** The stored schedule `name` as the store has it, or null. */
  async get<TData = unknown>(name: string): Promise<PeriodicStoredSchedule<TData> | null> {
    const where = 'PeriodicRegistry.schedules.get()';
    const replica = this.#replica(where);
    if (typeof name !== 'string') {
      throw new PeriodicConfigError(`${where}: the name must be a string, got ${describeValue(name)}`);
    }
    const record = await replica.calls.readStored(name);
    return record === null ? null : (readDefinition(record).schedule() as PeriodicStoredSchedule<TData>);
  }

  /** A page of the stored schedules in the order of their names; `cursor` of the answer reads the next. */
  async list<TData = unknown>(query?: PeriodicScheduleQuery): Promise<PeriodicScheduleList<TData>> {
    const where = 'PeriodicRegistry.schedules.list()';
    const replica = this.#replica(where);
    // Names have no control character: a query with one matches none (and PostgreSQL refuses a NUL).
    const text = {
      accepts: (value: unknown) => typeof value === 'string' && !CONTROL.test(value),
      expected: 'a string without control characters (no name has one)',
    };
    const given = checkedOptions(
      where,
      query ?? {},
      {
        handler: text,
        prefix: text,
        cursor: text,
        limit: {
          accepts: (value) =>
            Number.isSafeInteger(value) && (value as number) >= 1 && (value as number) <= LIST_MAX,
          expected: `an integer from 1 to ${LIST_MAX}`,
        },
      },
      "{ handler: 'tenant-report', limit: 100 }",
    ) as PeriodicScheduleQuery;
    const limit = given.limit ?? 100;
    const records = await replica.calls.listStored({
      ...(given.handler === undefined ? {} : { handler: given.handler }),
      ...(given.prefix === undefined ? {} : { prefix: given.prefix }),
      ...(given.cursor === undefined ? {} : { after: given.cursor }),
      limit: limit + 1,
    });
    const items = records.slice(0, limit).map((record) => readDefinition(record).schedule());
    return {
      items: items as PeriodicStoredSchedule<TData>[],
      cursor: records.length > limit ? items.at(-1)!.name : null,
    };
  }

  /**
   * Removes a stored schedule for the whole fleet: resolves true when it was there, once its run here is drained
   * like `registry.remove`'s (the replica that holds it drains its own when it learns of the removal), false when
   * it was not.
   */
  async remove(name: string, options?: PeriodicScheduleChangeOptions): Promise<boolean> {
    const where = 'PeriodicRegistry.schedules.remove()';
    const replica = this.#replica(where);
    if (typeof name !== 'string') {
      throw new PeriodicConfigError(`${where}: the name must be a string, got ${describeValue(name)}`);
    }
    const { by, ifVersion } = changeOptions(scheduleWhere(where, name), options, true);
    const asked = this.#asked(replica, by);
    const answer = await replica.calls.removeStored(name, ifVersion, asked, this.#keep);
    if (!answer.ok) throw conflict(where, name, ifVersion, answer.currentVersion);
    if (answer.removed !== true) return false;
    this.#operated(name, { action: 'remove', ...asked });
    await this.#applied();
    await this.#jobs.get(name)?.changing?.settling;
    return true;
  }

  /**
   * @internal The history of a stored schedule removed since (its latest `audit` entry is its removal), which the
   * store keeps for `history.keep` runs; undefined when `name` is no such schedule.
   */
  async removedHistory(
    name: string,
    query: { limit?: number; before?: Date } | undefined,
  ): Promise<PeriodicRunRecord[] | undefined> {
    const calls = await this.#removed(name);
    if (calls === undefined || !calls.recorded) return undefined;
    const { limit, before } = historyQuery(name, query, this.#keep);
    if (this.settings.options.history === false) return [];
    return (await storeRead(name, 'history', calls.readHistory(name, limit, before, this.#keep))).map(
      runRecord,
    );
  }

  /** @internal The audit trail of a stored schedule removed since; undefined when `name` is no such schedule. */
  async removedAudit(
    name: string,
    options: { limit?: number } | undefined,
  ): Promise<PeriodicAuditEntry[] | undefined> {
    const calls = await this.#removed(name);
    if (calls === undefined) return undefined;
    const limit = auditLimit(name, options, this.#keep);
    return (await storeRead(name, 'audit', calls.readAudit(name, limit))).map((entry) =>
      auditEntry(name, entry),
    );
  }

  /** The store's calls, when `name` was a stored schedule and its latest audit entry is its removal. */
  async #removed(name: string): Promise<StoreCalls | undefined> {
    const calls = this.settings.replica?.calls;
    if (this.#feed === undefined || calls === undefined || !calls.operated || typeof name !== 'string') {
      return undefined;
    }
    const [latest] = await storeRead(name, 'audit', calls.readAudit(name, 1));
    return latest?.action === 'remove' ? calls : undefined;
  }

  // ---- What the module does with it ----

  /** @internal A `@PeriodicHandler()` method found at bootstrap; a name given twice is refused. */
  handle(place: HandlerPlace): void {
    const found = this.#handlers.get(place.handler);
    if (found !== undefined && (found.target !== place.target || found.key !== place.key)) {
      throw new PeriodicConfigError(
        `two handlers are named "${place.handler}": ${found} and ${place}; handler names must be unique in ` +
          'the application: give one of them another name',
      );
    }
    this.#handlers.set(place.handler, place);
  }

  /** @internal The jobs of stored schedules whose handler is tied to `instance`: drained before it is destroyed. */
  tiedTo(instance: object): PeriodicScheduler[] {
    const tied = new Set(
      [...this.#handlers.values()].filter((place) => place.ties.has(instance)).map((place) => place.handler),
    );
    if (tied.size === 0) return [];
    const jobs: PeriodicScheduler[] = [];
    for (const job of this.#jobs.values()) {
      if (tied.has(job.handler)) jobs.push(job.scheduler);
    }
    return jobs;
  }

  /** @internal Whether the job is a stored schedule. */
  has(name: string): boolean {
    return this.#jobs.has(name);
  }

  /** @internal The handler of stored schedule `name`; undefined for other jobs. */
  handlerOf(name: string): string | undefined {
    return this.#jobs.get(name)?.handler;
  }

  /** @internal A stored schedule's handler and version, as this replica last applied it; undefined for other jobs. */
  storedOf(
    name: string,
  ): { handler: string; version: number; updatedAt: Date; updatedBy: string | null } | undefined {
    const job = this.#jobs.get(name);
    if (job === undefined) return undefined;
    const { handler, version, updatedAt, updatedBy } = job;
    return { handler, version, updatedAt: new Date(updatedAt), updatedBy };
  }

  /** @internal The handlers of this application, by name. */
  get handlerNames(): string[] {
    return [...this.#handlers.keys()].sort();
  }

  /**
   * @internal The application has bootstrapped: with a coordinator that stores schedules, this replica joins the
   * fleet with its handlers and reads every stored schedule.
   */
  start(): void {
    // An application without handlers runs no stored schedule, and reads none.
    if (this.#handlers.size === 0) return;
    const replica = this.settings.replica;
    if (replica === undefined || !replica.calls.stores) {
      this.#logger.warn(
        `@PeriodicHandler() methods (${[...this.#handlers.keys()].map((name) => JSON.stringify(name)).join(', ')}) ` +
          'run stored schedules, which need a coordinator that stores them (InMemoryCoordinator, ' +
          'RedisCoordinator, PostgresCoordinator): no stored schedule runs here',
      );
      return;
    }
    replica.handlers = [...this.#handlers.keys()].sort();
    const feed = new StoredFeed(
      replica.calls,
      (changes, gone) => this.#apply(changes, gone),
      () => [...this.#jobs.keys()],
    );
    this.#feed = feed;
    replica.onStoredCount = (count, sent) => feed.heard(count, sent);
    replica.stay();
    void feed.start();
  }

  /** @internal The application closes: no change is read any more, and the replica may leave the fleet. */
  async close(): Promise<void> {
    this.#feed?.stop();
    this.#feed = undefined;
    await this.settings.replica?.go();
  }

  /**
   * @internal The replicas of the fleet that cannot run stored schedule `name`, when none of those alive can:
   * its `handlerMissing`; undefined when one can, or the job is no stored schedule.
   */
  handlerMissing(name: string): string[] | undefined {
    const job = this.#jobs.get(name);
    const replica = this.settings.replica;
    if (job === undefined || replica === undefined) return undefined;
    const members = replica.fleetMembers;
    if (members.length === 0) return undefined;
    // Worked out once per handler for the members a heartbeat found: fleetStatusAll asks it of every job.
    if (this.#missing?.of !== members) this.#missing = { of: members, handlers: new Map() };
    const { handlers } = this.#missing;
    let missing = handlers.get(job.handler);
    if (missing === undefined) {
      missing = members.some((member) => member.handlers?.includes(job.handler) === true)
        ? null
        : [...new Set(members.map((member) => member.replica))].sort();
      handlers.set(job.handler, missing);
    }
    return missing?.slice();
  }

  // ---- Applying the store's changes ----

  /**
   * Applies a page of changes. A new schedule, or one whose data only changed, is applied at once; one whose
   * timing, handler or options changed, or that was removed, first lets its run in flight end (retired or
   * drained), then the latest change that came meanwhile is applied.
   */
  #apply({ records, removed }: PeriodicStoredChanges, gone: string[]): void {
    for (const record of records) this.#change(record.name, record);
    for (const name of [...removed, ...gone]) this.#change(name, null);
  }

  /** Schedule `name` is now `record` (null: removed). */
  #change(name: string, record: PeriodicStoredRecord | null): void {
    if (this.host.closing) return;
    const job = this.#jobs.get(name);
    if (job === undefined) {
      if (record !== null) this.#make(record);
      return;
    }
    if (job.changing !== undefined) {
      job.changing.next = record;
      return;
    }
    if (record !== null) {
      if (job.change >= record.change) return;
      const read = readDefinition(record);
      if (job.options !== '' && job.handler === record.handler && job.options === optionsText(read)) {
        // Only the data changed: the job keeps its scheduler and its grid; the next run takes the new data.
        job.scheduler.data = frozenData(read.data);
        const { version, change, updatedAt, updatedBy } = record;
        Object.assign(job, { version, change, updatedAt, updatedBy });
        return;
      }
    }
    // Removed, or its timing, handler or options changed: its runs end with the definition they started with
    // (drained as `registry.remove` does, or let end by themselves), then the job of the new one takes over (a
    // new timing starts a new grid, docs/schedules.md).
    const changing: Changing = {
      settling: (record === null ? job.scheduler.stop() : job.scheduler.retire()).then(() => {
        this.host.unregister(job.scheduler);
        this.#jobs.delete(name);
        if (changing.next !== null) this.#change(name, changing.next);
      }),
      next: record,
    };
    job.changing = changing;
  }

  /**
   * A job for a stored schedule: one that competes for the lease, or, without its handler here, one that stays
   * idle (its status and fleet status are read here all the same). A definition this version cannot read (the
   * options of a newer version) is not run here; it is said once.
   */
  #make(record: PeriodicStoredRecord): void {
    const taken = this.host.find(record.name);
    if (taken !== undefined) {
      this.#cannotRun(
        record,
        `${String(this.host.placeOf(record.name))} has the same name here; rename one of them`,
      );
      return;
    }
    const read = readDefinition(record);
    const place = this.#handlers.get(record.handler);
    const where = `stored schedule ${JSON.stringify(record.name)} (handler ${JSON.stringify(record.handler)})`;
    const options = jobOptionsOf(read.options, {
      name: record.name,
      exclusive: true,
      run: place?.run ?? noHandler,
    });
    let scheduler: PeriodicScheduler;
    try {
      scheduler = this.host.schedulerOf(options as unknown as PeriodicSchedulerOptions, where, place);
    } catch (error) {
      this.#cannotRun(record, `its definition is not one this version can run: ${(error as Error).message}`);
      return;
    }
    scheduler.data = frozenData(read.data);
    // Its timing starts a new grid from the edit, if the store keeps another (docs/schedules.md).
    scheduler.changedAt = record.updatedAt;
    // Created again after a removal: the slots of the grid the store kept from before do not run.
    scheduler.createdAt = record.createdAt;
    const { version, change, updatedAt, updatedBy } = record;
    this.#jobs.set(record.name, {
      scheduler,
      // The handler's own name: the record's may be a slice of the store's whole reply, which it would keep.
      handler: place?.handler ?? this.#handlerName(record.handler),
      version,
      change,
      updatedAt,
      updatedBy,
      options: place === undefined ? '' : optionsText(read),
      changing: undefined,
    });
    this.host.adopt(scheduler, place !== undefined);
    if (place === undefined) {
      this.#cannotRun(record, `this replica has no @PeriodicHandler(${JSON.stringify(record.handler)})`);
    }
  }

  /** One string for each handler this replica lacks, whose schedules it keeps all the same. */
  #handlerName(handler: string): string {
    let name = this.#otherHandlers.get(handler);
    if (name === undefined) {
      name = Buffer.from(handler).toString();
      this.#otherHandlers.set(name, name);
    }
    return name;
  }

  /** Says once per handler and reason that this replica does not run some stored schedules. */
  #cannotRun(record: PeriodicStoredRecord, why: string): void {
    const key = `${record.handler}\n${why}`;
    if (this.#told.has(key)) return;
    this.#told.add(key);
    this.#logger.warn(
      `replica ${this.settings.replica?.name ?? ''} does not run stored schedule "${record.name}" (nor others ` +
        `for the same reason): ${why}; it never takes its lease here, and a replica that can runs it`,
    );
  }

  // ---- Helpers ----

  #replica(where: string): Replica {
    const replica = this.settings.replica;
    if (replica === undefined || !replica.calls.stores) {
      throw new PeriodicConfigError(
        `${where}: stored schedules need a coordinator that stores them, given to PeriodicModule.forRoot({ ` +
          'coordinator }): InMemoryCoordinator, RedisCoordinator or PostgresCoordinator' +
          (replica === undefined ? '' : ' (this one has no writeStored(), readStoredChanges() …)'),
      );
    }
    if (this.host.closing) {
      throw new PeriodicConfigError(
        `${where}: the application is closing; no schedule can be changed any more`,
      );
    }
    return replica;
  }

  /** A definition checked: its options, and that this replica can run it and no other job has its name. */
  #checked(where: string, definition: unknown): CheckedDefinition {
    const checked = checkDefinition(where, definition);
    try {
      this.#refuse(where, checked);
    } catch (error) {
      checked.release();
      throw error;
    }
    return checked;
  }

  /** Refuses a definition this replica cannot take: an unknown handler, a name taken, a delivery it cannot keep. */
  #refuse(where: string, checked: CheckedDefinition): void {
    const here = scheduleWhere(where, checked.name);
    if (!this.#handlers.has(checked.handler)) {
      const names = [...this.#handlers.keys()];
      const hint = nearest(checked.handler, names);
      throw new PeriodicConfigError(
        `${here}: no @PeriodicHandler(${JSON.stringify(checked.handler)}) is in this application` +
          `${hint === undefined ? '.' : `; did you mean "${hint}"?`} The handlers are: ` +
          `${names.length === 0 ? '(none)' : names.map((name) => JSON.stringify(name)).join(', ')}.`,
      );
    }
    const taken = this.host.find(checked.name);
    if (taken !== undefined && !this.#jobs.has(checked.name)) {
      throw new PeriodicConfigError(
        `${here}: the name is taken by ${String(this.host.placeOf(checked.name))}; give the schedule another name`,
      );
    }
    if (checked.options.delivery === 'atLeastOnce' && this.settings.options.history === false) {
      throw new PeriodicConfigError(
        `${here}: "delivery" 'atLeastOnce' needs the fleet's run history, which is off (history: false); turn it on`,
      );
    }
  }

  /** Who asks, from where and when, as the audit trail keeps it. */
  #asked(replica: Replica, by: string | null): Omit<PeriodicOperation, 'action'> {
    return { by, note: null, replica: replica.name, at: Date.now() };
  }

  /** The record a write answered, or the conflict it met; the change is emitted as `operated`. */
  #written(
    where: string,
    name: string,
    ifVersion: number | undefined,
    answer: PeriodicStoredAnswer,
  ): PeriodicStoredRecord {
    if (!answer.ok) throw conflict(where, name, ifVersion, answer.currentVersion);
    const record = answer.record!;
    this.#operated(name, {
      action: answer.created === true ? 'create' : 'update',
      by: record.updatedBy,
      note: null,
      replica: this.settings.replica!.name,
      at: record.updatedAt,
    });
    return record;
  }

  #operated(name: string, asked: PeriodicOperation): void {
    this.events.emit(operatedEvent(name, asked));
  }

  /** Waits until this replica has applied the changes the store has now, its own included. */
  async #applied(): Promise<void> {
    await this.#feed?.read();
  }

  get #keep(): number {
    return keptBy(this.settings.options.history);
  }
}

/** The `by` and `ifVersion` of a change, checked. */
function changeOptions(
  where: string,
  options: PeriodicScheduleChangeOptions | undefined,
  versioned: boolean,
): { by: string | null; ifVersion: number | undefined } {
  const given = checkedOptions(
    where,
    options ?? {},
    versioned ? { by: OPERATION_RULES.by, ifVersion: VERSION } : { by: OPERATION_RULES.by },
    versioned ? "{ by: 'alice', ifVersion: 3 }" : "{ by: 'alice' }",
  );
  const { by = null, ifVersion } = given as { by?: string; ifVersion?: number };
  return { by, ifVersion };
}

/** The rule of `ifVersion`. */
const VERSION: OptionRule = {
  accepts: (value) => Number.isSafeInteger(value) && (value as number) >= 0,
  expected: 'the version read (an integer ≥ 0; 0: the schedule must not exist yet)',
};

function conflict(
  where: string,
  name: string,
  ifVersion: number | undefined,
  current: number | null,
): PeriodicConflictError {
  const now =
    current === null
      ? 'it does not exist (it was removed, or never created)'
      : `it is at version ${current}: someone changed it since it was read`;
  return new PeriodicConflictError(
    `${scheduleWhere(where, name)}: version ${ifVersion} was expected (ifVersion), but ${now}; read it again, ` +
      'and apply the change to what it is now',
    current,
  );
}
