// One scheduler runs one job, and this file tells the whole of it: the timer's deadline comes (onDeadline), the
// next tick is armed, the tick waits for its jitter, an exclusive job claims its slot of the fleet's schedule,
// the guard and the overlap policy decide, and a run starts; its end comes back (runEnded). What the scheduler
// asks of others (the deadline timer, a run, the schedule's arithmetic, the lease and the fleet's slots) reports
// back and keeps no state about the tick.
import {
  type PeriodicCoordinator,
  type PeriodicFleetRead,
  type PeriodicFleetSchedule,
  type PeriodicIncidentRecord,
  type PeriodicOperation,
  type PeriodicRunEntry,
  type PeriodicTriggerRequest,
} from './coordinator-port.js';
import { type StoreCalls } from './store-calls.js';
import { StoreLog } from './store-log.js';
import {
  armAt,
  cancel,
  DeadlineTimer,
  isArmed,
  now,
  sleep,
  type TimerEntry,
  type TimerList,
  underFakeTimers,
  unwatchSystemTime,
  watchSystemTime,
  wallLead,
} from './deadline-timer.js';
import {
  describeValue,
  isError,
  PeriodicConfigError,
  PeriodicStoreError,
  PeriodicTimeoutError,
} from './errors.js';
import {
  type JobExitReason,
  type PeriodicEvent,
  type PeriodicEventSink,
  type PeriodicEventType,
} from './events.js';
import { FleetSlots } from './fleet.js';
import {
  fleetStatusAll,
  fleetStatusOf,
  type LocalView,
  type PeriodicFleetStatus,
  type PeriodicIncident,
} from './fleet-status.js';
import {
  countOutcome,
  errorOf,
  HISTORY_DEFAULTS,
  type HistorySettings,
  outcomeOf,
  type PeriodicRunRecord,
  slotOutcome,
} from './history.js';
import { historyReplica, JobHistory, keptBy, recordingOf, type RunRecording } from './job-history.js';
import { JobOperations, type OperatedJob } from './job-operations.js';
import {
  operatedEvent,
  operation,
  type PeriodicAuditEntry,
  type PeriodicOperationOptions,
} from './operations.js';
import { defaultReplicaName, Lease, Replica } from './replica.js';
import {
  noCoordinator,
  type PeriodicSchedulerOptions,
  resolveOptions,
  type ResolvedPeriodicOptions,
  RULES,
} from './options.js';
import { checkedOptions } from './rules.js';
import { isThenable, Run, type RunOutcome, type SyncTickResult, type TickResult } from './run.js';
import { latestSlot, type Slots } from './schedule.js';
import { ON_TIME_MS, type SlotFrom, type SlotPolicy } from './policies.js';
import { JobRecord, type PeriodicJobStatus, statusOf } from './status.js';
import { answerAsker, askHolder, askHolderToBackfill, type HolderAnswer } from './trigger-relay.js';
import {
  Backfill,
  BACKFILL_GRID_MAX,
  BACKFILL_MAX,
  type BackfillGrid,
  checkBackfill,
  countSlots,
  nextSlot,
  type PeriodicBackfillOptions,
  type Search,
} from './backfill.js';
import { CHECK_IN_WARNINGS, type CheckInReports, CheckIns, type PeriodicCheckIns } from './check-ins.js';
import {
  INCIDENT_DEFAULTS,
  type IncidentJob,
  JobIncidents,
  type IncidentSettings,
  fleetIncidentsOf,
  incidentList,
} from './incidents.js';

/**
 * The streak the fleet's latest runs (newest first) end with, for its incidents: how many slots in a row failed,
 * or the slots of the good ones in a row (oldest first); a run in flight, shut down or to be retried is neither.
 */
function streakOf(runs: readonly PeriodicRunEntry[]): [failures: number, goods: number[]] {
  let failures = 0;
  const goods: number[] = [];
  for (const run of runs) {
    const outcome = outcomeOf(run);
    if (outcome === null) continue;
    if (outcome === 'fail' ? goods.length > 0 : failures > 0) break;
    if (outcome === 'fail') failures++;
    else goods.push(run.slot ?? run.startedAt);
  }
  return [failures, goods.reverse()];
}

/** The slot a run is for, as its check-ins say it: null for a trigger or a manual tick. */
const slotOf = (run: Run) => (run.slotOrigin === 'timer' || run.slotOrigin === 'backfill' ? run.slot : null);

/**
 * A cron job waiting for a slot looks at the wall clock at least this often (ms), so that it notices a clock set
 * forward or a machine that slept: the monotonic clock its timer runs on does neither. Under a test's fake timers
 * its timer aims at the slot itself, as the test's helpers expect of one timer per job, and a clock the test
 * sets is noticed when it is set.
 */
const WALL_CHECK = 10_000;

/** What a run that did not end by itself ended with, if it ended at all: its slot is recovered (`atLeastOnce`). */
const INTERRUPTED: ReadonlySet<JobExitReason> = new Set(['shutdown', 'killed', 'leaseLost']);

/** Who pauses a job after its failures, as the audit trail names it. */
const PAUSED_BY = 'nestjs-periodic';

/** The most slots that passed unseen a job with schedule policies counts one by one, and runs (`catchUp: 'all'`). */
const CATCH_UP_MAX = 1000;

/** How many of its latest runs a job that takes its lease looks through for runs in flight that lost their replica. */
const IN_FLIGHT_SCAN = 10;

/** How long `syncTick` waits for its run by default: under the 5 s of test runners, so a stuck run names itself. */
const SYNC_TICK_TIMEOUT = 4000;

type Job = PeriodicSchedulerOptions['run'];

/** What a scheduler's ticks wait for. */
interface Pending {
  /** An async guard is pending: another tick starts nothing (one guard at a time). */
  guard: boolean;
  /** An exclusive job's claim of its slot is pending: another timer tick starts nothing. */
  claim: boolean;
  /** When the pending guard or claim began, on the `now()` timeline. */
  since: number;
  /** Jitter: the tick waiting for its delay, and the timer of that delay. */
  jittered: Run | undefined;
  jitter: DeadlineTimer | undefined;
}

/** A retry waiting for its delay: the run that failed, and the timer of the wait. */
interface PendingRetry {
  readonly failed: Run;
  readonly timer: DeadlineTimer;
  /** Its wait ended while a pause was being written: it runs once the store has refused the pause. */
  due: boolean;
}

/**
 * A scheduler that stops: what `stop()` resolves, what resolves it once the last run has ended, and whether its
 * runs were told to stop (`retire()` lets them end by themselves).
 */
interface Stopping {
  readonly stopped: Promise<void>;
  drained?: () => void;
  stopsRuns: boolean;
}

/** A sink as the scheduler calls it. */
type Sink = Exclude<PeriodicEventSink, (event: PeriodicEvent) => void>;

/**
 * What a scheduler shares with the other jobs of its application: how runs are recorded, where events go, and when
 * incidents open. One object for all the jobs that have the same, so that a job keeps one field for them.
 */
interface JobShared extends RunRecording {
  readonly sink: Sink | undefined;
  readonly incidents: IncidentSettings;
}

/** The shared objects made so far, by recording, then sink, then incident settings (`NONE` for none). */
const SHARED = new WeakMap<RunRecording, WeakMap<object, WeakMap<object, JobShared>>>();
/** The sink made of each function given as one. */
const SINKS = new WeakMap<(event: PeriodicEvent) => void, Sink>();
const NONE = {};

function sharedOf(
  recording: RunRecording,
  events: PeriodicEventSink | undefined,
  incidents: IncidentSettings,
): JobShared {
  let sink: Sink | undefined;
  if (typeof events === 'function') {
    sink = SINKS.get(events);
    if (sink === undefined) SINKS.set(events, (sink = { emit: events }));
  } else sink = events;
  let bySink = SHARED.get(recording);
  if (bySink === undefined) SHARED.set(recording, (bySink = new WeakMap()));
  let byIncidents = bySink.get(sink ?? NONE);
  if (byIncidents === undefined) bySink.set(sink ?? NONE, (byIncidents = new WeakMap()));
  let shared = byIncidents.get(incidents || NONE);
  if (shared === undefined) {
    const { replica, settings, errors } = recording;
    byIncidents.set(incidents || NONE, (shared = { replica, settings, errors, sink, incidents }));
  }
  return shared;
}

/** What a scheduler is made with beside its options, the Nest layer's, or an application's that shares them. */
export interface SchedulerContext {
  /** How error messages name the job, e.g. `@Periodic() on Cleanup.purge`. @default `job "<name>"` */
  where?: string;
  /**
   * This replica in the fleet of the exclusive job's coordinator, shared by the jobs of an application that use
   * it (their leases are renewed and taken together, and its failures reported once). @default one of the
   * job's own
   */
  replica?: Replica;
  /** The replica's name, for a job that is not exclusive. @default that of `replica`, or `<hostname>:<pid>` */
  replicaName?: string;
  /** Whether and how the job's runs are recorded (docs/operations.md, "Run history"). @default `{ keep: 100, errors: 'message' }` */
  history?: HistorySettings;
  /**
   * What a run's error becomes wherever it leaves the run (the history, fleet status, the dashboard): `'name'`
   * keeps only its class name, for errors that may carry secrets. @default `history.errors`, else `'message'`
   */
  errors?: 'message' | 'name';
  /**
   * The job is method `key` of `target`, and `run` the method it inherits: one that `target` holds itself at a
   * run (a test's `jest.spyOn(instance, 'purge')`, made after the job) is called instead. (Looking the method up
   * by name on each run would cost every run a property lookup that V8 cannot cache when thousands of jobs of
   * many classes share one call site.)
   */
  method?: { readonly target: object; readonly key: string | symbol };
  /** The application's check-ins, which a job's `checkIn` overrides, and what hears of those that fail. */
  checkIns?: { module: PeriodicCheckIns | undefined; reports: CheckInReports };
  /** When the job opens incidents, and when they close (docs/alerts.md); false: never. @default the defaults */
  incidents?: IncidentSettings;
}

/** The bits of a scheduler's `#flags`. */
const FLAGS = { completed: 1, ending: 2, seeking: 4, askingRuns: 8, aimedPast: 16, numbered: 32 } as const;

/** What a scheduler holds only once it needs it: most jobs never do, and an idle job holds none of it. */
class RareState {
  /** Slots that started a run, while `maxRuns` counts them (a job that is not exclusive: the fleet counts the others). */
  slotsRun = 0;
  /** `catchUp: { runs: 'all' }`: the slots still to run one at a time, oldest first; undefined while none is. */
  backlog: number[] | undefined = undefined;
  /** A backfill under way (`backfill()`), here: on the holder for an exclusive job. */
  backfill: Backfill | undefined = undefined;
  /** When this replica last lost the job's lease (wall clock): a store down since then is one it held the lease at. */
  leaseLostAt = 0;
  /** Retries waiting for their delay (`retry`), each of the slot of a run that failed. */
  retries: Set<PendingRetry> | undefined = undefined;
  /**
   * `delivery: 'atLeastOnce'`, the lease just taken: until the store has said whether the fleet's last slot is
   * to run again, ticks wait before they claim theirs, so that the recovery comes first.
   */
  recovering: Promise<void> | undefined = undefined;
  /** Added to the count of runs started to make a run's jobId: runs this replica's name recorded before. */
  jobIdBase = 0;
  /** Once `stop()` was called: what it resolves, and what resolves it when the last run has ended. */
  stopping: Stopping | undefined = undefined;
  /** The job's pause, and the operations that change it: made when the job is first operated or paused. */
  operations: JobOperations | undefined = undefined;
  /** Where its runs' check-ins go, when the job or the module has some. */
  checkIns: CheckIns | undefined = undefined;
}

/** The rare state of a job that holds none: its defaults. */
const NO_RARE_STATE: Readonly<RareState> = Object.freeze(new RareState());

/**
 * One scheduler runs one job: it ticks on a monotonic clock (or on a cron calendar's wall-clock slots),
 * evaluates the guard, applies the overlap policy, starts runs, stops them on timeout or shutdown, and reports
 * every step as an event. Plain TypeScript: usable without Nest. An `exclusive` job starts runs only while this
 * replica holds its lease, and on the fleet's schedule.
 */
export class PeriodicScheduler {
  /** The job's options, validated, with defaults filled in. */
  readonly options: ResolvedPeriodicOptions;
  /** The job's function: for a method, the one its object inherits (see `SchedulerContext.method`). */
  readonly #job: Job;
  /** The method the job is, the object given as `SchedulerContext.method`: kept as it is, so that it costs nothing. */
  readonly #method: SchedulerContext['method'];
  #phase: 'idle' | 'ticking' | 'stopped' = 'idle';
  /** How the application records runs, where events go and when incidents open, shared by its jobs. */
  readonly #shared: JobShared;
  /** The job's run history, made with its first run or read: an idle job has none. */
  #madeHistory: JobHistory | undefined;
  /** What the job did, made when it first has something to count. */
  #record: JobRecord | undefined;
  /**
   * The runs being tracked, in start order: a run on its own, the common case, or an array of those that
   * overlap. A job whose one run at a time ends allocates no array for it.
   */
  #runs: Run | Run[] | undefined;
  /** The slots of a cron job, or of an `at` job. */
  readonly #calendar: Slots | undefined;
  /** When the job opens incidents (false: never). */
  get #incidentSettings(): IncidentSettings {
    return this.#shared.incidents;
  }
  /**
   * The job's incidents, made when it first has to look for one (an exclusive job's when it takes the lease: a
   * field of its own, not rare state).
   */
  #madeIncidents: JobIncidents | undefined;
  /** Auto mode: the wall-clock time of the armed tick, its slot. */
  #slot = 0;
  /** What ticks wait for, made when one first waits for its jitter, its guard or its claim: most jobs never do. */
  #pending: Pending | undefined;
  /** Exclusive jobs: this replica's part in the fleet's schedule, and the lease it must hold to start a run. */
  readonly #fleet: FleetSlots | undefined;

  /** The job's state that is true or false, bit by bit (`FLAGS`): one field of an idle job's, not six. */
  #flags = 0;
  /** What the job holds only once it needs it (`RareState`): an idle job holds none of it. */
  #rare: RareState | undefined;

  /** `'completed'`: no slot is left to run (`endAt` passed, `maxRuns` reached, the slot of `at` ran). */
  get #completed(): boolean {
    return this.#is(FLAGS.completed);
  }
  set #completed(on: boolean) {
    this.#flag(FLAGS.completed, on);
  }
  /** No slot is left before `endAt`, which has not passed yet: the timer waits for it, and the job then completes. */
  get #ending(): boolean {
    return this.#is(FLAGS.ending);
  }
  set #ending(on: boolean) {
    this.#flag(FLAGS.ending, on);
  }
  /** The next slot of the backfill is being sought. */
  get #seeking(): boolean {
    return this.#is(FLAGS.seeking);
  }
  set #seeking(on: boolean) {
    this.#flag(FLAGS.seeking, on);
  }
  /** A replica without the lease reads whether the fleet ran `maxRuns` slots. */
  get #askingRuns(): boolean {
    return this.#is(FLAGS.askingRuns);
  }
  set #askingRuns(on: boolean) {
    this.#flag(FLAGS.askingRuns, on);
  }
  /** The timer was aimed at a slot that had passed: its tick is not late for the timer's sake. */
  get #aimedPast(): boolean {
    return this.#is(FLAGS.aimedPast);
  }
  set #aimedPast(on: boolean) {
    this.#flag(FLAGS.aimedPast, on);
  }
  /** Whether the first jobId of this process was read from the fleet's history (exclusive jobs with one). */
  get #numbered(): boolean {
    return this.#is(FLAGS.numbered);
  }
  set #numbered(on: boolean) {
    this.#flag(FLAGS.numbered, on);
  }

  /** Whether `bit` of `#flags` is set. */
  #is(bit: number): boolean {
    return (this.#flags & bit) !== 0;
  }

  #flag(bit: number, on: boolean): void {
    this.#flags = on ? this.#flags | bit : this.#flags & ~bit;
  }

  /** Sets `key` of the rare state; its default sets nothing where the job holds no rare state. */
  #keep<K extends keyof RareState>(key: K, value: RareState[K]): void {
    if (this.#rare === undefined) {
      if (value === NO_RARE_STATE[key]) return;
      this.#rare = new RareState();
    }
    this.#rare[key] = value;
  }

  get #slotsRun(): number {
    return (this.#rare ?? NO_RARE_STATE).slotsRun;
  }
  set #slotsRun(count: number) {
    this.#keep('slotsRun', count);
  }
  get #backlog(): number[] | undefined {
    return (this.#rare ?? NO_RARE_STATE).backlog;
  }
  set #backlog(slots: number[] | undefined) {
    this.#keep('backlog', slots);
  }
  get #backfill(): Backfill | undefined {
    return (this.#rare ?? NO_RARE_STATE).backfill;
  }
  set #backfill(backfill: Backfill | undefined) {
    this.#keep('backfill', backfill);
  }
  get #leaseLostAt(): number {
    return (this.#rare ?? NO_RARE_STATE).leaseLostAt;
  }
  set #leaseLostAt(at: number) {
    this.#keep('leaseLostAt', at);
  }
  get #retries(): Set<PendingRetry> | undefined {
    return (this.#rare ?? NO_RARE_STATE).retries;
  }
  set #retries(retries: Set<PendingRetry> | undefined) {
    this.#keep('retries', retries);
  }
  get #recovering(): Promise<void> | undefined {
    return (this.#rare ?? NO_RARE_STATE).recovering;
  }
  set #recovering(recovering: Promise<void> | undefined) {
    this.#keep('recovering', recovering);
  }
  get #jobIdBase(): number {
    return (this.#rare ?? NO_RARE_STATE).jobIdBase;
  }
  set #jobIdBase(base: number) {
    this.#keep('jobIdBase', base);
  }
  get #stopping(): Stopping | undefined {
    return (this.#rare ?? NO_RARE_STATE).stopping;
  }
  set #stopping(stopping: Stopping | undefined) {
    this.#keep('stopping', stopping);
  }

  // The job's tick timer: the scheduler is the shared timer's entry itself (see TimerEntry).
  /** @internal */ deadline = 0;
  /** @internal */ sequence = 0;
  /** @internal */ list: TimerList | null | undefined;
  /** @internal */ previous: TimerEntry | undefined;
  /** @internal */ next: TimerEntry | undefined;

  /** @internal Where the job stands among those of its registry, which numbers them as it gets them. */
  registered = 0;

  /** The job's pause, and the operations that change it: made when the job is first operated or paused. */
  get #operations(): JobOperations | undefined {
    return (this.#rare ?? NO_RARE_STATE).operations;
  }
  set #operations(operations: JobOperations | undefined) {
    this.#keep('operations', operations);
  }
  /** Where its runs' check-ins go, when the job or the module has some. */
  get #checkIns(): CheckIns | undefined {
    return (this.#rare ?? NO_RARE_STATE).checkIns;
  }

  /**
   * @internal A stored schedule's data, which each run takes when it starts (`ctx.data`); undefined for other jobs.
   * A field of its own, not rare state: every stored schedule has some.
   */
  data: unknown = undefined;

  /**
   * @internal When the job's options last changed (a stored schedule's edit, wall-clock ms): a grid of other
   * options in the store gives way to one that starts after it.
   */
  set changedAt(at: number) {
    if (this.#fleet !== undefined) this.#fleet.changedAt = at;
  }

  /** @internal When the job was created (a stored schedule, wall-clock ms): no slot from before it runs. */
  set createdAt(at: number) {
    if (this.#fleet !== undefined) this.#fleet.createdAt = at;
  }

  /**
   * @param options the job's options with its `name` and the `run` function; invalid ones throw a
   *   {@link PeriodicConfigError}.
   * @param events where the scheduler reports its events: a function, or `{ emit(event), wants?(type) }`.
   * @param context how error messages name the job (a string), or that and where an exclusive job's store
   *   failures are reported.
   */
  constructor(
    options: PeriodicSchedulerOptions,
    events?: PeriodicEventSink,
    context?: string | SchedulerContext,
  ) {
    const {
      where: named,
      replica,
      replicaName,
      method,
      history = HISTORY_DEFAULTS,
      errors = history === false ? HISTORY_DEFAULTS.errors : history.errors,
      checkIns,
      incidents = INCIDENT_DEFAULTS,
    } = typeof context === 'string' ? { where: context } : (context ?? {});
    const name: unknown = options?.name;
    const where =
      named ?? `job ${typeof name === 'string' && name !== '' ? JSON.stringify(name) : '(unnamed)'}`;
    const { options: resolved, calendar } = resolveOptions(options, where);
    const refused = (error: PeriodicConfigError) => {
      calendar?.release();
      return error;
    };
    const { coordinator } = options;
    if (resolved.exclusive && coordinator === undefined) {
      throw refused(noCoordinator(where, '{ coordinator } in the options'));
    }
    if (events !== undefined && typeof events !== 'function' && typeof events?.emit !== 'function') {
      throw refused(
        new PeriodicConfigError(
          `${where}: the event sink must be a function or an object with emit(event), got ${describeValue(events)}`,
        ),
      );
    }
    this.options = resolved;
    this.#calendar = calendar;
    this.#job = options.run;
    this.#method = method;
    if (coordinator !== undefined && resolved.exclusive) {
      const lease = new Lease(replica ?? this.#ownReplica(coordinator), resolved.name, this);
      if (resolved.delivery === 'atLeastOnce' && (history === false || !lease.replica.calls.recorded)) {
        throw refused(
          new PeriodicConfigError(
            `${where}: "delivery" 'atLeastOnce' needs the fleet's run history, which tells a slot whose run ` +
              'ended from one its holder did not finish: ' +
              (history === false
                ? 'the history is off (history: false); turn it on'
                : 'the coordinator keeps none (it has no recordRuns, readHistory, readFleet); use one that does'),
          ),
        );
      }
      this.#fleet = new FleetSlots(lease, resolved, this);
    }
    this.#shared = sharedOf(
      recordingOf(replica?.name ?? replicaName ?? defaultReplicaName(), history, errors),
      events,
      incidents,
    );
    try {
      const reports = checkIns?.reports ?? CHECK_IN_WARNINGS;
      this.#keep(
        'checkIns',
        CheckIns.of(where, resolved.name, resolved.checkIn, checkIns?.module, errors, reports),
      );
    } catch (error) {
      calendar?.release();
      throw error;
    }
  }

  get #history(): JobHistory {
    return (this.#madeHistory ??= new JobHistory(this.options, this.#shared, this.#fleet?.lease.replica));
  }

  /** The job's name: unique in its registry, the key of its lease and records in a coordinator's store. */
  get name(): string {
    return this.options.name;
  }

  /** `'idle'` until `start()`, `'ticking'` (or `'paused'`) until `stop()`, then `'stopped'` for good. */
  get state(): PeriodicJobStatus['state'] {
    if (this.#phase !== 'ticking') return this.#phase;
    if (this.#completed) return 'completed';
    return this.#open ? 'ticking' : 'paused';
  }

  /** The number of runs being tracked: started, and neither settled nor abandoned. */
  get running(): number {
    const runs = this.#runs;
    return runs === undefined ? 0 : Array.isArray(runs) ? runs.length : 1;
  }

  /** The runs being tracked, in start order, in an array of their own. */
  #inFlight(): Run[] {
    const runs = this.#runs;
    return runs === undefined ? [] : Array.isArray(runs) ? runs.slice() : [runs];
  }

  // ---- The tick ----

  /** @internal The tick timer's deadline has come: `now()` read `time`. */
  onDeadline(time: number): void {
    if (this.#ending) {
      this.#ending = false;
      return this.#complete();
    }
    const incidents = this.#incidentSettings;
    const aimedPast = this.#aimedPast;
    this.#aimedPast = false;
    if (incidents !== false && !aimedPast) {
      // The slot armed for came this much ago (a cron job's timer also wakes before its slot, to look at the clock).
      const lateBy = this.#calendar === undefined ? time - this.deadline : Date.now() - this.#slot;
      if (lateBy >= incidents.lateAfter && this.#fleet?.lease.held !== false && this.#open) {
        this.#incidents!.tickLate(this.#slot, lateBy);
      }
    }
    const { policy } = this.options;
    if (policy !== undefined) return this.#policyTick(policy, time);
    const calendar = this.#calendar;
    if (calendar !== undefined) return this.#slotCame(calendar);
    let scheduledAt = this.deadline;
    let slot = this.#slot;
    if (this.options.delayMode === 'regular') {
      // Missed slots are dropped, not replayed: run once for the latest slot that has passed.
      const { every } = this.options;
      const missed = Math.floor((time - scheduledAt) / every);
      if (missed > 0) {
        scheduledAt += missed * every;
        slot += missed * every;
        if (!this.#slotsDropped(missed)) return;
      }
      // The next deadline comes from this one, not from the clock, so the grid never drifts.
      this.#slot = slot + every;
      armAt(this, scheduledAt + every, time);
      this.#fleet?.armed(this.#slot, scheduledAt + every);
      this.#reportNext(every);
    }
    this.#due(new Run(this, scheduledAt, slot, 'timer'));
  }

  /** A cron job's timer fired: the slot has come by the wall clock, or the timer is aimed again. */
  #slotCame(calendar: Slots): void {
    const wallNow = Date.now();
    // Early by the wall clock (it was set back, or runs slower than the monotonic one): wait for the rest.
    if (wallNow < this.#slot) return this.#aim(this.#slot, wallNow);
    const { slot, missed, next } = latestSlot(calendar, this.#slot, wallNow);
    if (missed > 0 && !this.#slotsDropped(missed)) return;
    this.#armSlot(next);
    this.#due(new Run(this, now() - (wallNow - slot), slot, 'timer'));
  }

  /**
   * The tick of a job with schedule policies (docs/policies.md): the slots that passed since the one it was armed
   * for, without those the policies leave out; the next slot armed, or the job completed; then, of the slots that
   * passed, those `catchUp` lets run are started (several: one at a time, oldest first), and the others are
   * counted as missed.
   */
  #policyTick(policy: SlotPolicy, time: number): void {
    const calendar = this.#calendar;
    const wallNow = Date.now();
    if (calendar !== undefined && wallNow < this.#slot) return this.#aim(this.#slot, wallNow);
    const first = this.#slot;
    if (this.options.delayMode === 'shifted') {
      this.#dueAll(policy, [first], 1, first, Infinity);
      return;
    }
    // An `every` job's grid is on the monotonic clock: its slots have passed as far as its tick is late.
    const reach = calendar === undefined ? first + Math.max(0, time - this.deadline) : wallNow;
    const { slots, count, next } = this.#passed(first, reach);
    const last = slots[slots.length - 1];
    if (next === null) this.#complete();
    else if (calendar === undefined) {
      const deadline = this.deadline + (next - first);
      this.#slot = next;
      armAt(this, deadline, time);
      this.#fleet?.armed(next, deadline);
      this.#reportNext(next - last);
    } else this.#armSlot(next);
    const interval = next === null ? Infinity : next - last;
    this.#dueAll(policy, slots, count, reach, interval);
  }

  /**
   * The slots from `first` that have passed by `reach` (wall-clock ms), up to {@link CATCH_UP_MAX} of them, the
   * latest last; how many passed (beyond that many, a lower bound); and the next slot (null: none is left).
   */
  #passed(first: number, reach: number): { slots: number[]; count: number; next: number | null } {
    const slots: number[] = [];
    let count = 0;
    let slot: number | null = first;
    let jumped = false;
    while (slot !== null && slot <= reach) {
      if (count === CATCH_UP_MAX && !jumped) {
        // Counted one by one up to here; past this, from the latest slot of the grid, which is the next to look at.
        jumped = true;
        const calendar = this.#calendar;
        const { every } = this.options;
        const latest =
          calendar === undefined ? slot + Math.floor((reach - slot) / every) * every : calendar.latest(reach);
        if (latest > slot) {
          count += calendar === undefined ? (latest - slot) / every : 1;
          slot = this.options.policy!.first(latest, this.#gridFrom(latest));
          continue;
        }
      }
      slots.push(slot);
      count++;
      slot = this.#nextAllowed(slot);
    }
    return { slots: slots.slice(-CATCH_UP_MAX), count, next: slot };
  }

  /**
   * Of the slots that passed (`count` of them, `slots` the latest ones), starts those `catchUp` lets run and
   * counts the others as missed. A slot is at most `window` old at `reach` to run: one interval by default, or
   * {@link ON_TIME_MS} for `'none'`, which so runs only a slot whose tick comes on time.
   */
  #dueAll(policy: SlotPolicy, slots: number[], count: number, reach: number, interval: number): void {
    const { window, runs } = policy.catchUp;
    const limit = window ?? (runs === 'none' ? ON_TIME_MS : interval);
    let due = slots.filter((slot) => reach - slot <= limit);
    if (runs !== 'all') due = due.slice(-1);
    // An `exclude` function is asked again at the tick: the search for the next slot may have stopped short.
    const kept = policy.asksAtTick ? due.filter((slot) => this.#included(policy, slot)) : due;
    const missed = count - due.length;
    if (missed > 0 && !this.#slotsDropped(missed)) return;
    if (kept.length === 0) {
      if (this.options.delayMode === 'shifted') this.#armNext(this.options.every);
      return;
    }
    const backlog = this.#backlog;
    if (backlog !== undefined) backlog.push(...kept);
    else if (kept.length === 1) this.#due(this.#tickOf(kept[0]));
    else {
      this.#backlog = kept;
      this.#catchUp();
    }
  }

  /** Whether `exclude` lets the slot run; a function that throws does not, and is reported as `guardFailed`. */
  #included(policy: SlotPolicy, slot: number): boolean {
    try {
      return !policy.excludedAtTick(slot);
    } catch (error) {
      this.#recorded().guardFailed++;
      if (this.#wants('guardFailed')) this.#emit({ type: 'guardFailed', name: this.name, error });
      return false;
    }
  }

  /** The tick of a slot (wall-clock ms) that came now or before: the timer's, or a backfill's. */
  #tickOf(slot: number, origin: 'timer' | 'backfill' = 'timer', waiter?: Run['waiter']): Run {
    return new Run(this, now() - Math.max(0, Date.now() - slot), slot, origin, waiter);
  }

  /** `catchUp: { runs: 'all' }`: the next slot of the backlog runs, once the run before it has ended. */
  #catchUp(): void {
    const backlog = this.#backlog;
    const slot = backlog?.shift();
    if (slot === undefined || this.#phase !== 'ticking') {
      this.#backlog = undefined;
      return;
    }
    const started = this.#takeTick(this.#tickOf(slot, 'timer', () => this.#catchUp()));
    const ran = (run: Run | undefined) => {
      // A slot that started nothing lets the next go at once (in a later microtask: the stack does not grow).
      if (run === undefined) void Promise.resolve().then(() => this.#catchUp());
    };
    if (isThenable(started)) void started.then(ran);
    else ran(started);
  }

  /** No slot is left to run: the job is `'completed'`, and its runs in flight go on. */
  #complete(): void {
    if (this.options.mode !== 'auto') return;
    cancel(this);
    if (this.#calendar !== undefined) unwatchSystemTime(this);
    this.#fleet?.armed(0, 0);
    // No slot is left before `endAt`: the job completes once it has passed, and ticks no more meanwhile.
    const endAt = this.options.policy?.endAt ?? Infinity;
    const wallNow = Date.now();
    const ranAll = this.#ranAll;
    if (endAt !== Infinity && endAt > wallNow && !ranAll) {
      this.#ending = true;
      armAt(this, now() + (endAt - wallNow));
      return;
    }
    if (ranAll && this.#fleet?.lease.held === true) this.#fleet.ended();
    this.#completed = true;
  }

  /**
   * `maxRuns` of an exclusive job on a replica that does not hold its lease: a slot that came here is the time to
   * read whether the fleet has run them all, so that this replica says 'completed' too. One read at a time.
   */
  #askFleetRuns(fleet: FleetSlots): void {
    const maxRuns = this.options.policy?.maxRuns ?? Infinity;
    if (maxRuns === Infinity || this.#askingRuns) return;
    this.#askingRuns = true;
    fleet.lease.replica.calls
      .readSchedule(this.name)
      .then(
        (stored) => {
          if (stored === null || stored.grid !== fleet.grid || (stored.runs ?? 0) < maxRuns) return;
          fleet.heard(stored.runs!);
          if (this.#phase === 'ticking' && fleet.lease.held === false) this.#complete();
        },
        () => undefined,
      )
      .finally(() => (this.#askingRuns = false));
  }

  /** Whether the job has run `maxRuns` slots (for the fleet, for an exclusive job). */
  get #ranAll(): boolean {
    const maxRuns = this.options.policy?.maxRuns ?? Infinity;
    return maxRuns !== Infinity && (this.#fleet === undefined ? this.#slotsRun : this.#fleet.runs) >= maxRuns;
  }

  /** A timer tick is due: handled now, or after a random delay under `jitter` past its slot (at once if it is that late). */
  #due(tick: Run): void {
    const { jitter } = this.options;
    // A replica without the lease has nothing to delay.
    if (jitter === 0 || this.#fleet?.lease.held === false) {
      void this.#takeTick(tick);
      return;
    }
    const waiting = this.#waits();
    // A tick still waiting when the next comes (a pattern's gap that day was shorter than the jitter) goes now.
    if (waiting.jittered !== undefined) this.#jitterEnded();
    waiting.jittered = tick;
    waiting.jitter ??= new DeadlineTimer({ onDeadline: () => this.#jitterEnded() });
    waiting.jitter.armAt(tick.scheduledAt + Math.random() * jitter);
  }

  #jitterEnded(): void {
    const waiting = this.#pending!;
    const tick = waiting.jittered!;
    waiting.jittered = undefined;
    waiting.jitter!.cancel();
    void this.#takeTick(tick);
  }

  /**
   * Claims the slot of an exclusive job's timer tick, evaluates the guard, then starts a run. Stays synchronous
   * unless the slot is claimed or the guard returns a promise. A triggered tick claims no slot: the grid does
   * not move.
   */
  #takeTick(tick: Run): Run | undefined | Promise<Run | undefined> {
    if (this.#phase !== 'ticking') return undefined;
    const fleet = this.#fleet;
    if (fleet !== undefined && tick.origin === 'timer') this.#watchSlot(fleet, tick.slot);
    // Without the lease, or paused, a tick starts nothing: no guard, no event.
    if (fleet?.lease.held === false) {
      if (tick.origin === 'timer') {
        fleet.unheld(tick.slot);
        this.#askFleetRuns(fleet);
      }
      return this.#endWithoutRun(tick);
    }
    if (this.#operations?.paused) return this.#endWithoutRun(tick);
    // One guard at a time; and one claim at a time, which a trigger does not make.
    const pending = this.#pending;
    if (pending !== undefined && (pending.guard || (pending.claim && tick.origin === 'timer'))) {
      this.#missed(1);
      return this.#endWithoutRun(tick);
    }
    if (fleet === undefined || tick.origin !== 'timer') return this.#passGuard(tick);
    // The slot is the fleet's: claimed in the store first, it runs in no other replica, now or later.
    const waiting = this.#waitFor('claim');
    const recovering = this.#recovering;
    const claimed =
      recovering === undefined ? fleet.claim(tick.slot) : recovering.then(() => fleet.claim(tick.slot));
    return claimed.then((held) => {
      waiting.claim = false;
      if (held === false) {
        fleet.lease.idle();
        return this.#endWithoutRun(tick);
      }
      if (held === 'paused') this.#operated().claimed(true);
      else this.#operations?.claimed(false);
      // Closing meanwhile: the claimed slot is given back to the fleet when the lease is released.
      if (this.#phase !== 'ticking') return undefined;
      // Paused (here, or for the fleet), or a trigger's guard is pending: the slot was claimed, and is dropped.
      if (!this.#open || waiting.guard) {
        fleet.settled();
        if (waiting.guard) this.#missed(1);
        return this.#endWithoutRun(tick);
      }
      fleet.hold(tick.slot);
      const started = this.#passGuard(tick);
      if (!isThenable(started)) {
        fleet.settled();
        return started;
      }
      return started.then((run) => {
        // A guard that answers once the job is closing leaves its slot to be given back.
        if (this.#phase === 'ticking') fleet.settled();
        return run;
      });
    });
  }

  #passGuard(tick: Run): Run | undefined | Promise<Run | undefined> {
    const guard = this.options.when;
    if (guard === undefined) return this.#startRun(tick);
    let verdict: unknown;
    try {
      verdict = guard();
      if (!isThenable(verdict)) return verdict ? this.#startRun(tick) : this.#endWithoutRun(tick);
    } catch (error) {
      return this.#guardFailed(tick, error);
    }
    const waiting = this.#waitFor('guard');
    return Promise.resolve(verdict).then(
      (passed) => {
        waiting.guard = false;
        // The lease may have been lost, or the job paused, while the guard was pending.
        return passed && this.#fleet?.lease.held !== false && this.#open
          ? this.#startRun(tick)
          : this.#endWithoutRun(tick);
      },
      (error: unknown) => {
        waiting.guard = false;
        return this.#guardFailed(tick, error);
      },
    );
  }

  /** A tick begins to wait for its guard or its claim. */
  #waitFor(what: 'guard' | 'claim'): Pending {
    const pending = this.#waits();
    pending[what] = true;
    pending.since = now();
    return pending;
  }

  #waits(): Pending {
    return (this.#pending ??= {
      guard: false,
      claim: false,
      since: 0,
      jittered: undefined,
      jitter: undefined,
    });
  }

  /** Applies the overlap policy, then starts a run. */
  #startRun(tick: Run): Run | undefined {
    if (this.#phase !== 'ticking') return undefined;
    let replacesGridRun = false;
    // A retry waiting for its delay is its slot's work still going on.
    const retries = this.#retries;
    if ((this.#runs !== undefined || retries?.size) && this.options.onOverlap !== 'run') {
      const running = this.#inFlight();
      if (this.options.onOverlap === 'ignore') {
        this.#recorded().skipped++;
        if (this.#wants('skipped')) {
          const stillRunning = running[0]?.jobId ?? retries!.values().next().value!.failed.jobId;
          this.#emit({ type: 'skipped', name: this.name, stillRunning });
        }
        return this.#endWithoutRun(tick);
      }
      this.#cancelRetries();
      for (const previous of running) {
        replacesGridRun ||= previous.armsNext;
        previous.stop('stopPrevious');
        if (this.#wants('stoppedPrevious')) {
          this.#emit({ type: 'stoppedPrevious', name: this.name, jobId: previous.jobId });
        }
      }
      // An abort listener of the stopped run may have stopped this scheduler.
      if (this.#phase !== 'ticking') return undefined;
    }
    // Runs are numbered in start order: a run's jobId is the count of runs started (above those of a process
    // that had this replica's name before).
    const record = this.#recorded();
    const run = tick;
    if (run.origin === 'timer' && this.options.policy !== undefined) {
      // An exclusive job's slots are the fleet's to count: its claim counted this one.
      if (this.#fleet === undefined) this.#slotsRun++;
      if (this.#ranAll) {
        this.#backlog = undefined;
        this.#complete();
      }
    }
    run.start(this.#jobIdBase + ++record.started, this.#fleet?.lease.fencingToken, this.data);
    // In shifted mode the run that replaces one of the grid's arms the next tick in its place.
    if (replacesGridRun) run.replacesGridRun();
    const runs = this.#runs;
    this.#runs = runs === undefined ? run : Array.isArray(runs) ? (runs.push(run), runs) : [runs, run];
    record.lastStartedAt = run.startedWall;
    if (this.recordsRuns) this.#history.started(run);
    if (this.#wants('started')) {
      const { jobId, startedAt, scheduledAt } = run;
      this.#emit({ type: 'started', name: this.name, jobId, scheduledAt, startedAt });
    }
    this.#checkIns?.started(run.jobId, slotOf(run));
    run.launch();
    // A run still in flight once called may hang (one that ended at once cannot): the process's watch looks at it.
    if (
      this.#incidentSettings !== false &&
      this.#runs !== undefined &&
      (this.#runs === run || this.running > 1)
    ) {
      this.#incidents!.runGoesOn();
    }
    return run;
  }

  /** @internal Calls the job with its run as the context. */
  call(run: Run): unknown {
    const method = this.#method;
    if (method === undefined) return this.#job(run);
    const { target, key } = method;
    return (Object.hasOwn(target, key) ? (target as Record<string | symbol, Job>)[key] : this.#job).call(
      target,
      run,
    );
  }

  /** @internal The method the job is, as `SchedulerContext.method` gave it. */
  get method(): SchedulerContext['method'] {
    return this.#method;
  }

  #guardFailed(tick: Run, error: unknown): undefined {
    // A guard that fails after its job stopped (a close, a removal) reports nothing.
    if (this.#phase !== 'ticking') return undefined;
    this.#recorded().guardFailed++;
    if (this.#wants('guardFailed')) this.#emit({ type: 'guardFailed', name: this.name, error });
    return this.#endWithoutRun(tick);
  }

  /** A tick that starts no run: in shifted mode the next tick comes `every` ms after it, unless it was triggered. */
  #endWithoutRun(tick: Run): undefined {
    if (this.options.delayMode === 'shifted' && this.#phase === 'ticking' && tick.origin !== 'trigger') {
      this.#armNext(this.options.every);
    }
    return undefined;
  }

  /** @internal A run of this job has ended. */
  runEnded(run: Run, reason: JobExitReason, failed: boolean, error: unknown): void {
    const runs = this.#runs;
    if (runs === run) this.#runs = undefined;
    else if (Array.isArray(runs)) {
      runs.splice(runs.indexOf(run), 1);
      if (runs.length < 2) this.#runs = runs[0];
    }
    // Read before the next tick is armed, so that the gap from this end to it is never below `every`.
    const lasted = now() - run.startedAt;
    const durationMs = Math.round(lasted * 1000) / 1000;
    const record = this.#recorded();
    const retry = this.#retryAfter(run, reason);
    record[reason]++;
    record.lastReason = reason;
    record.lastEndedAt = run.startedWall + lasted;
    record.lastDurationMs = durationMs;
    record.lastError = failed ? { value: error } : undefined;
    // A slot that fails counts once, when its last attempt has.
    const outcome = slotOutcome(reason, retry !== undefined);
    countOutcome(record, outcome, record.lastEndedAt);
    if (outcome === 'fail') this.#failedInARow();
    if (this.recordsRuns) this.#history.ended(run, reason, durationMs, failed, error, retry !== undefined);
    this.#checkIns?.ended(run.jobId, slotOf(run), reason, failed ? error : run.stopError);
    // A run replaced by stopPrevious leaves the next tick to the run that replaced it; a triggered one, to
    // the grid.
    // (A retry arms it in its turn.)
    if (
      this.options.delayMode === 'shifted' &&
      this.#phase === 'ticking' &&
      !run.replaced &&
      run.armsNext &&
      retry === undefined
    ) {
      this.#armNext(this.options.every);
    }
    const { waiter } = run;
    const listening = this.#wants('finished', reason);
    if (listening || waiter !== undefined) {
      const outcome: RunOutcome = failed ? { reason, error, durationMs } : { reason, durationMs };
      if (listening) this.#emit({ type: 'finished', name: this.name, jobId: run.jobId, ...outcome });
      waiter?.(outcome);
    }
    // After the run's own event: an incident it opens or closes follows it.
    if (outcome !== null && this.#incidentSettings !== false) this.#slotEnded(outcome === 'ok', run);
    // A run that timed out without throwing is retried for its signal's reason.
    if (retry !== undefined) this.#retryIn(run, retry, failed ? error : run.stopError);
    if (this.#runs === undefined) {
      this.#madeIncidents?.runsEnded();
      // Once the retry is decided: a retry waiting keeps a lease being handed over.
      this.#fleet?.lease.idle();
      this.#stopping?.drained?.();
      if (this.#backfill !== undefined) this.#backfillSoon();
    }
  }

  // ---- Slots recovered, and runs a dead replica left in flight ----

  /**
   * This replica just took the lease (with `fencingToken`, having found the last one expired at `foundAt`, wall
   * clock) and reads the job's latest runs:
   * - a run in flight that an earlier holding started, and that no process of this replica's session runs, lost
   *   its replica, which can no longer record its end: its end is recorded here (`'leaseLost'`), so that
   *   no run reads as running for ever;
   * - `delivery: 'atLeastOnce'`: if the fleet's last slot was run by an earlier holding and its run did not end
   *   by itself (no end recorded, or `'shutdown'`, `'killed'`, `'leaseLost'`), it runs again now, as the slot's
   *   next attempt: at most `retry.attempts + 1` starts per slot, and at least one recovery.
   */
  async #recover(
    fencingToken: number,
    stored: PeriodicFleetSchedule | null,
    numbering: boolean,
    foundAt: number,
  ): Promise<void> {
    const history = this.#history;
    const { kept } = history;
    const read = () => history.latest(numbering ? kept : Math.min(kept, IN_FLIGHT_SCAN));
    let runs = await read();
    // A store too busy to answer at once is asked twice more while the lease is still this holding's.
    for (let tries = 0; runs === undefined && tries < 2; tries++) {
      await sleep(history.fleet!.calls.timing.marginMs);
      if (this.#fleet!.lease.fencingToken !== fencingToken) return;
      runs = await read();
    }
    if (runs === undefined) return;
    if (this.#incidentSettings !== false) this.#incidents!.seed(...streakOf(runs));
    if (numbering) {
      this.#numbered = true;
      const started = this.#record?.started ?? 0;
      for (const run of runs) {
        if (run.replica === history.replica) this.#jobIdBase = Math.max(this.#jobIdBase, run.jobId - started);
      }
    }
    const [latest] = runs;
    const recovers =
      this.options.delivery === 'atLeastOnce' &&
      latest !== undefined &&
      stored !== null &&
      latest.slot !== null &&
      latest.slot === stored.last &&
      (latest.reason === null || INTERRUPTED.has(latest.reason)) &&
      (latest.fencingToken ?? 0) < fencingToken &&
      latest.attempt < Math.max(2, this.options.retry.attempts + 1) &&
      // The lease may have gone again meanwhile, or the job stopped.
      this.#fleet!.lease.fencingToken === fencingToken &&
      this.#retrying();
    history.closeLost(runs, fencingToken, foundAt, recovers ? latest : undefined);
    if (!recovers) return;
    const retry = { attempt: latest.attempt + 1, armsNext: false, of: 'timer' as const };
    this.#startRun(
      new Run(this, now() - (Date.now() - latest.slot!), latest.slot!, 'recovery', undefined, retry),
    );
  }

  // ---- Retries ----

  /**
   * How long the slot of `run`, which ended with `reason`, waits before it runs again, or undefined when it does
   * not: it ended `'error'` or `'timeout'`, it has attempts left, and the job still ticks, unpaused, with its
   * lease held.
   */
  #retryAfter(run: Run, reason: JobExitReason): number | undefined {
    const { attempts, backoff } = this.options.retry;
    // A run that timed out and was then replaced by a later slot's (`stopPrevious`) leaves its slot failed.
    if (
      (reason !== 'error' && reason !== 'timeout') ||
      run.attempt > attempts ||
      run.replaced ||
      !this.#retrying()
    ) {
      return undefined;
    }
    const wait = Math.min(backoff.max, backoff.initial * backoff.factor ** (run.attempt - 1));
    return Math.round(wait * (0.9 + 0.2 * Math.random()));
  }

  /**
   * Whether a slot may run again now: the job ticks, is not paused, and holds its lease if it is exclusive (also
   * while the lease is being handed over: the retry is its slot's work, which drains before the lease goes).
   */
  #retrying(): boolean {
    // A fleet's pause on its way to the store counts once the store has it: `pause()` cancels the retries then.
    return (
      this.#phase === 'ticking' &&
      (this.#operations?.retriesRun ?? true) &&
      this.#fleet?.lease.holding !== false
    );
  }

  /** The slot of `failed` runs again in `inMs` ms: reported (`retrying`), and waited for. */
  #retryIn(failed: Run, inMs: number, error: unknown): void {
    const attempt = failed.attempt + 1;
    if (this.#wants('retrying')) {
      this.#emit({ type: 'retrying', name: this.name, jobId: failed.jobId, attempt, inMs, error });
    }
    // A listener may have stopped the job.
    if (!this.#retrying()) return this.#slotFailed(failed);
    const pending: PendingRetry = {
      failed,
      timer: new DeadlineTimer({ onDeadline: () => this.#retryDue(pending) }),
      due: false,
    };
    (this.#retries ??= new Set()).add(pending);
    pending.timer.armAt(now() + inMs);
  }

  /** A retry's wait is over: the slot runs again, as the overlap policy lets it. */
  #retryDue(pending: PendingRetry): void {
    // A pause being written to the store: the retry waits for its answer (`pause()`).
    if (this.#operations?.asking === 'pause') {
      pending.due = true;
      return;
    }
    this.#retries!.delete(pending);
    const { failed } = pending;
    if (!this.#retrying()) return this.#slotFailed(failed);
    const retry = {
      attempt: failed.attempt + 1,
      armsNext: failed.armsNext && !failed.replaced,
      of: failed.slotOrigin,
    };
    const run = new Run(this, failed.scheduledAt, failed.slot, 'retry', undefined, retry);
    if (this.#startRun(run) === undefined) this.#slotFailed(failed, false);
  }

  /** Cancels the retries waiting: their slots have failed (a stop, a pause, a lost lease, `stopPrevious`). */
  #cancelRetries(): void {
    const retries = this.#retries;
    if (retries === undefined || retries.size === 0) return;
    for (const pending of retries) pending.timer.cancel();
    const cancelled = [...retries];
    retries.clear();
    for (const { failed } of cancelled) this.#slotFailed(failed);
  }

  /**
   * The slot of `failed` has failed for good: counted once; in shifted mode, the next tick comes `every` from
   * now (unless the tick that started nothing armed it already: `arm` false).
   */
  #slotFailed(failed: Run, arm = true): void {
    // Counted here, not by the stores: the record of its last run said a retry would follow.
    countOutcome(this.#recorded(), 'fail', Date.now());
    this.#failedInARow();
    if (this.#incidentSettings !== false) this.#slotEnded(false, failed);
    // A lease being handed over waited for this retry.
    this.#fleet?.lease.idle();
    if (
      arm &&
      failed.armsNext &&
      !failed.replaced &&
      this.options.delayMode === 'shifted' &&
      this.#phase === 'ticking'
    ) {
      this.#armNext(this.options.every);
    }
  }

  /** `pauseAfterFailures`: a slot failed; the job is paused when it was the n-th in a row (2n-th after a resume…). */
  #failedInARow(): void {
    const limit = this.options.policy?.pauseAfterFailures;
    if (limit === undefined || limit === Infinity) return;
    if (this.#record!.consecutiveFailures % limit !== 0 || this.state !== 'ticking') return;
    const note =
      `${limit} slot${limit === 1 ? '' : 's'} in a row failed after their retries (pauseAfterFailures: ${limit}); ` +
      'resume the job to run it again';
    void this.pause({ by: PAUSED_BY, note }).catch(() => undefined);
  }

  // ---- Incidents ----

  /** The job's incidents (with incidents on): made when first needed. */
  get #incidents(): JobIncidents | undefined {
    const settings = this.#incidentSettings;
    if (settings === false) return undefined;
    // The scheduler is the IncidentJob its incidents ask, checked here (its methods for it are internal).
    return (this.#madeIncidents ??= new JobIncidents(
      this satisfies IncidentJob,
      settings,
      fleetIncidentsOf(this.#fleet?.lease.replica),
    ));
  }

  // What the job's incidents ask of it (IncidentJob, incidents.ts): internal, as those of its operations are.

  /** @internal The replica's name, as the audit trail says who opened an incident. */
  get replicaName(): string {
    return this.#shared.replica;
  }

  /** @internal How many entries the job's audit trail keeps. */
  get auditKeep(): number {
    return keptBy(this.#shared.settings);
  }

  /** @internal The oldest run in flight here. */
  oldestRun(): { jobId: number; startedWall: number; startedAt: number } | undefined {
    const runs = this.#runs;
    const oldest = Array.isArray(runs) ? runs[0] : runs;
    return oldest && { jobId: oldest.jobId, startedWall: oldest.startedWall, startedAt: oldest.startedAt };
  }

  /** @internal An incident opened or closed here, for a job whose audit trail is this process's. */
  recordHere(operation: PeriodicOperation): void {
    this.#operated().recordHere(operation);
  }

  /** @internal The event `incident`. */
  incidentOpened({ kind, since, detail }: PeriodicIncidentRecord): void {
    if (this.#wants('incident'))
      this.#emit({ type: 'incident', name: this.name, kind, since: new Date(since), detail });
  }

  /** @internal The event `recovered`. */
  incidentClosed({ kind, since }: PeriodicIncidentRecord, durationMs: number): void {
    if (this.#wants('recovered')) {
      this.#emit({ type: 'recovered', name: this.name, kind, since: new Date(since), durationMs });
    }
  }

  /** @internal The last run's error, or its exit reason, in words (as the module's `errors` allows). */
  lastError(): string {
    const record = this.#record!;
    const error = record.lastError;
    if (error === undefined) return `the run ended '${record.lastReason}'`;
    const { name, message } = errorOf(error.value, this.#shared.errors);
    return message === '' ? name : `${name}: ${message}`;
  }

  /** @internal Whether the slot may still be late: the job is due to run it, and this replica did not claim it. */
  lateUnseen(slot: number): boolean {
    return (
      this.#phase === 'ticking' && this.#open && !this.#completed && (this.#fleet?.lastClaimed ?? 0) < slot
    );
  }

  /** @internal When the store last answered again after it did not (wall clock); 0 if it never stopped. */
  storeBackAt(): number {
    return this.storeLog?.backAt ?? 0;
  }

  /** @internal Whether this replica held the job's lease when its store stopped answering, or holds it still. */
  heldAtOutage(): boolean {
    const log = this.storeLog;
    return this.#fleet?.lease.held === true || (log?.reachable === false && this.#leaseLostAt >= log.since);
  }

  /** An exclusive job's slot came: the fleet's watch looks `lateAfter` after it whether some replica started it. */
  #watchSlot(fleet: FleetSlots, slot: number): void {
    const settings = this.#incidentSettings;
    const { replica } = fleet.lease;
    if (replica.calls.store.reachable) this.#madeIncidents?.storeAnswers();
    if (settings === false || (!fleet.lease.held && !replica.watchesSlotsOf(this.name))) return;
    const watch = fleetIncidentsOf(replica);
    if (watch === undefined) return;
    watch.watch(this.#incidents!, slot, settings.lateAfter);
  }

  /**
   * The slot of `run` ended for good, well or not. A run that is no slot's (a trigger, a manual tick) counts from
   * its start; one that started in the millisecond an incident opened started after what opened it.
   */
  #slotEnded(ok: boolean, run: Run): void {
    // A job of this process alone that has only run well has nothing to count: its incidents are made with its
    // first failure (or hung or late run), so that a healthy job costs none.
    if (ok && this.#madeIncidents === undefined && this.#fleet === undefined) return;
    this.#incidents!.slotEnded(ok, slotOf(run) ?? run.startedWall + 0.5);
  }

  /**
   * Reports the slots a late tick dropped; a replica without the lease reports nothing of the job but its next
   * tick. Returns false when a listener stopped the scheduler (or removed the job).
   */
  #slotsDropped(count: number): boolean {
    // A paused job drops its ticks on purpose.
    if (this.#fleet?.lease.held !== false && this.#open) this.#missed(count);
    return this.#phase === 'ticking';
  }

  #missed(count: number): void {
    this.#recorded().missed += count;
    if (this.#wants('missed')) this.#emit({ type: 'missed', name: this.name, count });
  }

  // ---- When the next tick comes ----

  /** The first tick: `initialDelay` from now, or the calendar's next slot. */
  #armFirst(): void {
    const calendar = this.#calendar;
    if (calendar === undefined) return this.#armNext(this.options.initialDelay);
    const slot = calendar.next(Date.now());
    const policy = this.options.policy;
    // The slot of an exclusive job's `at` that passed before it started: the fleet's schedule says if it ran.
    if (slot === null && policy !== undefined && this.#fleet !== undefined && !Number.isNaN(policy.at)) {
      return this.#aim(policy.at, Date.now());
    }
    this.#armSlot(policy === undefined || slot === null ? slot : policy.first(slot, this.#gridFrom(slot)));
  }

  /**
   * Arms the next tick `delay` ms from now (the first tick, shifted mode); manual mode only reports it. An
   * exclusive job's fleet learns it: in shifted mode the fleet's next tick is due `every` after the end of its
   * last run, wherever it ran.
   */
  #armNext(delay: number): void {
    const policy = this.options.policy;
    if (policy !== undefined && this.options.mode === 'auto') {
      const wallNow = Date.now();
      const slot = policy.first(wallNow + delay, this.#gridFrom(wallNow + delay));
      if (slot === null) return this.#complete();
      delay = slot - wallNow;
    }
    if (this.options.mode === 'auto') {
      this.#slot = Date.now() + delay;
      armAt(this, now() + delay);
      this.#fleet?.ranUntil(this.#slot);
      this.#fleet?.armed(this.#slot, now() + delay);
    }
    this.#reportNext(delay);
  }

  /** A cron job's next slot: armed in auto mode, reported with `nextTick` in both modes. */
  #armSlot(slot: number | null): void {
    // No next slot (croner looks up to the year 3000; a policy ended the job's slots): the job has completed.
    if (slot === null) return this.#complete();
    const wallNow = Date.now();
    if (this.options.mode === 'auto') this.#aim(slot, wallNow);
    this.#reportNext(slot - wallNow, slot);
  }

  /**
   * Auto mode: aims the timer at `slot` (wall-clock ms) from `wallNow`. A cron job's timer looks at the wall clock
   * again at least every {@link WALL_CHECK} ms on Node's own timers.
   */
  #aim(slot: number, wallNow: number): void {
    this.#slot = slot;
    // A slot that has passed (the fleet's, taken over): its tick comes at once, late on purpose.
    this.#aimedPast = slot < wallNow;
    let deadline = slot - wallLead();
    this.#fleet?.armed(slot, deadline);
    if (this.#calendar !== undefined) {
      if (underFakeTimers()) watchSystemTime(this);
      else deadline = Math.min(deadline, now() + WALL_CHECK);
    }
    armAt(this, deadline);
  }

  /** @internal A test set the wall clock: a cron job's timer aims at its slot again. */
  systemTimeSet(): void {
    if (isArmed(this)) this.#aim(this.#slot, Date.now());
  }

  /** @internal The slot after `slot` on the job's grid, or its calendar's, that its policies let it tick at; 0 if none. */
  slotAfter(slot: number): number {
    return this.#nextAllowed(slot) ?? 0;
  }

  /** The slot after `slot` that the job ticks at, or null if none is left. */
  #nextAllowed(slot: number): number | null {
    const calendar = this.#calendar;
    const next = calendar === undefined ? slot + this.options.every : calendar.next(slot);
    const policy = this.options.policy;
    return policy === undefined || next === null ? next : policy.first(next, this.#gridFrom(slot));
  }

  /** The first slot at or after an instant, on the grid through `anchor` (an `every` job), or on the calendar. */
  #gridFrom(anchor: number): SlotFrom {
    const calendar = this.#calendar;
    if (calendar !== undefined) return (time) => calendar.next(time - 1);
    const { every } = this.options;
    return (time) => anchor + Math.ceil((time - anchor) / every) * every;
  }

  /** `in`: the nominal delay; `at`: a cron job's next slot. */
  #reportNext(delay: number, at?: number): void {
    if (!this.#wants('nextTick')) return;
    const { name } = this;
    this.#emit(
      at === undefined ? { type: 'nextTick', name, in: delay } : { type: 'nextTick', name, in: delay, at },
    );
  }

  // ---- The lease of an exclusive job ----

  /** The replica of a job given none: its own, which reports a store that lost the fleet's records as its event. */
  #ownReplica(coordinator: PeriodicCoordinator): Replica {
    const replica = new Replica(new StoreLog(coordinator));
    replica.onStoreReset = (lost) => {
      if (this.#wants('storeReset')) this.#emit({ type: 'storeReset', lost });
    };
    return replica;
  }

  /** @internal This replica now holds the job's lease: it continues the fleet's schedule. */
  leaseAcquired(fencingToken: number, stored: PeriodicFleetSchedule | null): void {
    if (this.#incidentSettings !== false) {
      this.#incidents!.holding();
      // The fleet's open incidents, read again now (one read for the leases taken together): the first good
      // slots here may close one.
      this.#incidents!.fleet?.refresh();
    }
    if (this.#wants('leaseAcquired')) this.#emit({ type: 'leaseAcquired', name: this.name, fencingToken });
    if (this.options.mode !== 'auto' || this.#phase !== 'ticking') return;
    const wallNow = Date.now();
    // The first lease of this process: its runs are numbered above those this replica's name recorded before
    // (a replica restarted under the same name), read from the history with the recovery's read.
    // Every lease taken looks for runs in flight that lost their replica.
    const recorded = this.#shared.settings !== false && this.fleetReplica !== undefined;
    const numbering = this.#numbered === false && recorded;
    if (this.options.delivery === 'atLeastOnce' || numbering) {
      // A recovery comes before the next claim, and so do the jobIds a first run is numbered above.
      const recovering = this.#recover(fencingToken, stored, numbering, wallNow)
        .catch(() => undefined)
        .finally(() => {
          if (this.#recovering === recovering) this.#recovering = undefined;
        });
      this.#recovering = recovering;
    } else if (recorded) {
      // Closing another holding's runs delays no claim.
      void this.#recover(fencingToken, stored, false, wallNow).catch(() => undefined);
    }
    const fleet = this.#fleet!;
    const next = fleet.takeOver(stored, this.#slot, wallNow);
    const { backfill } = fleet;
    if (backfill !== undefined) {
      this.#backfill = new Backfill(backfill.next, backfill.to, undefined);
      this.#backfillSoon();
    }
    // No slot is left: the calendar's are over, or the fleet has run `maxRuns` of them.
    if (next === 0 || fleet.runs >= (this.options.policy?.maxRuns ?? Infinity)) return this.#complete();
    if (next === undefined) return;
    // The next tick is the fleet's; one that has passed is ticked at once, and reports its own next tick then.
    this.#aim(next, wallNow);
    if (next > wallNow) this.#reportNext(next - wallNow, this.#calendar === undefined ? undefined : next);
  }

  /** @internal Runs in flight, retries waiting, or a claim pending: a lease handed over waits for them. */
  get busy(): boolean {
    return this.#runs !== undefined || this.#pending?.claim === true || (this.#retries?.size ?? 0) > 0;
  }

  /** @internal Whether the job keeps a pause of its own, which each heartbeat must set right. */
  get heedsPause(): boolean {
    return this.#operations !== undefined;
  }

  /**
   * @internal Whether the fleet has paused the job, as a heartbeat of this replica found it: what `state` says
   * on every replica, within a heartbeat. One sent before this replica's own pause or resume was written is
   * older news.
   */
  fleetPaused(paused: boolean, sent: number): void {
    if (paused) this.#operated().heard(paused, sent);
    else this.#operations?.heard(paused, sent);
  }

  /** @internal The lease is about to be handed over: a slot claimed and not started goes back to the fleet. */
  givingUp(): Promise<void> {
    return this.#fleet!.giveBack();
  }

  /** @internal This replica no longer holds the job's lease: its runs are stopped (`'leaseLost'`). */
  leaseLost(reason: string): void {
    this.#leaseLostAt = Date.now();
    if (this.#wants('leaseLost')) this.#emit({ type: 'leaseLost', name: this.name, reason });
    // The store keeps where a backfill stands: the next holder goes on from there.
    this.#backfill = undefined;
    this.#cancelRetries();
    for (const run of this.#inFlight()) run.stop('leaseLost');
  }

  // ---- What can be done with a scheduler ----

  /** Starts ticking: the first tick comes `initialDelay` ms from now (auto mode). Idempotent. */
  start(): void {
    if (this.#phase === 'ticking') return;
    if (this.#phase === 'stopped') {
      throw new PeriodicConfigError(
        `job "${this.name}" was stopped and cannot start again; create a new PeriodicScheduler instead`,
      );
    }
    this.#phase = 'ticking';
    this.#fleet?.lease.start();
    this.#armFirst();
  }

  /**
   * Stops ticking, stops every run (`'shutdown'`, grace `jobShutdown`) and resolves once each has settled
   * or been abandoned, and a lease this replica holds has been released. Idempotent: every call returns the
   * same promise.
   */
  stop(): Promise<void> {
    const stopping = this.#drain();
    if (!stopping.stopsRuns) {
      stopping.stopsRuns = true;
      for (const run of this.#inFlight()) run.stop('shutdown');
    }
    return stopping.stopped;
  }

  /**
   * @internal Stops ticking, lets the runs in flight end by themselves, and resolves once they have, and a lease
   * this replica holds has been released: a stored schedule whose definition changed, whose runs end with the
   * one they started with. `stop()` meanwhile stops them.
   */
  retire(): Promise<void> {
    return this.#drain().stopped;
  }

  /** Stops ticking, and waits for the last run to end before the lease is released. */
  #drain(): Stopping {
    if (this.#stopping === undefined) {
      this.halt();
      let drained: Promise<void>;
      let resolve: (() => void) | undefined;
      if (this.running === 0) drained = Promise.resolve();
      else drained = new Promise((settled) => (resolve = settled));
      const fleet = this.#fleet;
      const stopped = fleet === undefined ? drained : drained.then(() => fleet.release());
      this.#stopping = { stopped, drained: resolve, stopsRuns: false };
    }
    return this.#stopping;
  }

  /**
   * @internal Stops ticking for good: no tick starts anything any more, while the runs in flight go on until
   * `stop()`. An application that begins to close halts every job at once, and drains each in its turn.
   */
  halt(): void {
    if (this.#phase === 'stopped') return;
    this.#phase = 'stopped';
    cancel(this);
    if (this.#calendar !== undefined) {
      unwatchSystemTime(this);
      this.#calendar.release();
    }
    this.#pending?.jitter?.cancel();
    this.#backlog = undefined;
    this.#backfill = undefined;
    this.#cancelRetries();
    this.#madeIncidents?.stop();
    // The lease is renewed while runs drain, so that no other replica starts the job meanwhile.
    this.#fleet?.lease.retire();
  }

  // ---- Backfill ----

  /**
   * Runs every slot of the job's grid in `[from, to)` that its policies let it tick at, oldest first, one at a
   * time, after its own due slots, as runs with `origin: 'backfill'` (docs/policies.md). An exclusive job's run on
   * the holder, whichever replica is asked, and the next holder goes on where a handover left them. Resolves the
   * number of slots; more than 10,000, a backfill under way, or a job that is not ticking is a
   * {@link PeriodicConfigError}. Audited with `by` and `note`.
   */
  async backfill(options: PeriodicBackfillOptions): Promise<{ slots: number }> {
    const where = `backfill() of job "${this.name}"`;
    const { from, to, operation: asked } = checkBackfill(where, options);
    const recorded = operation(this.name, 'backfill', asked, this.#shared.replica);
    const carrier = this.#carrier;
    const result =
      carrier === undefined
        ? await this.#startBackfill({ from, to, note: recorded.note })
        : await askHolderToBackfill(
            carrier,
            { ...recorded, name: this.name },
            { from, to, note: recorded.note },
          );
    if (!result.ok) throw this.#backfillRefused(where, result.error, from, to);
    void this.#operated()
      .record(recorded)
      .catch(() => undefined);
    return { slots: result.jobId };
  }

  /**
   * Drops the slots of the backfill under way that have not started (for the fleet, on an exclusive job); the run
   * in flight goes on. Resolves how many were dropped, 0 when no backfill was under way.
   */
  async cancelBackfill(options?: PeriodicOperationOptions): Promise<number> {
    const recorded = operation(this.name, 'cancelBackfill', options, this.#shared.replica);
    const carrier = this.#carrier;
    const result =
      carrier === undefined
        ? await this.#cancelBackfill()
        : await askHolderToBackfill(carrier, { ...recorded, name: this.name }, 'cancel');
    if (!result.ok) throw this.#backfillRefused(`cancelBackfill() of job "${this.name}"`, result.error);
    if (result.jobId > 0) {
      void this.#operated()
        .record(recorded)
        .catch(() => undefined);
    }
    return result.jobId;
  }

  /**
   * @internal A backfill under way: the next slot it runs from, its end, and how many slots are left (undefined
   * on a holder that took it over, which did not count them).
   */
  get backfillState(): { next: number; to: number; left: number | undefined } | undefined {
    const backfill = this.#backfill;
    if (backfill === undefined) return undefined;
    return { next: backfill.next, to: backfill.to, left: backfill.left };
  }

  /** Starts a backfill here; answers as a trigger does, `jobId` the number of slots. */
  async #startBackfill({
    from,
    to,
  }: {
    from: number;
    to: number;
    note: string | null;
  }): Promise<HolderAnswer> {
    // A paused or completed job takes a backfill: it runs once the job is resumed, or at once.
    const refused = () => {
      const refusal = this.#refuseTick();
      if (refusal !== undefined && refusal.error !== 'completed' && refusal.error !== 'paused')
        return refusal;
      return this.#backfill === undefined ? undefined : { ok: false as const, error: 'backfillUnderWay' };
    };
    const before = refused();
    if (before !== undefined) return before;
    const slots = await this.#countSlots(from, to);
    if (slots === 'tooLong') return { ok: false, error: 'tooLong' };
    if (slots > BACKFILL_MAX) return { ok: false, error: 'tooManySlots' };
    // The count gave the event loop turns: the lease may have gone to another replica (which the asker then
    // asks), another backfill come, or the job stopped.
    const after = refused();
    if (after !== undefined) return after;
    if (slots > 0) {
      const backfill = new Backfill(from, to, slots);
      this.#backfill = backfill;
      void this.#fleet?.backfilled(backfill);
      this.#backfillSoon();
    }
    return { ok: true, jobId: slots };
  }

  async #cancelBackfill(): Promise<HolderAnswer> {
    const backfill = this.#backfill;
    if (backfill === undefined) return { ok: true, jobId: 0 };
    this.#backfill = undefined;
    void this.#fleet?.backfilled(undefined);
    const left = backfill.left ?? (await this.#countSlots(backfill.next, backfill.to));
    return { ok: true, jobId: left === 'tooLong' ? BACKFILL_GRID_MAX : left };
  }

  /** The slots of the job's grid in `[from, to)` that a backfill runs, or `'tooLong'` (see {@link countSlots}). */
  #countSlots(from: number, to: number): Promise<number | 'tooLong'> {
    return countSlots(this.#backfillGrid, from, to, this.#search());
  }

  /** The job's grid as a backfill looks through it. */
  get #backfillGrid(): BackfillGrid {
    const policy = this.options.policy;
    return {
      first: (time) => this.#firstAt(time, false),
      excluded: (slot) => policy?.asksAtTick === true && policy.excludes(slot),
    };
  }

  /** A search of a backfill's slots: it gives the event loop turns, but under a test's fake timers. */
  #search(): Search {
    return {
      turn: underFakeTimers() ? undefined : () => new Promise((resolve) => setImmediate(resolve)),
      looked: 0,
    };
  }

  /** Why a backfill was refused, as the error its caller gets. */
  #backfillRefused(where: string, error: string, from?: number, to?: number): Error {
    const range =
      from === undefined ? '' : ` [${new Date(from).toISOString()}, ${new Date(to!).toISOString()})`;
    if (error === 'tooManySlots') {
      return new PeriodicConfigError(
        `${where}: the range${range} has more than ${BACKFILL_MAX} slots of the job's schedule; backfill it in ` +
          'parts, one after the other',
      );
    }
    if (error === 'tooLong') {
      return new PeriodicConfigError(
        `${where}: the range${range} spans more than ${BACKFILL_GRID_MAX} slots of the job's grid, those its ` +
          'policies leave out included; backfill a shorter range',
      );
    }
    if (error === 'backfillUnderWay') {
      return new PeriodicConfigError(
        `${where}: a backfill is under way; wait for it to end, or cancel it first (cancelBackfill)`,
      );
    }
    if (error === 'jobNotStarted') {
      return new PeriodicConfigError(`${where}: the job is not ticking (not started yet, or stopped)`);
    }
    return new PeriodicStoreError(
      `${where}: the holder of the job's lease could not be reached (${error}); nothing was changed, try again`,
    );
  }

  /** The job's first slot at or after `time`: on its grid (through its next slot) or calendar, as its policies let it tick. */
  #firstAt(time: number, asksFunction = true): number | null {
    const from = this.#gridFrom(this.#slot === 0 ? time : this.#slot);
    const slot = from(time);
    const policy = this.options.policy;
    return policy === undefined || slot === null ? slot : policy.first(slot, from, asksFunction);
  }

  /** The next slot of the backfill runs once nothing else of the job is going on (in a later microtask). */
  #backfillSoon(): void {
    void Promise.resolve().then(() => this.#backfillNext());
  }

  /**
   * Starts the next slot of the backfill, if the job is free for it: ticking, not paused, its lease held, with
   * no run in flight, no retry waiting, no catch-up and no tick waiting for its guard or its claim. Each run's end
   * comes back here. One search for the next slot at a time.
   */
  async #backfillNext(): Promise<void> {
    const free = () =>
      this.#backfill !== undefined &&
      this.#phase === 'ticking' &&
      this.#open &&
      this.#fleet?.lease.held !== false &&
      this.#runs === undefined &&
      !this.#retries?.size &&
      this.#backlog === undefined &&
      this.#pending?.guard !== true &&
      this.#pending?.claim !== true;
    if (this.#seeking || !free()) return;
    const backfill = this.#backfill!;
    this.#seeking = true;
    const slot = await nextSlot(this.#backfillGrid, backfill.next, backfill.to, this.#search()).finally(
      () => (this.#seeking = false),
    );
    // Cancelled, or handed over, meanwhile; or something else of the job came first.
    if (this.#backfill !== backfill) return;
    if (slot === null || slot === 'tooLong') {
      this.#backfill = undefined;
      void this.#fleet?.backfilled(undefined);
      return;
    }
    if (!free()) return;
    backfill.next = slot + 1;
    if (backfill.left !== undefined) backfill.left--;
    // The store keeps where the backfill stands as its slot starts: a holder that takes over goes on after it.
    void this.#fleet?.backfilled(backfill);
    const started = this.#passGuard(this.#tickOf(slot, 'backfill'));
    const next = (run: Run | undefined) => {
      if (run === undefined) this.#backfillSoon();
    };
    if (isThenable(started)) void started.then(next);
    else next(started);
  }

  /** Manual mode: performs one tick; resolves once the guard has been evaluated and the run, if any, started. */
  async tick(): Promise<TickResult> {
    if (this.options.mode !== 'manual') return { ok: false, error: 'notInManualMode' };
    return this.#trigger();
  }

  /**
   * Performs one tick now, in either mode, as a manual tick does (guard, overlap policy, events); the grid does
   * not move. Resolves once the guard has been evaluated and the run, if any, started.
   */
  async trigger(options?: PeriodicOperationOptions): Promise<TickResult> {
    const asked = operation(this.name, 'trigger', options, this.#shared.replica);
    const carrier = this.#carrier;
    const result =
      carrier === undefined ? await this.#trigger() : await askHolder(carrier, { ...asked, name: this.name });
    // Recorded once the run has started, beside it: the audit trail never holds a run up, and a trigger that
    // started nothing is not an operation the job underwent.
    if (result.ok) {
      void this.#operated()
        .record(asked)
        .catch(() => undefined);
    }
    return result;
  }

  /**
   * The calls to the store that carry a trigger to the holder: an exclusive job ticking on a replica that does
   * not hold its lease, with a coordinator that carries triggers.
   */
  get #carrier(): StoreCalls | undefined {
    const calls = this.#fleet?.lease.replica.calls;
    if (calls?.triggered !== true || this.#phase !== 'ticking' || this.#fleet!.lease.held) return undefined;
    return calls;
  }

  /** @internal A trigger asked of another replica, taken from the store: carried out here, and answered. */
  carry(request: PeriodicTriggerRequest): void {
    const calls = this.#fleet!.lease.replica.calls;
    const { replica } = this.#shared;
    const { backfill } = request;
    const answered =
      backfill === undefined
        ? this.#trigger()
        : backfill === 'cancel'
          ? this.#cancelBackfill()
          : this.#startBackfill(backfill);
    void answered.then((result) => answerAsker(calls, request, replica, result)).catch(() => undefined);
  }

  async #trigger(): Promise<TickResult> {
    const refusal = this.#refuseTick();
    if (refusal !== undefined) return refusal;
    // The fleet's pause is obeyed before any run: a trigger reads it, as a timer tick's claim does.
    const operations = this.#operated();
    const store = operations.store;
    if (store !== undefined) {
      const paused = await operations.readPause();
      if (paused === undefined) return { ok: false, error: 'storeUnreachable' };
      if (paused) return { ok: false, error: 'paused' };
      // The lease may have been handed over, or the job stopped, meanwhile.
      const now = this.#refuseTick();
      if (now !== undefined) return now;
    }
    const run = await (this.options.mode === 'manual'
      ? this.#manualTick(undefined)
      : this.#takeTick(new Run(this, now(), Date.now(), 'trigger')));
    return run === undefined ? { ok: false, error: 'jobNotStarted' } : { ok: true, jobId: run.jobId };
  }

  /**
   * Manual mode: performs one tick and resolves when the run it started has ended. Rejects with a
   * `PeriodicTimeoutError` when `timeout` ms pass first; the run goes on.
   */
  async syncTick(options: { timeout?: number } = {}): Promise<SyncTickResult> {
    const where = `syncTick() of job "${this.name}"`;
    const given = checkedOptions(where, options, { timeout: RULES.timeout }, '{ timeout: 10_000 }');
    const timeout = (given.timeout as number | undefined) ?? SYNC_TICK_TIMEOUT;
    if (this.options.mode !== 'manual') return { ok: false, error: 'notInManualMode' };
    return this.#refuseTick() ?? this.#runToEnd(timeout);
  }

  /**
   * Ticks start nothing (no guard, no run) until `resume()`; runs in flight go on, and the grid keeps its
   * place. An exclusive job whose coordinator has the steps for it is paused for the whole fleet: resolves once
   * the store has the pause, and rejects if it could not be written (then nothing changed). Otherwise the
   * pause is this process's, at once. Recorded in the audit trail, and emitted as `operated`.
   */
  async pause(options?: PeriodicOperationOptions): Promise<void> {
    return this.#operated().pause(operation(this.name, 'pause', options, this.#shared.replica));
  }

  /**
   * Ticks start runs again: the next is the next slot of the grid; in shifted mode, `every` from now. For the
   * fleet, as `pause()` paused it.
   */
  async resume(options?: PeriodicOperationOptions): Promise<void> {
    return this.#operated().resume(operation(this.name, 'resume', options, this.#shared.replica));
  }

  /** The job's audit trail: the latest `limit` (default 50) of its pauses, resumes and triggers, newest first. */
  audit(options?: { limit?: number }): Promise<PeriodicAuditEntry[]> {
    return this.#operated().audit(options);
  }

  /** The job's operations, made when first needed: most jobs are never paused, triggered or audited. */
  #operated(): JobOperations {
    // The scheduler is the OperatedJob its operations report to, checked here: its methods for that are
    // internal, so the published declarations cannot say `implements` (they would not hold without them).
    let operations = this.#operations;
    if (operations === undefined) {
      const lease = this.#fleet?.lease;
      operations = this.#operations = new JobOperations(
        this satisfies OperatedJob,
        lease?.replica.calls,
        keptBy(this.#shared.settings),
      );
      lease?.replica.heedPause(lease);
    }
    return operations;
  }

  /** Whether a tick may start a run, as far as a pause goes. */
  get #open(): boolean {
    return this.#operations?.open ?? true;
  }

  // What the job's operations report back (OperatedJob): what a pause and a resume do to its ticks and retries.

  /** @internal The job is paused from now on: the retries waiting fail. */
  pauseTaken(): void {
    this.#cancelRetries();
  }

  /** @internal The fleet's store has the pause or the resume: the fleet's schedule takes it from there. */
  operationWritten(): void {
    this.#fleet?.operated();
  }

  /** @internal The store answered a pause: a retry whose wait ended meanwhile runs now, unless it was written. */
  pauseAnswered(): void {
    for (const pending of [...(this.#retries ?? [])]) if (pending.due) this.#retryDue(pending);
  }

  /** @internal The job runs again: a shifted job's next tick comes `every` from now (with a run in flight: when it ends). */
  resumeTaken(wasPaused: boolean): void {
    if (wasPaused && this.options.delayMode === 'shifted' && isArmed(this)) this.#armNext(this.options.every);
    if (this.#backfill !== undefined) this.#backfillSoon();
  }

  /** @internal An operation was recorded: the event `operated`. */
  operationRecorded(asked: PeriodicOperation): void {
    if (this.#wants('operated')) this.#emit(operatedEvent(this.name, asked));
  }

  /** @internal Whether the job records its runs: the module's `history` is not false. */
  get recordsRuns(): boolean {
    return this.#shared.settings !== false;
  }

  /** @internal What a run's error shows, in the history and wherever else it is shown (the dashboard). */
  get errorsShown(): 'message' | 'name' {
    return this.#shared.errors;
  }

  /**
   * The job's latest runs, newest first by start, a run in flight included: the fleet's for an exclusive job
   * whose coordinator keeps them, this process's otherwise. `limit` 1 to 10,000 (default 50; above
   * `history.keep`, what is kept); `before`: only runs started before it.
   */
  history(options?: { limit?: number; before?: Date }): Promise<PeriodicRunRecord[]> {
    return this.#history.read(options);
  }

  /**
   * The job as the fleet sees it: for an exclusive job, read from the store (holder, pause, slots, last run,
   * failures across the fleet); what the store does not answer within `leaseMs / 3` is what this replica knows,
   * with `store.reachable` false. A job that is not exclusive is this process's alone.
   */
  async fleetStatus(): Promise<PeriodicFleetStatus> {
    const [status] = await fleetStatusAll([this]);
    return status;
  }

  /** @internal The fleet status from what the store answered of the job, or undefined if it did not. */
  fleetStatusFrom(read: PeriodicFleetRead | undefined): PeriodicFleetStatus {
    return fleetStatusOf(this.#localView(), read, this.storeLog);
  }

  /** @internal The replica whose store tells the fleet's state of the job, if one does. */
  get fleetReplica(): Replica | undefined {
    return historyReplica(this.#fleet?.lease.replica);
  }

  /** What this replica knows of the job, for what the store does not tell. */
  #localView(): LocalView {
    const lease = this.#fleet?.lease;
    const record = this.#record;
    const succeeded = record?.lastSucceededAt;
    const { replica } = this.#shared;
    return {
      name: this.name,
      holder:
        lease?.held === true
          ? { replica, fencingToken: lease.fencingToken, until: Date.now() + (lease.validUntil - now()) }
          : null,
      pause: this.state === 'paused' ? this.#operated().pauseOf(replica) : null,
      lastRun: this.#madeHistory?.last ?? null,
      lastSucceededAt: succeeded === undefined || Number.isNaN(succeeded) ? null : succeeded,
      consecutiveFailures: record?.consecutiveFailures ?? 0,
      incidents: this.openIncidents,
    };
  }

  /** @internal The job's open incidents, as this replica knows them (see `PeriodicFleetStatus.incidents`). */
  get openIncidents(): PeriodicIncident[] {
    if (this.#incidentSettings === false) return [];
    if (this.#madeIncidents !== undefined) return this.#madeIncidents.list();
    const open = fleetIncidentsOf(this.#fleet?.lease.replica)?.openOf(this.name);
    return open === undefined ? [] : incidentList(open);
  }

  /** What the job is doing, and what it did last. */
  status(): PeriodicJobStatus {
    const ticking = this.state === 'ticking' && isArmed(this);
    const lease = this.#fleet?.lease;
    return statusOf(
      {
        options: this.options,
        state: this.state,
        running: this.running,
        nextSlot: ticking && !this.#ending ? this.#slot : 0,
        lease,
        store: this.storeLog,
      },
      this.#record,
    );
  }

  /**
   * @internal Auto mode: whether a tick has been due for more than two intervals and has not come, as when its
   * timer died, or has waited that long for its guard. A shifted job with a run in flight is not due.
   */
  get overdue(): boolean {
    if (this.state !== 'ticking' || this.options.mode !== 'auto' || this.#ending) return false;
    const interval = this.#interval();
    if (interval === undefined) return false;
    // A tick stuck on its guard (or its claim): the ticks after it come, and are all missed.
    const pending = this.#pending;
    if (pending !== undefined && (pending.guard || pending.claim) && now() - pending.since > 2 * interval) {
      return true;
    }
    if (this.options.delayMode === 'shifted' && (this.running > 0 || this.#retries?.size)) return false;
    const lateness = this.#calendar === undefined ? now() - this.deadline : Date.now() - this.#slot;
    return lateness > 2 * interval;
  }

  /**
   * @internal An exclusive job in auto mode whose fleet's next slot, `next` (wall-clock ms; 0 while a shifted run
   * is in flight), had been due for more than two intervals when the store was read, at `readAt` (wall-clock
   * ms): no replica handled it.
   */
  fleetOverdue(next: number, readAt: number): boolean {
    if (this.#fleet === undefined || this.options.mode !== 'auto' || this.state !== 'ticking' || next === 0) {
      return false;
    }
    const after = this.slotAfter(next);
    const interval = this.#calendar === undefined ? this.options.every : after - next;
    return after !== 0 && readAt - next > 2 * interval;
  }

  /** @internal The store's failures and answers as this replica sees them, for an exclusive job. */
  get storeLog(): StoreLog | undefined {
    return this.#fleet?.lease.replica.calls.store;
  }

  /** The interval at the current slot (a calendar's gap there), or undefined when no slot comes after it. */
  #interval(): number | undefined {
    if (this.#calendar === undefined) return this.options.every;
    const next = this.#calendar.next(this.#slot);
    return next === null ? undefined : next - this.#slot;
  }

  /** Manual mode: a tick asked for by `tick`, `syncTick` or `trigger`; it reports the next tick, as a timer tick would. */
  async #manualTick(waiter: Run['waiter']): Promise<Run | undefined> {
    if (this.#calendar !== undefined) this.#armSlot(this.#calendar.next(Date.now()));
    else if (this.options.delayMode === 'regular') this.#reportNext(this.options.every);
    return this.#takeTick(new Run(this, now(), Date.now(), 'manual', waiter));
  }

  /**
   * Performs a manual tick and resolves with how the run it started ended. Rejects with a
   * {@link PeriodicTimeoutError} when `timeout` ms pass first, saying what is still pending; the run goes on.
   */
  #runToEnd(timeout: number): Promise<SyncTickResult> {
    return new Promise((resolve, reject) => {
      let run: Run | undefined;
      const timer = new DeadlineTimer({ onDeadline: () => reject(this.#gaveUp(timeout, run)) });
      if (timeout !== Infinity) timer.armAt(now() + timeout);
      const waiter = (outcome: RunOutcome) => {
        timer.cancel();
        resolve({ ok: true, ...outcome });
      };
      this.#manualTick(waiter).then((started) => {
        run = started;
        if (started === undefined) {
          timer.cancel();
          resolve({ ok: false, error: 'jobNotStarted' });
        }
      }, reject);
    });
  }

  #gaveUp(timeout: number, run: Run | undefined): PeriodicTimeoutError {
    const what =
      run === undefined
        ? 'its guard is still pending. Make the guard settle sooner'
        : `run #${run.jobId} is still running and goes on. Make the run settle sooner (does it honour ctx.signal?)`;
    return new PeriodicTimeoutError(
      `syncTick() of job "${this.name}" gave up after ${timeout}ms: ${what} or pass a larger { timeout }.`,
    );
  }

  /** Why a tick asked for now would start nothing, if it is known before the tick. */
  #refuseTick(): Extract<SyncTickResult, { ok: false }> | undefined {
    if (this.#phase !== 'ticking') return { ok: false, error: 'jobNotStarted' };
    if (this.#completed) return { ok: false, error: 'completed' };
    if (this.#operations?.paused) return { ok: false, error: 'paused' };
    if (this.#fleet?.lease.held === false) return { ok: false, error: 'notLeaseHolder' };
    return undefined;
  }

  #recorded(): JobRecord {
    return (this.#record ??= new JobRecord());
  }

  // ---- Events ----

  /** Whether the sink wants events of `type` (for `finished`, of a run that ended with `reason`). */
  #wants(type: PeriodicEventType, reason?: JobExitReason): boolean {
    const { sink } = this.#shared;
    if (sink?.wants === undefined) return sink !== undefined;
    try {
      return sink.wants(type, reason);
    } catch (error) {
      this.#sinkFailed(type, error);
      return false;
    }
  }

  #emit(event: PeriodicEvent): void {
    try {
      this.#shared.sink?.emit(event);
    } catch (error) {
      this.#sinkFailed(event.type, error);
    }
  }

  /** A sink that throws disturbs nothing: its error is reported as a process warning. */
  #sinkFailed(type: PeriodicEventType, error: unknown): void {
    const detail = isError(error) ? (error.stack ?? error.message) : describeValue(error);
    process.emitWarning(`the event sink of job "${this.name}" threw on "${type}": ${detail}`, {
      code: 'PERIODIC_EVENT_SINK',
    });
  }
}
