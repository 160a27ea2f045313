import { Logger } from '@nestjs/common';
import { LOGGER_CONTEXT } from './periodic.constants.js';
import { describeValue, isError } from './scheduler/errors.js';
import type { PeriodicEvent } from './scheduler/events.js';

/**
 * Turns events into log lines through Nest's `Logger` (context `Periodic`), in the words of the original:
 * `job cleanup#3 started`, `skipped cleanup: the previous run #2 is still running`, ... `nextTick` is not
 * logged. `timeoutOf` gives a job's `timeout` for the line of a run that timed out.
 */
export function eventLogger(timeoutOf: (name: string) => number | undefined): (event: PeriodicEvent) => void {
  const logger = new Logger(LOGGER_CONTEXT);
  return (event) => {
    switch (event.type) {
      case 'started':
        return logger.debug(`job ${event.name}#${event.jobId} started`);
      case 'finished': {
        const run = `job ${event.name}#${event.jobId}`;
        switch (event.reason) {
          case 'normal':
            return logger.debug(`${run} finished, duration=${Math.round(event.durationMs)}ms`);
          case 'shutdown':
            return logger.log(`${run} shut down`);
          case 'killed':
            return logger.warn(`${run} killed`);
          case 'timeout':
            return logger.error(`${run} timed out after ${timeoutOf(event.name)}ms`);
          case 'leaseLost':
            return logger.warn(`${run} stopped: the lease was lost`);
          case 'error':
            return logError(logger, `${run} failed`, event.error);
        }
        return;
      }
      case 'skipped':
        return logger.log(`skipped ${event.name}: the previous run #${event.stillRunning} is still running`);
      case 'stoppedPrevious':
        return logger.warn(`stopped previous run ${event.name}#${event.jobId}`);
      case 'missed':
        return logger.warn(`${event.name} missed ${event.count} ticks`);
      case 'guardFailed':
        return logError(logger, `guard of ${event.name} failed`, event.error);
      case 'leaseAcquired':
        return logger.log(`${event.name} acquired its lease, fencing token ${event.fencingToken}`);
      case 'leaseLost':
        return logger.warn(`${event.name} lost its lease: ${event.reason}`);
    }
  };
}

/** `<what>: <message>`, with the stack when the value thrown is an `Error`. */
export function logError(logger: Logger, what: string, error: unknown): void {
  if (isError(error)) logger.error(`${what}: ${error.message}`, error.stack);
  else logger.error(`${what}: ${describeValue(error)}`);
}
