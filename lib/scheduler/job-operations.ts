// One job's pause as this replica knows it, and the operations that change it (docs/operations.md): `pause()` and
// `resume()`, for this process or, for an exclusive job whose coordinator has the steps, for the whole fleet
// through its store; the audit trail they are recorded in; and what the store says of the fleet's pause between
// them. What a pause does to the job's ticks and retries is its scheduler's: it is told (`OperatedJob`).
import type { PeriodicOperation } from './coordinator-port.js';
import { now } from './deadline-timer.js';
import { storeRead } from './errors.js';
import { auditEntry, auditLimit, LocalAudit, notRecorded, type PeriodicAuditEntry } from './operations.js';
import type { StoreCalls } from './store-calls.js';

/** How many entries of its audit trail a job looks through for the pause it is under. */
const AUDIT_SCAN = 10;

/** What the operations of a job report to its scheduler. */
export interface OperatedJob {
  readonly name: string;
  /** The job is paused from now on: the retries waiting fail. */
  pauseTaken(): void;
  /** The fleet's store has the pause or the resume: the fleet's schedule takes it from there. */
  operationWritten(): void;
  /** The store answered a pause: a retry whose wait ended meanwhile runs now, unless the pause was written. */
  pauseAnswered(): void;
  /** The job runs again; `wasPaused`: it was paused until now. */
  resumeTaken(wasPaused: boolean): void;
  /** An operation was recorded: the event `operated`. */
  operationRecorded(operation: PeriodicOperation): void;
}

export class JobOperations {
  /** This process's pause: ticks start nothing until `resume()`; the timer keeps the grid. */
  paused = false;
  /**
   * The fleet's pause, as this replica last learnt it (from its own `pause()`, or the store's answer to a claim):
   * what `state` says. The store decides: every tick claims its slot, and a claim of a paused job starts nothing.
   */
  fleetPaused = false;
  /** A pause or resume of this replica on its way to the store: a pause counts from the moment it is asked. */
  asking: 'pause' | 'resume' | undefined;
  /** When this replica's last pause or resume was written, on the `now()` timeline. */
  #writtenAt = -Infinity;
  /** The audit trail, when it is not the fleet's. */
  #audit: LocalAudit | undefined;

  /**
   * @param job the scheduler of the job.
   * @param calls the calls to the store of an exclusive job's replica.
   * @param keep how many entries the audit trail keeps.
   */
  constructor(
    private readonly job: OperatedJob,
    private readonly calls: StoreCalls | undefined,
    private readonly keep: number,
  ) {}

  /**
   * The calls to the coordinator's store, when the job is the fleet's to pause and audit: exclusive, with a
   * coordinator that has the steps for it.
   */
  get store(): StoreCalls | undefined {
    return this.calls?.operated === true ? this.calls : undefined;
  }

  /** Whether a tick may start a run, as far as the pause goes. */
  get open(): boolean {
    return !this.paused && !this.fleetPaused;
  }

  /** Whether a retry may run: a fleet's pause on its way to the store counts once the store has it. */
  get retriesRun(): boolean {
    return !this.paused && !(this.fleetPaused && this.asking !== 'pause');
  }

  /** Pauses the job (see `PeriodicScheduler.pause`). */
  async pause(asked: PeriodicOperation): Promise<void> {
    if (this.store === undefined) {
      this.paused = true;
      this.job.pauseTaken();
      return this.record(asked);
    }
    const before = this.fleetPaused;
    this.fleetPaused = true;
    this.asking = 'pause';
    try {
      await this.record(asked);
      this.#writtenAt = now();
      this.job.operationWritten();
      this.job.pauseTaken();
    } catch (error) {
      this.fleetPaused = before;
      throw error;
    } finally {
      this.asking = undefined;
      this.job.pauseAnswered();
    }
  }

  /** Resumes the job (see `PeriodicScheduler.resume`). */
  async resume(asked: PeriodicOperation): Promise<void> {
    if (this.store === undefined) {
      const paused = this.paused;
      this.paused = false;
      this.job.resumeTaken(paused);
      return this.record(asked);
    }
    this.asking = 'resume';
    await this.record(asked).finally(() => (this.asking = undefined));
    this.#writtenAt = now();
    this.job.operationWritten();
    const paused = this.fleetPaused;
    this.fleetPaused = false;
    this.job.resumeTaken(paused);
  }

  /**
   * Whether the fleet has paused the job, as a heartbeat found it: what `state` says on every replica, within a
   * heartbeat. One sent (`sent`, on the `now()` timeline) before this replica's own pause or resume was written is
   * older news.
   */
  heard(paused: boolean, sent: number): void {
    if (this.asking === undefined && sent > this.#writtenAt) this.fleetPaused = paused;
  }

  /** The store answered a claim of the job's slot: `paused` if the fleet's pause refused it. */
  claimed(paused: boolean): void {
    this.fleetPaused = paused || this.asking === 'pause';
  }

  /**
   * Reads the fleet's pause from the store, as a trigger does before it runs: whether the job is paused, or
   * undefined when the store did not answer.
   */
  async readPause(): Promise<boolean | undefined> {
    const pause = await this.store?.readPause(this.job.name).catch(() => undefined);
    if (pause !== undefined) this.fleetPaused = pause !== null;
    return pause === undefined ? undefined : pause !== null;
  }

  /**
   * Records an operation in the audit trail (the store's, for the fleet: rejects when it is not written), and
   * reports it.
   */
  async record(asked: PeriodicOperation): Promise<void> {
    const store = this.store;
    const { name } = this.job;
    if (store !== undefined) {
      await store
        .operate(name, asked, this.keep)
        .catch((error: unknown) => Promise.reject(notRecorded(name, asked.action, error)));
    } else {
      (this.#audit ??= new LocalAudit(this.keep)).record(asked);
    }
    this.job.operationRecorded(asked);
  }

  /**
   * Records an entry in this process's audit trail alone: an incident a job that is not the fleet's opened or
   * closed (an exclusive job's are written by the store's incident steps).
   */
  recordHere(entry: PeriodicOperation): void {
    if (this.store === undefined) (this.#audit ??= new LocalAudit(this.keep)).record(entry);
  }

  /** The job's audit trail (see `PeriodicScheduler.audit`). */
  async audit(options?: { limit?: number }): Promise<PeriodicAuditEntry[]> {
    const { name } = this.job;
    const limit = auditLimit(name, options, this.keep);
    const store = this.store;
    const entries =
      store !== undefined
        ? await storeRead(name, 'audit', store.readAudit(name, limit))
        : (this.#audit?.latest(limit) ?? []);
    return entries.map((entry) => auditEntry(name, entry));
  }

  /** The pause this replica knows the job is under, for what the store does not tell: `replica` asked it. */
  pauseOf(replica: string): PeriodicOperation {
    return (
      this.#audit?.latest(AUDIT_SCAN).find((entry) => entry.action === 'pause') ?? {
        action: 'pause',
        by: null,
        note: null,
        replica,
        at: Date.now(),
      }
    );
  }
}
