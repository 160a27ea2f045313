// Stored schedules (docs/schedules.md): schedules kept as data in the coordinator's store, created, edited and
// removed at run time. Here, what a definition may hold and how it is checked and written, and the feed that
// brings every change of the store to a replica.
import type { PeriodicStoredChanges, PeriodicStoredRecord, PeriodicStoredWrite } from './coordinator-port.js';
import { DeadlineTimer, now } from './deadline-timer.js';
import { describeValue, messageOf, oneLine, PeriodicConfigError } from './errors.js';
import {
  checkOption,
  JOB_OPTION_NAMES,
  jobOptionsOf,
  type PeriodicOptions,
  type PeriodicSchedulerOptions,
  resolveOptions,
} from './options.js';
import { invalid, NAME_RULE, readOptions } from './rules.js';
import type { StoreCalls } from './store-calls.js';

/**
 * The options a stored schedule may have: a job's, but its name (given apart) and its guard (a function); its
 * `exclude` is a list (not a function), and its instants are read back as ISO 8601 text.
 */
export type PeriodicStoredOptions = Omit<PeriodicOptions, 'name' | 'when'>;

/** What a stored schedule is made of: its name, the handler that runs it, its data, and a job's options. */
export interface PeriodicScheduleDefinition<TData = unknown> extends PeriodicStoredOptions {
  /** Unique among the application's jobs, decorated or stored; the rules of a job's name. */
  name: string;
  /** The `@PeriodicHandler()` that runs it. */
  handler: string;
  /** What its runs get as `ctx.data`: a JSON value of at most 16 kB. */
  data?: TData;
}

/** A stored schedule as the store keeps it: its definition, and what the store counts of it. */
export interface PeriodicStoredSchedule<TData = unknown> extends PeriodicScheduleDefinition<TData> {
  /** 1 when created, one more with each update: what `ifVersion` compares. */
  version: number;
  createdAt: Date;
  updatedAt: Date;
  /** Who made the last change (`by`); null when not named. */
  updatedBy: string | null;
}

/** Who changes a stored schedule, and on which version of it. */
export interface PeriodicScheduleChangeOptions {
  /** Who asks, as the audit trail names them. */
  by?: string;
  /** Refuses the change (`PeriodicConflictError`) unless the schedule is at this version now (0: does not exist). */
  ifVersion?: number;
}

/** Which stored schedules `list` reads: a page of them in the order of their names. */
export interface PeriodicScheduleQuery {
  /** Only the schedules of this handler. */
  handler?: string;
  /** Only the schedules whose names start with this. */
  prefix?: string;
  /** 1 to 1000. @default 100 */
  limit?: number;
  /** Where the page starts: the `cursor` of the page before. */
  cursor?: string;
}

/** A page of stored schedules, and where the next starts (null: none). */
export interface PeriodicScheduleList<TData = unknown> {
  items: PeriodicStoredSchedule<TData>[];
  cursor: string | null;
}

/** The most a schedule's data may weigh, as JSON text in UTF-8. */
const DATA_MAX_BYTES = 16 * 1024;

/** The format of a stored definition: a replica reads the formats up to its own, and those above leniently. */
const FORMAT = 1;

/** The options a stored schedule may have, in the table's order. */
const STORED_OPTION_NAMES = JOB_OPTION_NAMES.filter((key) => key !== 'name' && key !== 'when');

/** What a definition has besides a job's options. */
const DEFINITION_NAMES = ['name', 'handler', 'data', ...STORED_OPTION_NAMES];

/** What the store counts of a schedule, which a schedule read back has and a write leaves out. */
const STORE_FIELDS = ['version', 'createdAt', 'updatedAt', 'updatedBy'] as const;

/** The options of a definition that may be `Infinity`, which JSON cannot hold: written as the string 'Infinity'. */
const UNBOUNDED = new Set(['timeout', 'jobShutdown']);

const EXAMPLE =
  "{ name: 'report:acme', handler: 'tenant-report', cron: '0 8 * * 1-5', data: { tenantId: 'acme' } }";

/** A definition checked, as it is written to the store and run. */
export interface CheckedDefinition {
  name: string;
  handler: string;
  data: unknown;
  /** The job's options, checked, as given (no defaults). */
  options: PeriodicStoredOptions;
  /** What the store keeps of it. */
  write: PeriodicStoredWrite;
  /** Lets go of what the check made (a cron's calendar), once the job made of it has it too. */
  release(): void;
}

/**
 * `input` checked as the definition of a stored schedule, as the decorator's options are checked, and made into
 * what the store keeps: a {@link PeriodicConfigError} naming the schedule, the option and the value when it is not
 * one. `where` names the call, as `registry.schedules.upsert()`.
 */
export function checkDefinition(where: string, input: unknown): CheckedDefinition {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new PeriodicConfigError(
      `${where}: a schedule must be an object such as ${EXAMPLE}, got ${describeValue(input)}`,
    );
  }
  const here = scheduleWhere(where, (input as { name?: unknown }).name);
  if ('when' in input) {
    throw new PeriodicConfigError(
      `${here}: "when" cannot be stored: a guard is a function; check in the handler instead, and return early`,
    );
  }
  // A schedule read back (get, list) may be written again as it is: what the store counts of it is its own.
  const definitionOnly = Object.create(null) as Record<string, unknown>;
  try {
    for (const key in input) {
      if (!(STORE_FIELDS as readonly string[]).includes(key))
        definitionOnly[key] = (input as Record<string, unknown>)[key];
    }
  } catch (error) {
    throw new PeriodicConfigError(
      `${here}: reading the schedule threw: ${messageOf(error)}; pass plain values (a getter that throws cannot ` +
        'be read)',
      { cause: error },
    );
  }
  const given = readOptions(here, definitionOnly, DEFINITION_NAMES, EXAMPLE);
  const { name, handler, data, ...options } = given;
  if (typeof (options.checkIn as { send?: unknown } | undefined)?.send === 'function') {
    throw new PeriodicConfigError(
      `${here}: "checkIn" cannot be stored with a send function; give its monitor's address, { url }, or set ` +
        "the module's checkIns: { send } for every job",
    );
  }
  if (typeof options.exclude === 'function') {
    throw new PeriodicConfigError(
      `${here}: "exclude" cannot be stored as a function; list the days ('2026-12-25') and ranges ` +
        "({ from: '2026-12-31', to: '2027-01-02' }) instead",
    );
  }
  checkOption(here, 'name', name);
  if (handler === undefined) {
    throw new PeriodicConfigError(
      `${here}: "handler" is required: the name of the @PeriodicHandler() that runs the schedule, such as ` +
        "{ handler: 'tenant-report' }",
    );
  }
  if (!NAME_RULE.accepts(handler)) {
    throw invalid(here, 'handler', handler, NAME_RULE);
  }
  if (options.exclusive !== undefined && options.exclusive !== true) {
    throw new PeriodicConfigError(
      `${here}: "exclusive" must be true or left out, got ${describeValue(options.exclusive)}: a stored schedule ` +
        'runs once for the fleet; for a job every process runs, use registry.add()',
    );
  }
  const encodedData = data === undefined ? undefined : dataText(here, data);
  // The engine's own check, the combinations included (a retry longer than the cron's gap, say). Its calendar is
  // kept until the caller releases it: the job made of the definition takes it from the cache.
  const job = jobOptionsOf(options, { exclusive: false, name, run: () => undefined });
  const { calendar } = resolveOptions(job as unknown as PeriodicSchedulerOptions, here);
  const definition = JSON.stringify(
    { v: FORMAT, options, ...(encodedData === undefined ? {} : { data }) },
    (key, value: unknown) => (value === Infinity && UNBOUNDED.has(key) ? 'Infinity' : value),
  );
  return {
    name: name as string,
    handler: handler as string,
    data,
    options: options as PeriodicStoredOptions,
    write: { name: name as string, handler: handler as string, definition },
    release: () => calendar?.release(),
  };
}

/** How messages name a call on schedule `name`: `registry.schedules.upsert() of schedule "report:acme"`. */
export function scheduleWhere(where: string, name: unknown): string {
  return typeof name === 'string' ? `${where} of schedule "${oneLine(name).replaceAll('"', '\\"')}"` : where;
}

/** `data` as JSON text: a {@link PeriodicConfigError} unless it is a JSON value of at most 16 kB. */
function dataText(where: string, data: unknown): string {
  const problem = jsonProblem(data, 'data', []);
  if (problem !== undefined) {
    throw new PeriodicConfigError(
      `${where}: "data" must be a JSON value (objects, arrays, strings, finite numbers, booleans, null), but ` +
        `${problem}; give plain data, such as { tenantId: 'acme' }`,
    );
  }
  const text = JSON.stringify(data);
  const bytes = Buffer.byteLength(text);
  if (bytes > DATA_MAX_BYTES) {
    throw new PeriodicConfigError(
      `${where}: "data" is ${bytes} bytes as JSON, more than ${DATA_MAX_BYTES} (16 kB); keep an id in it, and ` +
        'the rest where the handler can read it',
    );
  }
  return text;
}

/** What keeps `value` (at `path`, inside the objects `within`) from being JSON, or undefined when it is. */
function jsonProblem(value: unknown, path: string, within: object[]): string | undefined {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${path} is ${value}`;
  if (typeof value !== 'object') return `${path} is ${describeValue(value)}`;
  if (within.includes(value)) return `${path} refers back to an object that holds it (a circular reference)`;
  if (within.length >= 64) return `${path} is nested more than 64 levels deep`;
  const prototype = Object.getPrototypeOf(value) as unknown;
  if (!Array.isArray(value) && prototype !== Object.prototype && prototype !== null) {
    return `${path} is ${describeValue(value)}, an object of a class`;
  }
  const inside = [...within, value];
  if (Array.isArray(value)) {
    const hole = Array.from(value.keys()).find((i) => !(i in value));
    if (hole !== undefined) return `${path}[${hole}] is a hole of a sparse array`;
  }
  let entries: (readonly [string, unknown])[];
  try {
    entries = Array.isArray(value)
      ? value.map((item, i) => [`${path}[${i}]`, item] as const)
      : Object.entries(value).map(([key, item]) => [`${path}.${key}`, item] as const);
  } catch (error) {
    return `reading ${path} threw: ${messageOf(error)}`;
  }
  for (const [at, item] of entries) {
    const problem = jsonProblem(item, oneLine(at), inside);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** A stored record read back: its definition as it was written, and the options in it as a job takes them. */
interface ReadDefinition {
  /** The job's options, with `Infinity` back; they are checked again before they run. */
  options: Record<string, unknown>;
  /** Its data; undefined when it has none. */
  data: unknown;
  /** The stored schedule, as the API answers it. */
  schedule(): PeriodicStoredSchedule;
}

/**
 * A record of the store read back into a stored schedule. Leniently: a definition of a newer format is read as
 * far as it goes (its options are checked when this replica would run it); one that is not JSON has no options.
 */
export function readDefinition(record: PeriodicStoredRecord): ReadDefinition {
  let parsed: { options?: unknown; data?: unknown } = {};
  try {
    const value: unknown = JSON.parse(record.definition);
    if (typeof value === 'object' && value !== null) parsed = value;
  } catch {
    // Read as a definition without options: the replica refuses to run it, and says why.
  }
  const options =
    typeof parsed.options === 'object' && parsed.options !== null && !Array.isArray(parsed.options)
      ? (parsed.options as Record<string, unknown>)
      : {};
  // Infinity back where the options have it (JSON.parse with a reviver, called for every key, took 3 µs a
  // schedule, and turned the data's own 'Infinity' text into a number).
  for (const key of UNBOUNDED) if (options[key] === 'Infinity') options[key] = Infinity;
  const schedule = (): PeriodicStoredSchedule => ({
    name: record.name,
    handler: record.handler,
    ...options,
    ...('data' in parsed ? { data: parsed.data } : {}),
    version: record.version,
    createdAt: new Date(record.createdAt),
    updatedAt: new Date(record.updatedAt),
    updatedBy: record.updatedBy,
  });
  return { options, data: parsed.data, schedule };
}

/** How many changes one read of the feed asks for. */
const FEED_PAGE = 1000;

/**
 * The changes of the stored schedules, brought to one replica: all of them when it starts, then those after
 * the last it applied, whenever the store says there are some (the count of changes a heartbeat reads, or a
 * notification of the store) or the replica changed some itself. One read at a time; a read that fails is
 * reported by the calls and tried again at the next heartbeat. A store that counts fewer changes than were
 * applied, in a heartbeat sent after it answered the read of them, lost its data: everything is read again from
 * the first change, and what is no longer there is removed. (A heartbeat sent before may count as the store did
 * before a write the feed has read since: PostgreSQL answers a statement as the store was when it began.)
 */
export class StoredFeed {
  /** The count of changes applied. */
  #applied = 0;
  /** When the store answered the read of the changes applied last, on the `now()` timeline. */
  #readAt = 0;
  #reading: Promise<void> | undefined;
  #again = false;
  /** The store lost its data: the next read begins again from the first change. */
  #lost = false;
  /** Reading everything again: the names read, to remove the others once it is done. */
  #rereading: Set<string> | undefined;
  #unwatch: (() => void) | undefined;
  #stopped = false;
  /** A heartbeat that has not come: the feed asks the store itself, every heartbeat period. */
  readonly #quiet = new DeadlineTimer({ onDeadline: () => void this.read() });

  constructor(
    private readonly calls: StoreCalls,
    /** Applies a page of changes; `gone` after a reread: the schedules the store no longer has. */
    private readonly apply: (changes: PeriodicStoredChanges, gone: string[]) => Promise<void> | void,
    /** The names of the stored schedules the replica has now. */
    private readonly holding: () => string[],
  ) {}

  /** Reads every stored schedule, and from then on every change: resolves once the first read is applied. */
  start(): Promise<void> {
    this.#unwatch = this.calls.coordinator.watchStored?.(() => void this.read());
    return this.read();
  }

  stop(): void {
    this.#stopped = true;
    this.#unwatch?.();
    this.#quiet.cancel();
  }

  /** The store's count of changes, as a heartbeat sent at `sent` (on the `now()` timeline) read it. */
  heard(count: number, sent: number): void {
    // Fewer than applied: lost, unless the heartbeat went out before the store answered the read of those applied.
    if (count < this.#applied && sent > this.#readAt) this.#lost = true;
    if (count > this.#applied || this.#lost || this.#rereading !== undefined) void this.read();
    else this.#quiet.armAt(now() + this.calls.timing.heartbeatMs * 2);
  }

  /** Reads and applies the changes not applied yet; resolves once they are (or the read failed). */
  read(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    if (this.#reading !== undefined) {
      this.#again = true;
      return this.#reading;
    }
    this.#reading = this.#readAll().finally(() => {
      this.#reading = undefined;
      if (this.#again && !this.#stopped) {
        this.#again = false;
        void this.read();
      }
    });
    return this.#reading;
  }

  async #readAll(): Promise<void> {
    this.#quiet.armAt(now() + this.calls.timing.heartbeatMs * 2);
    try {
      for (;;) {
        if (this.#lost) {
          this.#lost = false;
          this.#applied = 0;
          this.#rereading = new Set();
        }
        // A loss heard while this page is read is read again after it, from the first change.
        const rereading = this.#rereading;
        const changes = await this.calls.readStoredChanges(this.#applied, FEED_PAGE);
        const answered = now();
        if (this.#stopped) return;
        for (const record of changes.records) rereading?.add(record.name);
        let gone: string[] = [];
        if (changes.complete && rereading !== undefined) {
          this.#rereading = undefined;
          gone = this.holding().filter((name) => !rereading.has(name));
        }
        await this.apply(changes, gone);
        this.#applied = changes.change;
        this.#readAt = answered;
        if (changes.complete && !this.#lost) return;
      }
    } catch {
      // Reported by the calls; the next heartbeat, or the feed's own timer, reads again.
    }
  }
}

/**
 * `data` frozen through and through, as a job's runs get it: a run cannot change what the runs after it get (and
 * the replicas cannot come to disagree on it). It is the replica's own copy, parsed from the store's record.
 */
export function frozenData<T>(data: T): T {
  if (typeof data === 'object' && data !== null && !Object.isFrozen(data)) {
    for (const value of Object.values(data)) frozenData(value);
    Object.freeze(data);
  }
  return data;
}
