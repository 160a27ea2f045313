// The run history a job keeps in this process's memory (docs/operations.md, "Run history"): its latest `keep`
// runs, as numbers in one typed array, a record a row of six, so that keeping a run makes no object and a kept
// run costs 48 bytes. Records are made as objects only when the history is read. A run's error is kept apart, and
// one error object stands for the same error of consecutive runs.
import type { PeriodicRunEntry } from './coordinator-port.js';
import { EXIT_REASONS, type JobExitReason } from './events.js';
import { newestFirst, RUN_ORIGINS } from './history.js';

type Origin = PeriodicRunEntry['origin'];
type RunError = NonNullable<PeriodicRunEntry['error']>;

/** A row's reason: its index in EXIT_REASONS plus one, 0 for a run in flight. */
const REASONS: readonly (JobExitReason | null)[] = [null, ...EXIT_REASONS];

/** The numbers of a row, in this order. */
const STARTED = 0;
const SLOT = 1;
const JOB_ID = 2;
const TOKEN = 3;
const DURATION = 4;
/** The attempt, the origin, the exit reason and whether the slot is retried, packed (see `pack`). */
const CODES = 5;
const ROW = 6;

/** The rows of a ring made with a job's first run, doubled as it fills, up to `keep`. */
const FIRST_ROWS = 8;

/** attempt · 256 + retrying · 128 + reason · 8 + origin: an integer a double holds exactly for any attempt. */
function pack(attempt: number, origin: number, reason: number, retrying: boolean): number {
  return attempt * 256 + (retrying ? 128 : 0) + reason * 8 + origin;
}

export class RunRing {
  /** The rows, oldest first until the ring is full; then `#next` is the oldest. */
  #rows: Float64Array | undefined;
  #count = 0;
  #next = 0;
  /** Each row's error, made with the first run that failed. */
  #errors: (RunError | undefined)[] | undefined;
  /** The error kept last: a run failing as the one before shares its object. */
  #lastError: RunError | undefined;

  /**
   * @param name the job's name, and @param replica this replica's name, as every record of the ring shows them.
   * @param keep the most runs kept.
   */
  constructor(
    private readonly name: string,
    private readonly replica: string,
    private readonly keep: number,
  ) {}

  /** Records a run that starts, over the oldest once `keep` are kept. */
  started(
    jobId: number,
    startedAt: number,
    slot: number | null,
    origin: Origin,
    attempt: number,
    fencingToken: number | null,
  ): void {
    const row = this.#newRow();
    const rows = this.#rows!;
    const at = row * ROW;
    rows[at + STARTED] = startedAt;
    rows[at + SLOT] = slot ?? Number.NaN;
    rows[at + JOB_ID] = jobId;
    rows[at + TOKEN] = fencingToken ?? Number.NaN;
    rows[at + DURATION] = Number.NaN;
    rows[at + CODES] = pack(attempt, RUN_ORIGINS.indexOf(origin), 0, false);
    if (this.#errors !== undefined) this.#errors[row] = undefined;
  }

  /**
   * Records the end of run `jobId`, if it is still kept: it ended with `reason` after `durationMs`, with `error`,
   * its slot run again if `retrying`.
   */
  ended(
    jobId: number,
    reason: JobExitReason,
    durationMs: number,
    error: RunError | null,
    retrying: boolean,
  ): void {
    const row = this.#rowOf(jobId);
    if (row === -1) return;
    const rows = this.#rows!;
    const at = row * ROW;
    const codes = rows[at + CODES]!;
    rows[at + DURATION] = durationMs;
    rows[at + CODES] = pack(Math.floor(codes / 256), codes % 8, REASONS.indexOf(reason), retrying);
    if (error === null) return;
    const last = this.#lastError;
    const shared = last?.name === error.name && last.message === error.message ? last : error;
    this.#lastError = shared;
    (this.#errors ??= [])[row] = shared;
  }

  /** The latest run, or undefined if none was kept. */
  get last(): PeriodicRunEntry | undefined {
    if (this.#count === 0) return undefined;
    return this.#entry(this.#count < this.keep ? this.#count - 1 : (this.#next + this.keep - 1) % this.keep);
  }

  /** The records newest first by start, those started before `before` (if given), the first `limit`. */
  read(limit: number, before: number | null): PeriodicRunEntry[] {
    const entries: PeriodicRunEntry[] = [];
    for (let row = 0; row < this.#count; row++) entries.push(this.#entry(row));
    return newestFirst(entries, limit, before);
  }

  /** The row a new record goes in: the next free one, made room for, or the oldest. */
  #newRow(): number {
    const count = this.#count;
    if (count === this.keep) {
      const row = this.#next;
      this.#next = (row + 1) % this.keep;
      return row;
    }
    const rows = this.#rows;
    if (rows === undefined || rows.length === count * ROW) {
      const grown = new Float64Array(Math.min(this.keep, Math.max(FIRST_ROWS, count * 2)) * ROW);
      if (rows !== undefined) grown.set(rows);
      this.#rows = grown;
    }
    this.#count = count + 1;
    return count;
  }

  /** The row of run `jobId`, searched from the newest (a run that ends is most often the latest), or -1. */
  #rowOf(jobId: number): number {
    const rows = this.#rows;
    const count = this.#count;
    if (rows === undefined) return -1;
    const newest = count < this.keep ? count - 1 : (this.#next + this.keep - 1) % this.keep;
    for (let seen = 0, row = newest; seen < count; seen++, row = row === 0 ? count - 1 : row - 1) {
      if (rows[row * ROW + JOB_ID] === jobId) return row;
    }
    return -1;
  }

  #entry(row: number): PeriodicRunEntry {
    const rows = this.#rows!;
    const at = row * ROW;
    const codes = rows[at + CODES]!;
    const reason = REASONS[Math.floor(codes / 8) % 16]!;
    const startedAt = rows[at + STARTED]!;
    const durationMs = rows[at + DURATION]!;
    const ended = reason !== null;
    const error = this.#errors?.[row];
    const entry: PeriodicRunEntry = {
      id: '',
      name: this.name,
      jobId: rows[at + JOB_ID]!,
      replica: this.replica,
      fencingToken: nullIfNaN(rows[at + TOKEN]!),
      slot: nullIfNaN(rows[at + SLOT]!),
      origin: RUN_ORIGINS[codes % 8]!,
      attempt: Math.floor(codes / 256),
      startedAt,
      // As `finish` makes it: the start and the duration, to the millisecond.
      finishedAt: ended ? startedAt + Math.round(durationMs) : null,
      reason,
      durationMs: ended ? durationMs : null,
      error: error === undefined ? null : { ...error },
    };
    if (Math.floor(codes / 128) % 2 === 1) entry.retrying = true;
    return entry;
  }
}

function nullIfNaN(value: number): number | null {
  return Number.isNaN(value) ? null : value;
}
