export { Periodic, PeriodicHandler } from './nest/decorator.js';
export { PeriodicModule, type PeriodicModuleAsyncOptions } from './nest/module.js';
export type { PeriodicJobOverrides, PeriodicModuleOptions } from './nest/options.js';
export type { PeriodicLogKind, PeriodicLoggerLevels, PeriodicLogLevel } from './nest/logger.js';
export { PeriodicRegistry } from './nest/registry.js';
export type { PeriodicSchedules } from './nest/schedules.js';
export { PeriodicEvents } from './nest/events.js';
export { PeriodicScheduler } from './scheduler/periodic-scheduler.js';
export type {
  PeriodicAuditSteps,
  PeriodicCoordinator,
  PeriodicFleetMember,
  PeriodicFleetRead,
  PeriodicFleetSchedule,
  PeriodicFleetSteps,
  PeriodicHeartbeat,
  PeriodicHeartbeatReply,
  PeriodicHistorySteps,
  PeriodicIncidentRecord,
  PeriodicIncidentSteps,
  PeriodicJobRefusal,
  PeriodicLeaseHeld,
  PeriodicLeaseSteps,
  PeriodicOperation,
  PeriodicRunEntry,
  PeriodicScheduleSteps,
  PeriodicScheduleWrite,
  PeriodicScheduleWritten,
  PeriodicStoredAnswer,
  PeriodicStoredChanges,
  PeriodicStoredQuery,
  PeriodicStoredRecord,
  PeriodicStoredWrite,
  PeriodicTriggerAnswer,
  PeriodicTriggerRequest,
  PeriodicTriggerState,
  PeriodicTriggerSteps,
} from './scheduler/coordinator-port.js';
export type { PeriodicAuditEntry, PeriodicOperationOptions } from './scheduler/operations.js';
export type { PeriodicHistoryOptions, PeriodicRunRecord } from './scheduler/history.js';
export type { PeriodicFleetStatus, PeriodicIncident } from './scheduler/fleet-status.js';
export type { PeriodicIncidentOptions } from './scheduler/incidents.js';
export type {
  PeriodicScheduleChangeOptions,
  PeriodicScheduleDefinition,
  PeriodicScheduleList,
  PeriodicScheduleQuery,
  PeriodicStoredOptions,
  PeriodicStoredSchedule,
} from './scheduler/stored-schedules.js';
export { InMemoryCoordinator, type InMemoryCoordinatorOptions } from './coordinators/in-memory.js';
export {
  type RedisClient,
  RedisCoordinator,
  type RedisCoordinatorOptions,
} from './coordinators/redis/coordinator.js';
export {
  PostgresCoordinator,
  type PostgresCoordinatorOptions,
  type PostgresQueryable,
} from './coordinators/postgres/coordinator.js';
export type {
  DelayMode,
  Delivery,
  JobShutdown,
  OverlapPolicy,
  PeriodicOptions,
  PeriodicRetry,
  PeriodicSchedulerOptions,
  ResolvedPeriodicOptions,
  SchedulerMode,
} from './scheduler/options.js';
export type { PeriodicBackfillOptions } from './scheduler/backfill.js';
export type { PeriodicCheckIn, PeriodicCheckInEvent, PeriodicCheckIns } from './scheduler/check-ins.js';
export type {
  PeriodicCatchUp,
  PeriodicExclude,
  PeriodicExcludedDay,
  PeriodicInstant,
} from './scheduler/policies.js';
export type { PeriodicContext, PeriodicRunTrace, SyncTickResult, TickResult } from './scheduler/run.js';
export type { PeriodicJobStatus } from './scheduler/status.js';
export type {
  JobExitReason,
  PeriodicEvent,
  PeriodicEventOf,
  PeriodicEventSink,
  PeriodicEventType,
  PeriodicIncidentKind,
} from './scheduler/events.js';
export {
  type AbortReason,
  PeriodicAbortError,
  PeriodicConfigError,
  PeriodicConflictError,
  PeriodicNotFoundError,
  PeriodicStoreError,
  PeriodicTimeoutError,
} from './scheduler/errors.js';
