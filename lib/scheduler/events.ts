/** How a run ended. */
export type JobExitReason = 'normal' | 'error' | 'timeout' | 'killed' | 'shutdown' | 'leaseLost';
/** Every exit reason, in an order the history's memory counts on: add new ones at the end. */
export const EXIT_REASONS: readonly JobExitReason[] = [
  'normal',
  'error',
  'timeout',
  'killed',
  'shutdown',
  'leaseLost',
];

/**
 * The exit reasons of a failed run: what `consecutiveFailures` counts, what a span and a trace report as an
 * error. `'shutdown'` is neither a failure nor a success.
 */
export const FAILED_RUNS: ReadonlySet<JobExitReason> = new Set(['error', 'timeout', 'killed', 'leaseLost']);

/** What an incident is about (docs/alerts.md): slots that failed, a slot that did not start, a run that goes on. */
export type PeriodicIncidentKind = 'failing' | 'late' | 'hung';

/** What a scheduler reports, in the order of one tick: see the README's "Events". */
export type PeriodicEvent =
  | { type: 'started'; name: string; jobId: number; scheduledAt: number; startedAt: number }
  | {
      type: 'finished';
      name: string;
      jobId: number;
      reason: JobExitReason;
      error?: unknown;
      durationMs: number;
    }
  /** `stillRunning` is the jobId of the run that is still running. */
  | { type: 'skipped'; name: string; stillRunning: number }
  /** `jobId` is the run that was stopped. */
  | { type: 'stoppedPrevious'; name: string; jobId: number }
  /** `in` is the nominal delay: `initialDelay` for the first tick, `every` after. */
  | { type: 'nextTick'; name: string; in: number; at?: number }
  | { type: 'missed'; name: string; count: number }
  /** Run `jobId` failed and runs again as `attempt` in `inMs` ms (`retry`); `error` is what it threw. */
  | { type: 'retrying'; name: string; jobId: number; attempt: number; inMs: number; error: unknown }
  | { type: 'guardFailed'; name: string; error: unknown }
  | { type: 'leaseAcquired'; name: string; fencingToken: number }
  | { type: 'leaseLost'; name: string; reason: string }
  /**
   * The coordinator's store lost the fleet's records (restarted without persistence, flushed, truncated), as
   * a heartbeat of this replica found: `lost` names what went with them (`'pauses'`, `'history'`, `'audit'`).
   * Once per loss and replica, not per job.
   */
  | { type: 'storeReset'; lost: string[] }
  /**
   * An incident opened for the job (docs/alerts.md): slots in a row failed (`'failing'`), a slot did not start
   * `lateAfter` after it was due (`'late'`), a run goes on past `hungAfter` (`'hung'`). Once for the fleet: by the
   * replica that opened it.
   */
  | { type: 'incident'; name: string; kind: PeriodicIncidentKind; since: Date; detail: string }
  /** The job's incident of `kind`, open since `since`, closed after `recoverAfter` good slots, by the replica that closed it. */
  | { type: 'recovered'; name: string; kind: PeriodicIncidentKind; since: Date; durationMs: number }
  /** A pause, resume or trigger, or a change of a stored schedule, as the job's audit trail records it. */
  | {
      type: 'operated';
      name: string;
      action: 'pause' | 'resume' | 'trigger' | 'create' | 'update' | 'remove' | 'backfill' | 'cancelBackfill';
      by: string | null;
      note: string | null;
      replica: string;
      at: Date;
    };

/** The `type` of a {@link PeriodicEvent}. */
export type PeriodicEventType = PeriodicEvent['type'];

/** The event of one type. */
export type PeriodicEventOf<T extends PeriodicEventType> = Extract<PeriodicEvent, { type: T }>;

/**
 * Where a scheduler sends its events: a function, or an object whose optional `wants(type, reason)` tells
 * whether anyone listens to that type (for `finished`, with that exit reason). The scheduler builds no event
 * object that is not wanted.
 */
export type PeriodicEventSink =
  | ((event: PeriodicEvent) => void)
  | { emit(event: PeriodicEvent): void; wants?(type: PeriodicEventType, reason?: JobExitReason): boolean };
