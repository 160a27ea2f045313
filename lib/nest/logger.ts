import { Logger } from '@nestjs/common';
import { describeValue, isError, oneLine } from '../scheduler/errors.js';
import type { JobExitReason, PeriodicEvent, PeriodicEventType } from '../scheduler/events.js';
import { LOGGER_CONTEXT } from './constants.js';

/** A level of Nest's `Logger`. */
export type PeriodicLogLevel = 'log' | 'error' | 'warn' | 'debug' | 'verbose' | 'fatal';

/**
 * The kinds of log line: an event type, or for `finished` the run's exit reason (`finished` itself is a run
 * that ended `'normal'`); `leaseLost` names both a run stopped by a lost lease and the event.
 */
export type PeriodicLogKind =
  | 'started'
  | 'finished'
  | 'shutdown'
  | 'killed'
  | 'timeout'
  | 'error'
  | 'leaseLost'
  | 'skipped'
  | 'stoppedPrevious'
  | 'missed'
  | 'retrying'
  | 'guardFailed'
  | 'leaseAcquired'
  | 'operated'
  | 'incident'
  | 'recovered';

/** The level of each kind of log line, `false` for none; the kinds not named keep their defaults. */
export type PeriodicLoggerLevels = { [kind in PeriodicLogKind]?: PeriodicLogLevel | false };

/** Quiet by default: a run that starts and ends normally logs nothing, nor does an intended skip. */
export const DEFAULT_LOG_LEVELS: Readonly<Required<PeriodicLoggerLevels>> = {
  started: false,
  finished: false,
  shutdown: 'log',
  killed: 'warn',
  timeout: 'error',
  error: 'error',
  leaseLost: 'warn',
  skipped: 'debug',
  stoppedPrevious: 'warn',
  missed: 'warn',
  retrying: 'warn',
  guardFailed: 'error',
  leaseAcquired: 'log',
  operated: 'log',
  incident: 'error',
  recovered: 'log',
};

export const LOG_KINDS = Object.keys(DEFAULT_LOG_LEVELS) as PeriodicLogKind[];
export const LOG_LEVELS: readonly PeriodicLogLevel[] = ['log', 'error', 'warn', 'debug', 'verbose', 'fatal'];

/** The kind of line of a run that ended with each exit reason. */
const KIND_OF_ENDING: Record<JobExitReason, PeriodicLogKind> = {
  normal: 'finished',
  shutdown: 'shutdown',
  killed: 'killed',
  timeout: 'timeout',
  error: 'error',
  leaseLost: 'leaseLost',
};

/** The event types each kind of line comes from. */
const SOURCES: Record<PeriodicLogKind, readonly PeriodicEventType[]> = {
  started: ['started'],
  finished: ['finished'],
  shutdown: ['finished'],
  killed: ['finished'],
  timeout: ['finished'],
  error: ['finished'],
  leaseLost: ['finished', 'leaseLost'],
  skipped: ['skipped'],
  stoppedPrevious: ['stoppedPrevious'],
  missed: ['missed'],
  retrying: ['retrying'],
  guardFailed: ['guardFailed'],
  leaseAcquired: ['leaseAcquired'],
  operated: ['operated'],
  incident: ['incident'],
  recovered: ['recovered'],
};

/** What the emitter asks of the event logger. */
export interface EventLogger {
  /** Whether an event of `type` (for `finished`, of a run that ended with `reason`) may make a line. */
  wants(type: PeriodicEventType, reason?: JobExitReason): boolean;
  write(event: PeriodicEvent): void;
}

/**
 * Turns events into log lines through Nest's `Logger` (context `Periodic`), in the words of the original:
 * `job cleanup#3 started`, `skipped cleanup: the previous run #2 is still running`, ... at the level `levels`
 * gives each kind; `nextTick` is not logged. `timeoutOf` gives a job's `timeout` for the line of a run that
 * timed out.
 */
export function eventLogger(
  levels: Required<PeriodicLoggerLevels>,
  timeoutOf: (name: string) => number | undefined,
): EventLogger {
  const logger = new Logger(LOGGER_CONTEXT);
  const line = (kind: PeriodicLogKind, message: string, stack?: string): void => {
    const level = levels[kind];
    if (level === false) return;
    // Names, notes and errors may be anyone's words: each line is one line, whatever they hold. Only the error
    // levels of Nest's Logger take a stack; at the others it would be read as the context.
    if (stack !== undefined && (level === 'error' || level === 'fatal')) {
      logger[level](oneLine(message), oneLine(stack));
    } else logger[level](oneLine(message));
  };
  const failure = (kind: PeriodicLogKind, what: string, error: unknown): void =>
    line(kind, ...failureLine(what, error));
  /** By job: the last way its runs failed, and how many runs in a row failed that way. */
  const failing = new Map<string, { same: string; times: number }>();
  const wanted = new Set(LOG_KINDS.filter((kind) => levels[kind] !== false).flatMap((kind) => SOURCES[kind]));
  return {
    wants: (type, reason) =>
      type === 'finished' && reason !== undefined
        ? levels[KIND_OF_ENDING[reason]] !== false
        : wanted.has(type),
    write: (event) => {
      if (event.type === 'finished' && event.reason !== 'error') failing.delete(event.name);
      switch (event.type) {
        case 'started':
          return line('started', `job ${event.name}#${event.jobId} started`);
        case 'finished': {
          const run = `job ${event.name}#${event.jobId}`;
          switch (event.reason) {
            case 'normal':
              return line('finished', `${run} finished, duration=${Math.round(event.durationMs)}ms`);
            case 'shutdown':
              return line('shutdown', `${run} shut down`);
            case 'killed':
              return line('killed', `${run} killed`);
            case 'timeout':
              return line('timeout', `${run} timed out after ${timeoutOf(event.name)}ms`);
            case 'leaseLost':
              return line('leaseLost', `${run} stopped: the lease was lost`);
            case 'error': {
              // The stack once; then, while the job fails the same way, one line per failure.
              const same = sameness(event.error);
              const last = failing.get(event.name);
              if (last?.same !== same) {
                failing.set(event.name, { same, times: 1 });
                return failure('error', `${run} failed`, event.error);
              }
              last.times++;
              return line(
                'error',
                `${run} failed again (${ordinal(last.times)} in a row): ${messageOf(event.error)}`,
              );
            }
          }
          return;
        }
        case 'skipped':
          return line(
            'skipped',
            `skipped ${event.name}: the previous run #${event.stillRunning} is still running`,
          );
        case 'stoppedPrevious':
          return line('stoppedPrevious', `stopped previous run ${event.name}#${event.jobId}`);
        case 'missed':
          return line('missed', `${event.name} missed ${event.count} tick${event.count === 1 ? '' : 's'}`);
        case 'retrying':
          return line(
            'retrying',
            `job ${event.name}#${event.jobId} will run again in ${event.inMs}ms (attempt ${event.attempt})`,
          );
        case 'guardFailed':
          return failure('guardFailed', `guard of ${event.name} failed`, event.error);
        case 'leaseAcquired':
          return line(
            'leaseAcquired',
            `${event.name} acquired its lease, fencing token ${event.fencingToken}`,
          );
        case 'leaseLost':
          return line('leaseLost', `${event.name} lost its lease: ${event.reason}`);
        case 'operated': {
          const done = {
            pause: 'paused',
            resume: 'resumed',
            trigger: 'triggered',
            create: 'created as a stored schedule',
            update: 'updated',
            remove: 'removed',
            backfill: 'asked to backfill',
            cancelBackfill: 'told to cancel its backfill',
          }[event.action];
          const by = event.by === null ? '' : ` by ${event.by}`;
          const note = event.note === null ? '' : `: ${event.note}`;
          return line('operated', `${event.name} ${done}${by} on ${event.replica}${note}`);
        }
        case 'incident':
          return line('incident', `incident: ${event.name} is ${event.kind}: ${event.detail}`);
        case 'recovered':
          return line(
            'recovered',
            `recovered: ${event.name} is no longer ${event.kind}, after ${Math.round(event.durationMs)}ms`,
          );
      }
    },
  };
}

/** What makes two failures the same: the error's class and message. */
function sameness(error: unknown): string {
  return isError(error) ? `${error.name}: ${error.message}` : describeValue(error);
}

/** 2nd, 3rd, 4th, 11th, 21st … */
function ordinal(count: number): string {
  const teen = Math.floor(count / 10) % 10 === 1;
  const suffix = teen
    ? 'th'
    : (({ 1: 'st', 2: 'nd', 3: 'rd' } as Record<number, string>)[count % 10] ?? 'th');
  return `${count}${suffix}`;
}

/** `<what>: <message>` at error level, with the stack when the value thrown is an `Error`. */
export function logError(logger: Logger, what: string, error: unknown): void {
  const [message, stack] = failureLine(what, error);
  if (stack === undefined) logger.error(oneLine(message));
  else logger.error(oneLine(message), oneLine(stack));
}

/** `<what>: <message>` and the stack of an `Error`; an error without a message is named by its class. */
function failureLine(what: string, error: unknown): [message: string, stack?: string] {
  const message = `${what}: ${messageOf(error)}`;
  return isError(error) ? [message, error.stack] : [message];
}

/** An error's message, or its class when it has none; any other value as it is. */
function messageOf(error: unknown): string {
  return isError(error) ? error.message || error.name : describeValue(error);
}
