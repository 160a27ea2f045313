// One job's run history as its scheduler writes and reads it (docs/operations.md, "Run history"): a record when a
// run starts and when it ends, sent to the fleet's store for an exclusive job whose coordinator keeps one and kept
// in this process's memory otherwise; read back by `history()`; and, when this replica takes the job's lease, the
// runs that a replica which died left in flight, closed so that none reads as running for ever.
import type { PeriodicRunEntry } from './coordinator-port.js';
import { storeRead } from './errors.js';
import type { JobExitReason } from './events.js';
import {
  errorOf,
  finish,
  HISTORY_DEFAULTS,
  type HistorySettings,
  historyQuery,
  type PeriodicRunRecord,
  runRecord,
} from './history.js';
import type { ResolvedPeriodicOptions } from './options.js';
import type { Replica } from './replica.js';
import type { Run } from './run.js';
import { RunRing } from './run-ring.js';

/** The error a run left in flight by a replica that died is closed with. */
const REPLICA_LOST = 'PeriodicReplicaLost';

/** How an application records its runs: one object for all the jobs that share its settings (`recordingOf`). */
export interface RunRecording {
  /** This replica's name, as the records show it. */
  readonly replica: string;
  /** How runs are recorded; false: not at all. */
  readonly settings: HistorySettings;
  /** What a run's error becomes wherever it leaves the run (the history, fleet status, the dashboard). */
  readonly errors: 'message' | 'name';
}

/** The recordings made so far, by settings (an application's jobs share one object), then errors and replica. */
const RECORDINGS = new WeakMap<object, Map<string, RunRecording>>();
const NO_HISTORY = {};

/** The recording of these settings: the same object for every job that has them, so that a job adds nothing. */
export function recordingOf(
  replica: string,
  settings: HistorySettings,
  errors: 'message' | 'name',
): RunRecording {
  const key = settings === false ? NO_HISTORY : settings;
  let made = RECORDINGS.get(key);
  if (made === undefined) RECORDINGS.set(key, (made = new Map()));
  const named = `${errors}\n${replica}`;
  let recording = made.get(named);
  if (recording === undefined) made.set(named, (recording = { replica, settings, errors }));
  return recording;
}

/** How many runs, and entries of the audit trail, a job keeps. */
export function keptBy(settings: HistorySettings): number {
  return settings === false ? HISTORY_DEFAULTS.keep : settings.keep;
}

/** The replica whose store keeps an exclusive job's history, when its coordinator keeps one. */
export function historyReplica(leaseReplica: Replica | undefined): Replica | undefined {
  return leaseReplica?.calls.recorded === true ? leaseReplica : undefined;
}

/** A job's history: made with its first run, or when it is first read. */
export class JobHistory {
  /** The runs kept in memory, when the history is not the fleet's: made with the first. */
  #local: RunRing | undefined;
  /** The latest run this replica recorded in the fleet's history: its own last run, while the store is away. */
  #lastRecorded: PeriodicRunEntry | undefined;

  /**
   * @param options the job's options: its name, and whether its records go to the store at once (`promptly`).
   * @param recording how the application records runs.
   * @param leaseReplica the replica through which an exclusive job holds its lease, whose store may keep the
   *   history.
   */
  constructor(
    private readonly options: ResolvedPeriodicOptions,
    private readonly recording: RunRecording,
    private readonly leaseReplica: Replica | undefined,
  ) {}

  get replica(): string {
    return this.recording.replica;
  }

  get settings(): HistorySettings {
    return this.recording.settings;
  }

  get errors(): 'message' | 'name' {
    return this.recording.errors;
  }

  /** The replica whose store keeps the history: an exclusive job's, when its coordinator keeps one. */
  get fleet(): Replica | undefined {
    return historyReplica(this.leaseReplica);
  }

  /** How many runs, and entries of the audit trail, the job keeps. */
  get kept(): number {
    return keptBy(this.settings);
  }

  /**
   * Whether the store takes the job's records at the end of the turn, not with the next claims of its replica: the
   * next holder of an `'atLeastOnce'` job must find the start of a run its holder did not end, and a test that
   * ticks by hand reads the fleet's history once the tick has resolved.
   */
  get #promptly(): boolean {
    return this.options.delivery === 'atLeastOnce' || this.options.mode === 'manual';
  }

  /**
   * Records a run that starts: in the fleet's history, where its record travels with the run, or in memory,
   * where it makes no object.
   */
  started(run: Run): void {
    const { settings } = this;
    if (settings === false) return;
    const slot = run.slotOrigin === 'timer' || run.slotOrigin === 'backfill' ? run.slot : null;
    const origin = run.origin === 'timer' ? 'schedule' : run.origin;
    const fencingToken = run.fencingToken ?? null;
    const fleet = this.fleet;
    if (fleet === undefined) {
      this.#local ??= new RunRing(this.options.name, this.replica, settings.keep);
      this.#local.started(run.jobId, run.startedWall, slot, origin, run.attempt, fencingToken);
      return;
    }
    const entry: PeriodicRunEntry = {
      id: fleet.records.runId(),
      name: this.options.name,
      jobId: run.jobId,
      replica: this.replica,
      fencingToken,
      slot,
      origin,
      attempt: run.attempt,
      startedAt: run.startedWall,
      finishedAt: null,
      reason: null,
      durationMs: null,
      error: null,
    };
    run.record = entry;
    this.#lastRecorded = entry;
    fleet.records.record(entry, settings.keep, this.#promptly);
  }

  /** Records the end of a run: it ended with `reason` after `durationMs`, having thrown `error` if `failed`. */
  ended(
    run: Run,
    reason: JobExitReason,
    durationMs: number,
    failed: boolean,
    error: unknown,
    retrying: boolean,
  ): void {
    const { settings } = this;
    if (settings === false) return;
    const thrown = failed ? errorOf(error, this.errors) : null;
    const entry = run.record;
    if (entry === undefined) {
      this.#local?.ended(run.jobId, reason, durationMs, thrown, retrying);
      return;
    }
    finish(entry, reason, durationMs, thrown, retrying);
    this.fleet?.records.record(entry, settings.keep, this.#promptly);
  }

  /** The latest run this replica knows of: the last in memory, or the last it sent to the fleet's store. */
  get last(): PeriodicRunEntry | null {
    return this.#local?.last ?? this.#lastRecorded ?? null;
  }

  /**
   * The job's latest runs, newest first by start, a run in flight included: the fleet's for an exclusive job
   * whose coordinator keeps them, this process's otherwise (see `PeriodicScheduler.history`).
   */
  async read(query?: { limit?: number; before?: Date }): Promise<PeriodicRunRecord[]> {
    const { name } = this.options;
    const { limit, before } = historyQuery(name, query, this.kept);
    if (this.settings === false) return [];
    const fleet = this.fleet;
    if (fleet === undefined) return (this.#local?.read(limit, before) ?? []).map(runRecord);
    // This replica's own records are sent first: what it ran is in what it reads.
    await fleet.records.flush();
    const entries = await storeRead(name, 'history', fleet.calls.readHistory(name, limit, before, this.kept));
    return entries.map(runRecord);
  }

  /** The latest `count` runs in the fleet's store, or undefined when it did not answer. */
  latest(count: number): Promise<PeriodicRunEntry[] | undefined> {
    return this.fleet!.calls.readHistory(this.options.name, count, null, this.kept).catch(() => undefined);
  }

  /**
   * This replica took the lease with `fencingToken`, having found the last holding expired at `foundAt` (wall
   * clock): each run of `runs` in flight that an earlier holding started, and that no process of this replica's
   * session runs, lost its replica, which can no longer record its end. Its end is recorded here (`'leaseLost'`);
   * `retried` is the one whose slot runs again (`delivery: 'atLeastOnce'`).
   */
  closeLost(
    runs: PeriodicRunEntry[],
    fencingToken: number,
    foundAt: number,
    retried: PeriodicRunEntry | undefined,
  ): void {
    const fleet = this.fleet!;
    const { settings } = this;
    if (settings === false) return;
    for (const run of runs) {
      if (run.reason !== null || (run.fencingToken ?? 0) >= fencingToken || fleet.records.ranHere(run.id))
        continue;
      const message = `replica ${run.replica} stopped renewing its lease`;
      finish(
        run,
        'leaseLost',
        Math.max(0, foundAt - run.startedAt),
        { name: REPLICA_LOST, message: this.errors === 'name' ? '' : message },
        run === retried,
      );
      fleet.records.record(run, settings.keep, true);
    }
  }
}
