export { Periodic } from './periodic.decorator.js';
export { PeriodicModule, type PeriodicModuleAsyncOptions } from './periodic.module.js';
export type { PeriodicJobOverrides, PeriodicModuleOptions } from './periodic.options.js';
export type { PeriodicLogKind, PeriodicLoggerLevels, PeriodicLogLevel } from './periodic.logger.js';
export { PeriodicRegistry } from './periodic.registry.js';
export { PeriodicEvents } from './periodic.events.js';
export { PeriodicScheduler } from './scheduler/periodic-scheduler.js';
export type { PeriodicCoordinator, PeriodicFleetSchedule } from './scheduler/coordinator.js';
export { InMemoryCoordinator, type InMemoryCoordinatorOptions } from './coordinators/in-memory.js';
export { type RedisClient, RedisCoordinator, type RedisCoordinatorOptions } from './coordinators/redis.js';
export {
  PostgresCoordinator,
  type PostgresCoordinatorOptions,
  type PostgresQueryable,
} from './coordinators/postgres.js';
export type {
  DelayMode,
  JobShutdown,
  OverlapPolicy,
  PeriodicOptions,
  PeriodicSchedulerOptions,
  ResolvedPeriodicOptions,
  SchedulerMode,
} from './scheduler/options.js';
export type { PeriodicContext, PeriodicRunTrace, SyncTickResult, TickResult } from './scheduler/run.js';
export type { PeriodicJobStatus } from './scheduler/status.js';
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
  PeriodicNotFoundError,
  PeriodicTimeoutError,
} from './scheduler/errors.js';
