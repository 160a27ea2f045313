// Run history (docs/operations.md, "Run history"): a record of every run, when it starts and when it ends. An exclusive job's records are
// the fleet's, kept by its coordinator; every other job keeps the latest in this process's memory.
import type { PeriodicRunEntry } from './coordinator-port.js';
import { describeValue, isError } from './errors.js';
import { FAILED_RUNS, type JobExitReason } from './events.js';
import { checkedOptions, type OptionRule } from './rules.js';

/** Every origin of a run, in an order the history's memory counts on: add new ones at the end. */
export const RUN_ORIGINS: readonly PeriodicRunEntry['origin'][] = [
  'schedule',
  'trigger',
  'manual',
  'retry',
  'recovery',
  'backfill',
];

/** A run of a job, as `history()` reads it. */
export interface PeriodicRunRecord {
  name: string;
  /** The run's number in the replica that ran it: 1, 2, 3 …, after those a replica of its name recorded before. */
  jobId: number;
  /** The replica that ran it. */
  replica: string;
  fencingToken: number | null;
  /** The slot it ran for (a backfill's too); null for a trigger or a manual tick. */
  slot: Date | null;
  origin: 'schedule' | 'trigger' | 'manual' | 'retry' | 'recovery' | 'backfill';
  /** 1 for the first run of a slot. */
  attempt: number;
  startedAt: Date;
  /** Null while the run is in flight. */
  finishedAt: Date | null;
  reason: JobExitReason | null;
  durationMs: number | null;
  /**
   * What the run threw: its class name cut to 100 characters, its message to 300, or '' with `errors: 'name'`.
   */
  error: { name: string; message: string } | null;
}

/** The module's `history` option: how many runs each job keeps, and how much of an error. */
export interface PeriodicHistoryOptions {
  /** The runs kept per job (and the entries of its audit trail), 1 to 10,000. @default 100 */
  keep?: number;
  /** `'name'` keeps only the class name of a run's error, for errors that may carry secrets. @default 'message' */
  errors?: 'message' | 'name';
}

/** The history option resolved: false records nothing. */
export type HistorySettings = Required<PeriodicHistoryOptions> | false;

export const HISTORY_DEFAULTS: Required<PeriodicHistoryOptions> = { keep: 100, errors: 'message' };

/** The longest error message a record keeps. */
const MESSAGE = 300;
/** The longest error class name a record keeps: a name is a word, and anything may set it. */
const NAME = 100;

/** The most runs (and audit entries) a job keeps: the ceiling of `history.keep`. */
export const KEEP_MAX = 10_000;

/** An integer from 1 to {@link KEEP_MAX}: `history.keep`, and the `limit` of `history()` and `audit()`. */
export const KEPT_COUNT: OptionRule = {
  accepts: (value) => Number.isSafeInteger(value) && (value as number) >= 1 && (value as number) <= KEEP_MAX,
  expected: `an integer from 1 to ${KEEP_MAX}`,
};

const HISTORY_RULES = {
  keep: KEPT_COUNT,
  errors: {
    accepts: (value) => value === 'message' || value === 'name',
    expected: "'message' or 'name'",
    choices: ['message', 'name'],
  },
} satisfies Record<keyof PeriodicHistoryOptions, OptionRule>;

/** The rule of the module's `history` option. */
export const HISTORY_RULE: OptionRule = {
  accepts: (value) => value === false || (typeof value === 'object' && value !== null),
  expected: "false, or an object such as { keep: 100, errors: 'message' }",
};

/** The `history` option checked, with its defaults. */
export function historySettings(
  where: string,
  given: PeriodicHistoryOptions | false | undefined,
): HistorySettings {
  if (given === false) return false;
  const checked = checkedOptions(`${where}: "history"`, given ?? {}, HISTORY_RULES, '{ keep: 100 }');
  return { ...HISTORY_DEFAULTS, ...(checked as PeriodicHistoryOptions) };
}

/**
 * The `limit` and `before` of `history()`: a limit above the runs kept reads what is kept (default 50), and a
 * valid Date.
 */
export function historyQuery(
  name: string,
  options: { limit?: number; before?: Date } | undefined,
  keep: number,
): { limit: number; before: number | null } {
  const given = checkedOptions(
    `history() of job "${name}"`,
    options ?? {},
    {
      limit: KEPT_COUNT,
      before: {
        accepts: (value) => value instanceof Date && !Number.isNaN(value.getTime()),
        expected: 'a valid Date',
      },
    },
    '{ limit: 50, before: new Date() }',
  ) as { limit?: number; before?: Date };
  return { limit: Math.min(given.limit ?? 50, keep), before: given.before?.getTime() ?? null };
}

/** What a record keeps of a run's error. */
export function errorOf(error: unknown, errors: 'message' | 'name'): { name: string; message: string } {
  // What a job throws may be anything, with getters that throw themselves.
  const text = (read: () => unknown, otherwise: string) => {
    try {
      const value = read();
      return typeof value === 'string' ? value : otherwise;
    } catch {
      return otherwise;
    }
  };
  const thrown = isError(error);
  const name = (thrown ? text(() => error.name, 'Error') : typeof error).slice(0, NAME);
  if (errors === 'name') return { name, message: '' };
  const message = thrown ? text(() => error.message, '') : describeValue(error);
  return { name, message: message.length > MESSAGE ? message.slice(0, MESSAGE) : message };
}

/** Ends a record: the run ended with `reason` after `durationMs`. */
export function finish(
  entry: PeriodicRunEntry,
  reason: JobExitReason,
  durationMs: number,
  error: PeriodicRunEntry['error'],
  retrying: boolean,
): void {
  entry.finishedAt = entry.startedAt + Math.round(durationMs);
  entry.reason = reason;
  entry.durationMs = durationMs;
  entry.error = error;
  if (retrying) entry.retrying = true;
}

/** What a job's ended runs add up to: when its last success ended, and how many slots failed since. */
export interface SlotStreak {
  lastSucceededAt: number | null;
  consecutiveFailures: number;
}

/**
 * What a run that ended with `reason` tells of its job's slots: `'ok'` for a success, `'fail'` for a slot that
 * failed (a failed run with no retry to follow), null for neither (a run in flight, a shutdown, a failure that
 * will be retried). With {@link countOutcome}, the one definition of a job's `lastSucceededAt` and
 * `consecutiveFailures`: the scheduler counts its own by them, and the coordinators the fleet's (the Lua of
 * Redis and the SQL of PostgreSQL add up the outcomes that {@link outcomeOf} gives them).
 */
export function slotOutcome(reason: JobExitReason | null, retrying: boolean): 'ok' | 'fail' | null {
  if (reason === 'normal') return 'ok';
  return reason !== null && FAILED_RUNS.has(reason) && !retrying ? 'fail' : null;
}

/** The outcome of a recorded run (see {@link slotOutcome}). */
export function outcomeOf({ reason, retrying }: PeriodicRunEntry): 'ok' | 'fail' | null {
  return slotOutcome(reason, retrying === true);
}

/** Adds an outcome to `streak`: a success that ended `at` starts it again, a slot that failed adds one. */
export function countOutcome(streak: SlotStreak, outcome: 'ok' | 'fail' | null, at: number): void {
  if (outcome === 'ok') {
    streak.lastSucceededAt = at;
    streak.consecutiveFailures = 0;
  } else if (outcome === 'fail') streak.consecutiveFailures++;
}

/** A record as `history()` returns it. */
export function runRecord(entry: PeriodicRunEntry): PeriodicRunRecord {
  const { name, jobId, replica, fencingToken, slot, origin, attempt, startedAt, finishedAt } = entry;
  return {
    name,
    jobId,
    replica,
    fencingToken,
    slot: slot === null ? null : new Date(slot),
    origin,
    attempt,
    startedAt: new Date(startedAt),
    finishedAt: finishedAt === null ? null : new Date(finishedAt),
    reason: entry.reason,
    durationMs: entry.durationMs,
    error: entry.error === null ? null : { ...entry.error },
  };
}

/** The records newest first by start, those started before `before` (if given), the first `limit`. */
export function newestFirst(
  entries: PeriodicRunEntry[],
  limit: number,
  before: number | null,
): PeriodicRunEntry[] {
  return entries
    .filter((entry) => before === null || entry.startedAt < before)
    .sort((a, b) => b.startedAt - a.startedAt || b.jobId - a.jobId)
    .slice(0, limit);
}
