import type { JobExitReason } from './events.js';
import type { ResolvedPeriodicOptions, SchedulerMode } from './options.js';

/** What a job is doing, and what it did last: `registry.status(name)`. */
export interface PeriodicJobStatus {
  name: string;
  /**
   * `'idle'` until the application has bootstrapped, `'stopped'` once it closes or the job is removed;
   * `'completed'` once its policies leave it no slot to run (`endAt`, `maxRuns`, `at`: docs/policies.md).
   */
  state: 'idle' | 'ticking' | 'paused' | 'completed' | 'stopped';
  mode: SchedulerMode;
  schedule: { every: number } | { cron: string; timezone: string } | { at: Date };
  /** Runs in flight. */
  running: number;
  /** Auto mode while ticking (and no run of a shifted job in flight); null otherwise. */
  nextTickAt: Date | null;
  lastStartedAt: Date | null;
  lastFinished: { reason: JobExitReason; at: Date; durationMs: number; error?: unknown } | null;
  /** When the last run that ended `'normal'` ended. */
  lastSucceededAt: Date | null;
  /** Runs ended `'error'`, `'timeout'`, `'killed'` or `'leaseLost'` since the last `'normal'` one. */
  consecutiveFailures: number;
  counts: { started: number; skipped: number; missed: number; guardFailed: number } & Record<
    JobExitReason,
    number
  >;
  /**
   * Exclusive jobs only: whether this replica holds the lease, and its fencing token if it does; `unreachable`
   * only while this replica cannot reach the coordinator's store (since when, and the last failure).
   */
  lease: {
    held: boolean;
    fencingToken: number | null;
    unreachable?: { since: Date; lastError: string | null };
  } | null;
}

/**
 * What a job did, counted by its scheduler as it happens: plain numbers, and the wall-clock times things happened
 * at, so that a clock set later moves none of them. A job gets its record with the first thing it has to count,
 * so that idle jobs cost nothing.
 */
export class JobRecord {
  started = 0;
  skipped = 0;
  missed = 0;
  guardFailed = 0;
  normal = 0;
  error = 0;
  timeout = 0;
  killed = 0;
  shutdown = 0;
  leaseLost = 0;
  consecutiveFailures = 0;
  /** Epoch ms, as `lastSucceededAt` and `lastEndedAt`; NaN until there is one. */
  lastStartedAt = NaN;
  lastSucceededAt = NaN;
  /** The last run that ended; its `error` only when it threw or rejected. */
  lastReason: JobExitReason | undefined = undefined;
  lastEndedAt = NaN;
  lastDurationMs = 0;
  lastError: { value: unknown } | undefined = undefined;
}

/** What a job's status is made of, beside its record. */
export interface StatusSource {
  readonly options: ResolvedPeriodicOptions;
  readonly state: PeriodicJobStatus['state'];
  readonly running: number;
  /** Epoch ms of the next tick; 0 when none is armed. */
  readonly nextSlot: number;
  readonly lease: { held: boolean; fencingToken: number } | undefined;
  /** The store's failures, as this replica sees them: for an exclusive job. */
  readonly store: { reachable: boolean; since: number; lastError: string | null } | undefined;
}

const NEVER = new JobRecord();
/** The latest epoch ms a `Date` can hold. */
const MAX_DATE = 8.64e15;

/** A job's status from its record (none yet: nothing happened). */
export function statusOf(source: StatusSource, record: JobRecord = NEVER): PeriodicJobStatus {
  const { options, lease } = source;
  const date = (at: number): Date | null => (Number.isNaN(at) ? null : new Date(at));
  const { lastReason } = record;
  return {
    name: options.name,
    state: source.state,
    mode: options.mode,
    schedule: scheduleOf(options),
    running: source.running,
    // A slot past the range of a Date (an interval of some 270,000 years) is as good as none.
    nextTickAt:
      source.nextSlot === 0 || Math.abs(source.nextSlot) > MAX_DATE ? null : new Date(source.nextSlot),
    lastStartedAt: date(record.lastStartedAt),
    lastFinished:
      lastReason === undefined
        ? null
        : {
            reason: lastReason,
            at: new Date(record.lastEndedAt),
            durationMs: record.lastDurationMs,
            ...(record.lastError === undefined ? {} : { error: record.lastError.value }),
          },
    lastSucceededAt: date(record.lastSucceededAt),
    consecutiveFailures: record.consecutiveFailures,
    counts: {
      started: record.started,
      skipped: record.skipped,
      missed: record.missed,
      guardFailed: record.guardFailed,
      normal: record.normal,
      error: record.error,
      timeout: record.timeout,
      killed: record.killed,
      shutdown: record.shutdown,
      leaseLost: record.leaseLost,
    },
    lease: lease === undefined ? null : leaseOf(lease, source.store),
  };
}

function scheduleOf(options: ResolvedPeriodicOptions): PeriodicJobStatus['schedule'] {
  if (options.policy !== undefined && !Number.isNaN(options.policy.at))
    return { at: new Date(options.policy.at) };
  return options.cron === undefined
    ? { every: options.every }
    : { cron: options.cron, timezone: options.timezone! };
}

function leaseOf(
  lease: NonNullable<StatusSource['lease']>,
  store: StatusSource['store'],
): NonNullable<PeriodicJobStatus['lease']> {
  const held = lease.held;
  const status = { held, fencingToken: held ? lease.fencingToken : null };
  if (store === undefined || store.reachable) return status;
  return { ...status, unreachable: { since: new Date(store.since), lastError: store.lastError } };
}
