import { describeValue, isError, PeriodicConfigError } from './errors.js';

/** How a run ended. */
export type JobExitReason = 'normal' | 'error' | 'timeout' | 'killed' | 'shutdown' | 'leaseLost';

/**
 * The exit reasons of a failed run: what `consecutiveFailures` counts, what a span and a trace report as an
 * error. `'shutdown'` is neither a failure nor a success.
 */
export const FAILED_RUNS: ReadonlySet<JobExitReason> = new Set(['error', 'timeout', 'killed', 'leaseLost']);

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
  | { type: 'guardFailed'; name: string; error: unknown }
  | { type: 'leaseAcquired'; name: string; fencingToken: number }
  | { type: 'leaseLost'; name: string; reason: string };

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

/**
 * A scheduler's way to its sink: it asks whether an event is wanted before building it, and keeps a sink that
 * throws from disturbing the job: the error is reported as a process warning.
 */
export class JobEvents {
  private readonly sink: Exclude<PeriodicEventSink, (event: PeriodicEvent) => void> | undefined;

  /** @param where how error messages name the job. */
  constructor(
    private readonly name: string,
    sink: PeriodicEventSink | undefined,
    where: string,
  ) {
    if (sink !== undefined && typeof sink !== 'function' && typeof sink?.emit !== 'function') {
      throw new PeriodicConfigError(
        `${where}: the event sink must be a function or an object with emit(event), got ${describeValue(sink)}`,
      );
    }
    this.sink = typeof sink === 'function' ? { emit: sink } : sink;
  }

  /** Whether the sink wants events of `type` (for `finished`, of a run that ended with `reason`). */
  wants(type: PeriodicEventType, reason?: JobExitReason): boolean {
    const sink = this.sink;
    if (sink?.wants === undefined) return sink !== undefined;
    try {
      return sink.wants(type, reason);
    } catch (error) {
      this.failed(type, error);
      return false;
    }
  }

  emit(event: PeriodicEvent): void {
    try {
      this.sink?.emit(event);
    } catch (error) {
      this.failed(event.type, error);
    }
  }

  private failed(type: PeriodicEventType, error: unknown): void {
    const detail = isError(error) ? (error.stack ?? error.message) : describeValue(error);
    process.emitWarning(`the event sink of job "${this.name}" threw on "${type}": ${detail}`, {
      code: 'PERIODIC_EVENT_SINK',
    });
  }
}
