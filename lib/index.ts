export { PeriodicScheduler } from './scheduler/periodic-scheduler.js';
export type {
  DelayMode,
  JobShutdown,
  OverlapPolicy,
  PeriodicOptions,
  PeriodicSchedulerOptions,
  ResolvedPeriodicOptions,
  SchedulerMode,
} from './scheduler/options.js';
export type { PeriodicContext, SyncTickResult, TickResult } from './scheduler/run.js';
export type {
  JobExitReason,
  PeriodicEvent,
  PeriodicEventOf,
  PeriodicEventSink,
  PeriodicEventType,
} from './scheduler/events.js';
export {
  type AbortReason,
  PeriodicAbortError,
  PeriodicConfigError,
  PeriodicTimeoutError,
} from './scheduler/errors.js';
