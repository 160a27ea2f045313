// Incidents (docs/alerts.md): a job whose slots fail one after another, whose slot does not start, or whose run
// goes on far too long opens an incident, once for the fleet, and closes it when its slots run well again. An
// exclusive job's incidents are opened and closed in its coordinator's store, each in one step with its audit
// entry, so that of the replicas that notice, one says so; a job that is not exclusive keeps its own.
import type {
  PeriodicFleetRead,
  PeriodicIncidentKind,
  PeriodicIncidentRecord,
  PeriodicOperation,
} from './coordinator-port.js';
import { DeadlineTimer, now } from './deadline-timer.js';
import { messageOf } from './errors.js';
import { type PeriodicIncident, replicaOf } from './fleet-status.js';
import type { Replica } from './replica.js';
import { checkedOptions, CONTROL, type OptionRule } from './rules.js';
import type { StoreCalls } from './store-calls.js';

/** The module's `incidents`: when a job opens an incident, and when it closes. */
export interface PeriodicIncidentOptions {
  /** Slots in a row that failed after their retries before a `'failing'` incident. @default 3 */
  failedSlots?: number;
  /** How long after it was due a slot that has not started makes a `'late'` incident, in ms. @default 60_000 */
  lateAfter?: number;
  /** How long a run may go on before it makes a `'hung'` incident, in ms (it is not stopped). @default 3_600_000 */
  hungAfter?: number;
  /** Good slots in a row (ended normally) that close an open incident. @default 1 */
  recoverAfter?: number;
}

/** The incidents option checked, with its defaults; false: no job opens incidents. */
export type IncidentSettings = Readonly<Required<PeriodicIncidentOptions>> | false;

export const INCIDENT_DEFAULTS: Readonly<Required<PeriodicIncidentOptions>> = {
  failedSlots: 3,
  lateAfter: 60_000,
  hungAfter: 3_600_000,
  recoverAfter: 1,
};

/** The longest delay of Node's timers, about 24.8 days. */
const TIMER_MAX = 2_147_483_647;
const count = (what: string): OptionRule => ({
  accepts: (value) => typeof value === 'number' && Number.isSafeInteger(value) && value >= 1 && value <= 1000,
  expected: `an integer from 1 to 1000 (${what})`,
});
const span = (min: number, what: string): OptionRule => ({
  accepts: (value) =>
    typeof value === 'number' && Number.isSafeInteger(value) && value >= min && value <= TIMER_MAX,
  expected: `an integer number of milliseconds from ${min} to ${TIMER_MAX} (about 24 days): ${what}`,
});
const INCIDENT_RULES = {
  failedSlots: count('slots in a row that failed after their retries'),
  // A timer comes a few milliseconds late: below this, every tick of a busy process would be an incident.
  lateAfter: span(100, 'how long after its time a slot that has not started is late'),
  hungAfter: span(1, 'how long a run goes on before it is hung'),
  recoverAfter: count('good slots in a row that close an incident'),
} satisfies Record<keyof PeriodicIncidentOptions, OptionRule>;

/** The rule of the module's `incidents` option. */
export const INCIDENTS_RULE: OptionRule = {
  accepts: (value) =>
    typeof value === 'boolean' || (typeof value === 'object' && value !== null && !Array.isArray(value)),
  expected:
    'true (the defaults), false (none), or an object such as { failedSlots: 3, lateAfter: 60_000, hungAfter: ' +
    '3_600_000, recoverAfter: 1 }',
};

/** The `incidents` option checked, with its defaults. */
export function incidentSettings(
  where: string,
  given: PeriodicIncidentOptions | boolean | undefined,
): IncidentSettings {
  if (given === false) return false;
  if (given === true || given === undefined) return INCIDENT_DEFAULTS;
  const checked = checkedOptions(`${where}: "incidents"`, given, INCIDENT_RULES, '{ failedSlots: 3 }');
  return { ...INCIDENT_DEFAULTS, ...(checked as PeriodicIncidentOptions) };
}

/** The most open incidents of the fleet a replica reads and shows. */
const OPEN_MAX = 10_000;
/** How often a replica looks at the slots of the jobs it does not run, in ms. */
const WATCH_EVERY = 1000;
/** The most jobs one read of the store looks at. */
const WATCH_BATCH = 1000;
/** The most characters of an incident's detail. */
const DETAIL_MAX = 1000;

/** An incident open in the fleet, as this replica knows it. */
type Open = { since: number; detail: string };
type Watch = { slot: number; late: number };

/** What the fleet's watch of late slots asks of a job: its name, whether its slot is still to be looked at, and what the store said. */
export interface LateWatched {
  readonly name: string;
  /** Whether the slot may still be late: the job is due to run it, and this replica did not claim it. */
  lateUnseen(slot: number): boolean;
  /** What the store answered of the job (undefined: it did not answer, with `error`), `lateAfter` after `slot`. */
  lateRead(slot: number, read: PeriodicFleetRead | undefined, error: unknown): void;
}

/**
 * The fleet's incidents as one replica knows them: those open in the store, read again with each of its
 * heartbeats (and changed by its own steps in between); and its watch of the slots of its exclusive jobs, which
 * it reads from the store `lateAfter` after they were due when it did not run them itself, so that a slot no
 * replica started is noticed though its holder died with the lease, or the store is down.
 */
export class FleetIncidents {
  readonly #open = new Map<string, Map<PeriodicIncidentKind, Open>>();
  #reading = false;
  /** The slot each watched job was due at, and when it is late (wall clock). */
  readonly #watched = new Map<LateWatched, Watch>();
  readonly #timer = new DeadlineTimer({ onDeadline: () => void this.#look() });

  constructor(readonly calls: StoreCalls) {}

  /** The incidents of job `name` open in the fleet, as this replica knows them. */
  openOf(name: string): ReadonlyMap<PeriodicIncidentKind, Open> | undefined {
    return this.#open.get(name);
  }

  /** Reads the fleet's open incidents again (after a heartbeat); one read at a time. */
  refresh(): void {
    if (this.#reading) return;
    this.#reading = true;
    this.calls
      .readIncidents(OPEN_MAX)
      .then(
        (incidents) => {
          this.#open.clear();
          for (const incident of incidents) this.#remember(incident);
        },
        () => undefined,
      )
      .finally(() => (this.#reading = false));
  }

  /** Opens an incident in the store: whether this replica opened it (false: it was open). */
  async open(incident: PeriodicIncidentRecord, operation: PeriodicOperation, keep: number): Promise<boolean> {
    const opened = await this.calls.openIncident(incident, operation, keep);
    if (opened) this.#remember(incident);
    return opened;
  }

  /** Closes an incident in the store: the one closed, or null when it was not open. */
  async close(
    name: string,
    kind: PeriodicIncidentKind,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<PeriodicIncidentRecord | null> {
    const closed = await this.calls.closeIncident(name, kind, operation, keep);
    const open = this.#open.get(name);
    open?.delete(kind);
    if (open?.size === 0) this.#open.delete(name);
    return closed;
  }

  #remember({ name, kind, since, detail }: PeriodicIncidentRecord): void {
    let open = this.#open.get(name);
    if (open === undefined) this.#open.set(name, (open = new Map()));
    open.set(kind, { since, detail });
  }

  /** The job's slot came here: looked at `lateAfter` after it, unless an earlier one is. */
  watch(job: LateWatched, slot: number, lateAfter: number): void {
    if (this.#watched.has(job)) return;
    this.#watched.set(job, { slot, late: slot + lateAfter });
    if (!this.#timer.armed) this.#timer.armAt(now() + WATCH_EVERY);
  }

  /** The job stopped: its slots are not looked at; without any left, no timer waits (a closed application exits). */
  unwatch(job: LateWatched): void {
    this.#watched.delete(job);
    if (this.#watched.size === 0) this.#timer.cancel();
  }

  /** Looks at the slots watched that are `lateAfter` old: those this replica did not claim are read from the store. */
  async #look(): Promise<void> {
    const wallNow = Date.now();
    const due: [LateWatched, Watch][] = [];
    for (const [job, watch] of this.#watched) {
      if (watch.late > wallNow) continue;
      this.#watched.delete(job);
      if (job.lateUnseen(watch.slot)) due.push([job, watch]);
    }
    if (this.#watched.size > 0) this.#timer.armAt(now() + WATCH_EVERY);
    for (let i = 0; i < due.length; i += WATCH_BATCH) {
      const batch = due.slice(i, i + WATCH_BATCH);
      let reads: PeriodicFleetRead[] | undefined;
      let error: unknown;
      try {
        reads = await this.calls.readFleet(batch.map(([job]) => job.name));
      } catch (failure) {
        error = failure;
      }
      batch.forEach(([job, { slot }], j) => job.lateRead(slot, reads?.[j], error));
    }
  }
}

const NONE: ReadonlyMap<PeriodicIncidentKind, Open> = new Map();

/** The fleet's incidents as each replica knows them, made when one of its jobs first asks. */
const FLEETS = new WeakMap<Replica, FleetIncidents>();

/**
 * The fleet's incidents as `replica` knows them, read again after each of its heartbeats; undefined when its
 * coordinator cannot open them for the fleet (it lacks the incident steps, or the run history's).
 */
export function fleetIncidentsOf(replica: Replica | undefined): FleetIncidents | undefined {
  if (replica === undefined) return undefined;
  let fleet = FLEETS.get(replica);
  const { calls } = replica;
  if (fleet === undefined && calls.incidents && calls.recorded) {
    const made = new FleetIncidents(calls);
    FLEETS.set(replica, (fleet = made));
    replica.afterHeartbeat = () => made.refresh();
  }
  return fleet;
}

/** What a job's incidents ask of its scheduler. */
export interface IncidentJob {
  readonly name: string;
  /** The replica's name, as the audit trail says who opened an incident. */
  readonly replicaName: string;
  /** How many entries the job's audit trail keeps. */
  readonly auditKeep: number;
  /** The last run's error, or its exit reason, in words (as the module's `errors` allows). */
  lastError(): string;
  /** The oldest run in flight here: its jobId and when it started (wall clock, and on the `now()` timeline). */
  oldestRun(): { jobId: number; startedWall: number; startedAt: number } | undefined;
  /** Whether a slot of an exclusive job may still be late: the job is due to run it, and this replica did not claim it. */
  lateUnseen(slot: number): boolean;
  /** Whether this replica held the job's lease when its store stopped answering, or holds it still. */
  heldAtOutage(): boolean;
  /** When this replica's store last answered again after it did not (wall clock); 0 if it never stopped. */
  storeBackAt(): number;
  /** An incident opened or closed here, for a job whose audit trail is this process's: recorded in it. */
  recordHere(operation: PeriodicOperation): void;
  incidentOpened(incident: PeriodicIncidentRecord): void;
  incidentClosed(incident: PeriodicIncidentRecord, durationMs: number): void;
}

/**
 * One job's incidents: what opens them (its slots that fail, its slots that come late here or that no replica
 * started, its runs that go on), and the good slots that close them. Open where the job is the fleet's
 * (`fleet`), or in this process (a job that is not exclusive, or whose store could not be reached: then this
 * replica says so on its own).
 */
export class JobIncidents implements LateWatched {
  /** Incidents opened in this process. */
  #hereMade: Map<PeriodicIncidentKind, Open> | undefined;
  /** Kinds being opened or closed: one step at a time for each. */
  #askingMade: Set<PeriodicIncidentKind> | undefined;
  /** Whether the process's watch of runs in flight looks at this job's. */
  #watched = false;
  /** Slots in a row that failed after their retries, here and, for an exclusive job, before it came here. */
  #failures = 0;
  /** The slots (wall clock) of the good slots in a row under way, the latest `recoverAfter` of them, oldest first. */
  #goods: number[] = [];
  /** The slots that ended here since this replica took the lease: failed ones, and whether a good one did. */
  #failedHere = 0;
  #goodHere = false;

  constructor(
    private readonly job: IncidentJob,
    readonly settings: Readonly<Required<PeriodicIncidentOptions>>,
    readonly fleet: FleetIncidents | undefined,
  ) {}

  get name(): string {
    return this.job.name;
  }

  /** The incidents opened in this process (most jobs never have one: the map is made with the first). */
  get #here(): ReadonlyMap<PeriodicIncidentKind, Open> {
    return this.#hereMade ?? NONE;
  }

  /** Whether an incident of `kind` is being opened or closed. */
  #asking(kind: PeriodicIncidentKind): boolean {
    return this.#askingMade?.has(kind) === true;
  }

  lateUnseen(slot: number): boolean {
    return this.job.lateUnseen(slot);
  }

  /** The job's open incidents, oldest first: those of this process, and the fleet's as this replica knows them. */
  list(): PeriodicIncident[] {
    return incidentList(this.#open());
  }

  #open(): Map<PeriodicIncidentKind, Open> {
    const open = new Map(this.fleet?.openOf(this.job.name));
    for (const [kind, incident] of this.#here) open.set(kind, incident);
    return open;
  }

  /** This replica took the job's lease: the fleet's streak, read from its history (`seed`), is the one. */
  holding(): void {
    this.#failedHere = 0;
    this.#goodHere = false;
  }

  /**
   * What the fleet's history said, when this replica took the lease, of the job's last slots, wherever they ran:
   * `failures` in a row failed, or the good ones of `goods` (their slots, oldest first) ran last. The slots that
   * ended here since come after them.
   */
  seed(failures: number, goods: number[]): void {
    if (this.#goodHere) return;
    if (this.#failedHere > 0) {
      this.#failures = failures + this.#failedHere;
      if (this.#failures >= this.settings.failedSlots) this.#failing();
      return;
    }
    this.#failures = failures;
    this.#goods = goods.slice(-this.settings.recoverAfter);
  }

  /** The work of the job's slot `slot` (wall clock; a trigger's start) ended for good: its last attempt. */
  slotEnded(ok: boolean, slot: number): void {
    const goods = this.#goods;
    if (!ok) {
      this.#failedHere++;
      goods.length = 0;
      if (++this.#failures >= this.settings.failedSlots) this.#failing();
      return;
    }
    this.#goodHere = true;
    this.#failures = 0;
    // A job of this process alone with none open has nothing to close (an incident that opens counts the good
    // slots after it). An exclusive job keeps them: what this replica knows of the fleet's may be a heartbeat old.
    if (this.fleet === undefined && this.#here.size === 0) return;
    goods.push(slot);
    if (goods.length > this.settings.recoverAfter) goods.shift();
    if (goods.length === this.settings.recoverAfter) this.#recover(goods[0]);
  }

  #failing(): void {
    const { failedSlots } = this.settings;
    const slots = `${failedSlots} slot${failedSlots === 1 ? '' : 's'}`;
    void this.#raise(
      'failing',
      `${slots} in a row failed after their retries; the last: ${this.job.lastError()}`,
    );
  }

  /** Closes the incidents opened before `from`, the slot of the first of the good slots in a row that close them. */
  #recover(from: number): void {
    if (this.#here.size === 0 && this.fleet?.openOf(this.job.name) === undefined) return;
    const open = this.#open();
    const oldest = this.job.oldestRun();
    for (const [kind, { since }] of open) {
      if (since >= from) continue;
      // A hung run still going on keeps its incident open, whatever runs beside it.
      if (kind === 'hung' && oldest !== undefined && now() - oldest.startedAt >= this.settings.hungAfter)
        continue;
      void this.#close(kind);
    }
  }

  /**
   * A run started here and is still in flight once called (a run that ends at once cannot hang): the job's runs
   * are looked at for a hung one until none is in flight.
   */
  runGoesOn(): void {
    if (this.#watched) return;
    this.#watched = true;
    HUNG_WATCH.add(this);
  }

  /** The job's last run in flight here ended. */
  runsEnded(): void {
    if (!this.#watched) return;
    this.#watched = false;
    HUNG_WATCH.delete(this);
  }

  /** @internal Whether the oldest run in flight has gone on for `hungAfter`: it opens a 'hung' incident. */
  lookForHung(): void {
    const oldest = this.job.oldestRun();
    if (oldest === undefined) return this.runsEnded();
    const { hungAfter } = this.settings;
    if (now() - oldest.startedAt < hungAfter) return;
    const started = new Date(oldest.startedWall).toISOString();
    this.#raise(
      'hung',
      `run #${oldest.jobId}, started at ${started}, is still running after ${spell(hungAfter)}`,
    );
  }

  /** This replica's timer came `lateBy` ms after the slot due at `slot` (wall clock), which is its to run. */
  tickLate(slot: number, lateBy: number): void {
    this.#goods.length = 0;
    this.#raise(
      'late',
      `the slot due at ${new Date(slot).toISOString()} started ${spell(lateBy)} late: this replica's timer came ` +
        'late (an event loop kept busy, or a process suspended)',
    );
  }

  /** The store's answer, `lateAfter` after a slot this replica did not claim, says whether it is late. */
  lateRead(slot: number, read: PeriodicFleetRead | undefined, error: unknown): void {
    const wallNow = Date.now();
    if (read === undefined) {
      // The store is down: no replica can claim the slot. The replica that held the lease says so, on its own.
      if (this.job.heldAtOutage()) {
        void this.#raise(
          'late',
          `the slot due at ${new Date(slot).toISOString()} has not started ${spell(wallNow - slot)} after it ` +
            `was due: the store cannot be reached (${messageOf(error)})`,
          true,
        );
      }
      return;
    }
    const schedule = read.schedule;
    if (read.pause !== null || schedule === null || schedule.next === 0 || schedule.last >= schedule.next)
      return;
    const lateBy = wallNow - schedule.next;
    if (lateBy < this.settings.lateAfter) return;
    // A slot due while the store did not answer here either, or while the fleet took its leases again after it
    // (within `lateAfter`): the replica that held the lease said so.
    if (schedule.next < this.job.storeBackAt() + this.settings.lateAfter && !this.job.heldAtOutage()) return;
    const holder =
      read.holder === null
        ? 'no replica holds its lease'
        : `its lease is held by ${replicaOf(read.holder.owner)} until ${new Date(read.holder.until).toISOString()}`;
    this.#raise(
      'late',
      `the slot due at ${new Date(schedule.next).toISOString()} has not started ${spell(lateBy)} after it was ` +
        `due: ${holder}`,
    );
  }

  /**
   * The store of an exclusive job answers: the incidents this replica opened on its own while it did not are
   * written there, with their time, and are the fleet's from now on (closed by its good slots, wherever they run).
   * One the fleet has open already stands for this replica's.
   */
  storeAnswers(): void {
    const { fleet, job } = this;
    if (fleet === undefined || this.#here.size === 0) return;
    for (const [kind, { since, detail }] of this.#here) {
      if (this.#asking(kind)) continue;
      (this.#askingMade ??= new Set()).add(kind);
      const operation = this.#operation('incident', `${kind}: ${detail}`, since);
      fleet
        .open({ name: job.name, kind, since, detail }, operation, job.auditKeep)
        .then(
          () => this.#hereMade?.delete(kind),
          () => undefined,
        )
        .finally(() => this.#askingMade!.delete(kind));
    }
  }

  /** The job stopped: nothing more is looked for. */
  stop(): void {
    this.runsEnded();
    this.fleet?.unwatch(this);
  }

  /** Opens an incident of `kind` unless one is open; `here`: in this process even if the fleet keeps them. */
  async #raise(kind: PeriodicIncidentKind, detail: string, here = false): Promise<void> {
    if (this.#asking(kind) || this.#open().has(kind)) return;
    const { job, fleet } = this;
    const since = Date.now();
    const incident = { name: job.name, kind, since, detail: cleaned(detail) };
    const operation = this.#operation('incident', `${kind}: ${incident.detail}`, since);
    this.#goods.length = 0;
    (this.#askingMade ??= new Set()).add(kind);
    let opened = true;
    try {
      if (fleet !== undefined && !here) opened = await fleet.open(incident, operation, job.auditKeep);
      else job.recordHere(operation);
    } catch {
      // The store did not answer: this replica says so on its own.
    } finally {
      this.#askingMade!.delete(kind);
    }
    if (!opened) return;
    if (fleet === undefined || here || !fleet.openOf(job.name)?.has(kind)) {
      (this.#hereMade ??= new Map()).set(kind, { since, detail: incident.detail });
    }
    job.incidentOpened(incident);
  }

  async #close(kind: PeriodicIncidentKind): Promise<void> {
    if (this.#asking(kind)) return;
    const { job, fleet } = this;
    const wallNow = Date.now();
    const here = this.#here.get(kind);
    const { recoverAfter } = this.settings;
    const goods = recoverAfter === 1 ? 'a good slot' : `${recoverAfter} good slots in a row`;
    const operation = this.#operation('recovered', `${kind}: ${goods}`, wallNow);
    if (here !== undefined) {
      this.#hereMade!.delete(kind);
      if (fleet === undefined) job.recordHere(operation);
      job.incidentClosed({ name: job.name, kind, ...here }, wallNow - here.since);
      return;
    }
    if (fleet === undefined) return;
    (this.#askingMade ??= new Set()).add(kind);
    try {
      const closed = await fleet.close(job.name, kind, operation, job.auditKeep);
      if (closed !== null) job.incidentClosed(closed, Math.max(0, wallNow - closed.since));
    } catch {
      // The store did not answer: the next good slot closes it.
    } finally {
      this.#askingMade!.delete(kind);
    }
  }

  #operation(action: 'incident' | 'recovered', note: string, at: number): PeriodicOperation {
    return { action, by: null, note: cleaned(note), replica: this.job.replicaName, at };
  }
}

/** How often the runs in flight are looked at for a hung one, in ms. */
const HUNG_EVERY = 1000;

/**
 * The jobs of the process with runs in flight, looked at once a second for a run past its job's `hungAfter`: one
 * timer for them all, armed while any run is in flight, rather than one per run.
 */
class HungWatch {
  readonly #jobs = new Set<JobIncidents>();
  readonly #timer = new DeadlineTimer({ onDeadline: () => this.#look() });

  add(job: JobIncidents): void {
    this.#jobs.add(job);
    if (!this.#timer.armed) this.#timer.armAt(now() + HUNG_EVERY);
  }

  delete(job: JobIncidents): void {
    this.#jobs.delete(job);
    if (this.#jobs.size === 0) this.#timer.cancel();
  }

  #look(): void {
    for (const job of this.#jobs) job.lookForHung();
    if (this.#jobs.size > 0) this.#timer.armAt(now() + HUNG_EVERY);
  }
}

const HUNG_WATCH = new HungWatch();

/** Open incidents as `fleetStatus()` shows them, oldest first. */
export function incidentList(open: ReadonlyMap<PeriodicIncidentKind, Open>): PeriodicIncident[] {
  return [...open]
    .map(([kind, { since, detail }]) => ({ kind, since: new Date(since), detail }))
    .sort((a, b) => a.since.getTime() - b.since.getTime());
}

/** A detail as it is stored and shown: one line, no control character, at most {@link DETAIL_MAX} characters. */
function cleaned(detail: string): string {
  const line = detail
    .replace(new RegExp(CONTROL.source, 'g'), ' ')
    .replace(/[\u2028\u2029]/g, ' ')
    .replace(/\p{Cs}/gu, '\uFFFD');
  return line.length <= DETAIL_MAX ? line : `${[...line].slice(0, DETAIL_MAX - 1).join('')}…`;
}

/** A duration in words: `850 ms`, `42 s`, `3 min`, `2 h`. */
function spell(ms: number): string {
  const whole = Math.round(ms);
  if (whole < 10_000) return `${whole} ms`;
  if (whole < 600_000) return `${Math.round(whole / 1000)} s`;
  if (whole < 36_000_000) return `${Math.round(whole / 60_000)} min`;
  return `${Math.round(whole / 3_600_000)} h`;
}
