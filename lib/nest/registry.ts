import { Injectable, Logger } from '@nestjs/common';
import { describeValue, messageOf, PeriodicConfigError, PeriodicNotFoundError } from '../scheduler/errors.js';
import type { CheckInReports } from '../scheduler/check-ins.js';
import { LOGGER_CONTEXT } from './constants.js';
import {
  checkOption,
  JOB_OPTION_NAMES,
  noCoordinator,
  type PeriodicOptions,
  type PeriodicSchedulerOptions,
} from '../scheduler/options.js';
import { PeriodicScheduler } from '../scheduler/periodic-scheduler.js';
import { nearest, readOptions } from '../scheduler/rules.js';
import type { PeriodicContext, SyncTickResult, TickResult } from '../scheduler/run.js';
import type { PeriodicAuditEntry, PeriodicOperationOptions } from '../scheduler/operations.js';
import type { PeriodicJobStatus } from '../scheduler/status.js';
import { fleetStatusAll, type PeriodicFleetStatus } from '../scheduler/fleet-status.js';
import type { PeriodicRunRecord } from '../scheduler/history.js';
import type { PeriodicBackfillOptions } from '../scheduler/backfill.js';
import { PeriodicTelemetry } from './telemetry.js';
import { PeriodicEvents } from './events.js';
import { ModuleSettings } from './options.js';
import { HandlerPlace, PeriodicSchedules, type StoredJobsHost } from './schedules.js';

/**
 * @internal A decorated job's method, which its scheduler keeps (`SchedulerContext.method`), and where the job
 * comes from, as messages name it: `@Periodic() on Cleanup.purge (in AppModule)`. Its text is made only for a
 * message, from parts the jobs of one provider share.
 */
export class DecoratedPlace {
  constructor(
    readonly provider: { readonly className: string; readonly module: string; readonly instance: object },
    readonly key: string | symbol,
  ) {}

  /** The instance the method is called on. */
  get target(): object {
    return this.provider.instance;
  }

  toString(): string {
    return `@Periodic() on ${this.provider.className}.${String(this.key)} (in ${this.provider.module})`;
  }
}

/** The call that added the job `name`, as messages name it. */
function addedBy(name: string): string {
  return `PeriodicRegistry.add(${JSON.stringify(name)})`;
}

/** Where a job comes from: its decorated method, its stored schedule, or the call that added it. */
function placeOf(scheduler: PeriodicScheduler): string | DecoratedPlace {
  const { method } = scheduler;
  if (method instanceof DecoratedPlace) return method;
  if (method instanceof HandlerPlace) return `the stored schedule "${scheduler.name}", run by ${method}`;
  return addedBy(scheduler.name);
}

/**
 * Every job of the application by name: the schedulers `@Periodic()` methods got at bootstrap and those added
 * at run time. In manual mode, tests drive jobs through `tick` and `syncTick`; at run time, operations read
 * `status` and call `trigger`, `pause` and `resume`.
 */
@Injectable()
export class PeriodicRegistry {
  /**
   * The stored schedules (docs/schedules.md): created, edited and removed at run time for the whole fleet, kept
   * in the coordinator's store, each an exclusive job run by the `@PeriodicHandler()` it names.
   */
  readonly schedules: PeriodicSchedules;
  private readonly jobs = new Map<string, PeriodicScheduler>();
  /** The jobs `remove()` is draining. */
  private readonly removing = new Set<PeriodicScheduler>();
  /** The number the last job registered got: each job's `registered`, in the order of `jobs`. */
  private registeredLast = 0;
  private phase: 'created' | 'bootstrapped' | 'closing' = 'created';

  constructor(
    private readonly events: PeriodicEvents,
    private readonly settings: ModuleSettings,
    private readonly telemetry: PeriodicTelemetry,
  ) {
    this.schedules = new PeriodicSchedules(this satisfies StoredJobsHost, settings, events);
  }

  /** The scheduler of the job `name`; throws a `PeriodicNotFoundError` listing the known names. */
  get(name: string): PeriodicScheduler {
    return this.entry(name, 'get');
  }

  /** Whether a job is named `name`. */
  has(name: string): boolean {
    return this.jobs.has(name);
  }

  /** Every job's scheduler, in the order they were registered. */
  getAll(): PeriodicScheduler[] {
    return [...this.jobs.values()];
  }

  /**
   * Creates a job at run time. It starts at once if the application has bootstrapped (else when it does),
   * is drained by `remove` or on close, and takes the module's `mode` unless it sets its own. Such a job has
   * no host provider: on close it is drained by the module's own teardown, after the other modules'.
   */
  add(
    name: string,
    run: (context: PeriodicContext) => unknown,
    options: Omit<PeriodicOptions, 'name' | 'when'> & { when?: () => boolean | Promise<boolean> },
  ): PeriodicScheduler {
    checkOption('PeriodicRegistry.add()', 'name', name);
    const where = addedBy(name);
    if (typeof run !== 'function') {
      throw new PeriodicConfigError(
        `${where}: the job must be a function, called with the run's context, got ${describeValue(run)}`,
      );
    }
    if (typeof options === 'object' && options !== null && ('name' in options || 'run' in options)) {
      throw new PeriodicConfigError(
        `${where}: "name" and "run" are not options here; the name is the first argument, the job the second`,
      );
    }
    // The engine's own check would accept `coordinator`, which is the module's to give.
    const given = readOptions(where, options, JOB_OPTION_NAMES, '{ every: 60_000 }');
    if (this.phase === 'closing') {
      throw new PeriodicConfigError(`${where}: the application is closing; no job can be added any more`);
    }
    // Validated by the engine.
    Object.assign(given, { name, run });
    const scheduler = this.schedulerOf(given as unknown as PeriodicSchedulerOptions, where);
    this.adopt(scheduler);
    return scheduler;
  }

  /**
   * @internal A scheduler of a job of this application: with the module's mode unless the job sets its own,
   * the module's coordinator, and its runs traced when telemetry is on; `options` is an object of the caller's
   * own, which this fills in. `where` names the job in messages.
   */
  schedulerOf(
    options: PeriodicSchedulerOptions,
    where: string,
    method?: DecoratedPlace | HandlerPlace,
  ): PeriodicScheduler {
    const { mode, coordinator } = this.settings.options;
    if (options.exclusive === true && coordinator === undefined) {
      throw noCoordinator(where, 'PeriodicModule.forRoot({ coordinator })');
    }
    options.mode ??= mode;
    options.coordinator = coordinator;
    options.run = this.telemetry.traced(options.run);
    const { replica } = this.settings;
    if (replica !== undefined)
      replica.onStoreReset ??= (lost) => this.events.emit({ type: 'storeReset', lost });
    const { replica: replicaName, history, errors, checkIns, incidents } = this.settings.options;
    return new PeriodicScheduler(options, this.events, {
      where,
      replica,
      replicaName,
      method,
      history,
      errors,
      checkIns: { module: checkIns, reports: this.checkInReports },
      incidents,
    });
  }

  /** What hears of the check-ins that fail: a warning at most once an hour per job, and the metric. */
  private readonly checkInReports: CheckInReports = {
    failed: (name, error, report) => {
      this.telemetry.checkInFailed(name);
      if (report && this.settings.options.logger !== false) {
        new Logger(LOGGER_CONTEXT).warn(
          `the check-ins of ${name} fail: ${messageOf(error)}; its runs go on (said at most once an hour)`,
        );
      }
    },
  };

  /** Stops the job as on shutdown (its runs get their `jobShutdown` grace), then forgets it. */
  async remove(name: string): Promise<void> {
    const scheduler = this.entry(name, 'remove');
    if (this.schedules.has(name)) {
      throw new PeriodicConfigError(
        `PeriodicRegistry.remove(${JSON.stringify(name)}): the job is a stored schedule, which every replica ` +
          `runs from the store; remove it there: registry.schedules.remove(${JSON.stringify(name)})`,
      );
    }
    this.removing.add(scheduler);
    try {
      await scheduler.stop();
    } finally {
      this.removing.delete(scheduler);
    }
    if (this.jobs.get(name) === scheduler) this.jobs.delete(name);
  }

  /** Manual mode: one tick of the job; resolves once the guard has been evaluated and the run, if any, started. */
  async tick(name: string): Promise<TickResult> {
    return this.entry(name, 'tick').tick();
  }

  /** Manual mode: one tick of the job; resolves with the run's exit reason once it has ended. */
  async syncTick(name: string, options?: { timeout?: number }): Promise<SyncTickResult> {
    return this.entry(name, 'syncTick').syncTick(options);
  }

  /**
   * Performs one tick of the job now, in auto or manual mode, as a manual tick does (guard, overlap policy,
   * events); the grid does not move. Resolves once the guard has been evaluated and the run, if any, started.
   */
  async trigger(name: string, options?: PeriodicOperationOptions): Promise<TickResult> {
    return this.entry(name, 'trigger').trigger(options);
  }

  /**
   * Runs every slot of the job's schedule in `[from, to)`, oldest first, one at a time, after its own due slots
   * (`origin: 'backfill'`); an exclusive job's on the holder, and across handovers. Resolves the number of slots
   * ([policies](docs/policies.md#backfill)).
   */
  async backfill(name: string, options: PeriodicBackfillOptions): Promise<{ slots: number }> {
    return this.entry(name, 'backfill').backfill(options);
  }

  /** Drops the slots of the job's backfill under way that have not started; resolves how many. */
  async cancelBackfill(name: string, options?: PeriodicOperationOptions): Promise<number> {
    return this.entry(name, 'cancelBackfill').cancelBackfill(options);
  }

  /**
   * The job's ticks start nothing until `resume(name)`; runs in flight go on. An exclusive job is paused for
   * the whole fleet, in the coordinator's store: resolves once it is there; any other job in this
   * process only. `by` and `note` go to the job's audit trail.
   */
  async pause(name: string, options?: PeriodicOperationOptions): Promise<void> {
    return this.entry(name, 'pause').pause(options);
  }

  /** The job's ticks start runs again, from the next slot of its grid (shifted mode: `every` from now). */
  async resume(name: string, options?: PeriodicOperationOptions): Promise<void> {
    return this.entry(name, 'resume').resume(options);
  }

  /**
   * The job's pauses, resumes and triggers, newest first: the fleet's for an exclusive job; a stored schedule's
   * changes too, read from the store after its removal.
   */
  async audit(name: string, options?: { limit?: number }): Promise<PeriodicAuditEntry[]> {
    if (!this.jobs.has(name)) {
      const removed = await this.schedules.removedAudit(name, options);
      if (removed !== undefined) return removed;
    }
    return this.entry(name, 'audit').audit(options);
  }

  /**
   * The job's latest runs, newest first, a run in flight included: the fleet's for an exclusive job (read from
   * the coordinator's store by any replica), this process's for the others; a stored schedule's, from the store,
   * after its removal too. `limit` 1 to 10,000 (default 50; above `history.keep`, what is kept); `before`: only
   * runs started before it.
   */
  async history(name: string, options?: { limit?: number; before?: Date }): Promise<PeriodicRunRecord[]> {
    if (!this.jobs.has(name)) {
      const removed = await this.schedules.removedHistory(name, options);
      if (removed !== undefined) return removed;
    }
    return this.entry(name, 'history').history(options);
  }

  /**
   * An exclusive job as the fleet sees it, read from the store by any replica: holder, pause, slots, last run
   * and failures across the fleet, and the store's reachability as this replica sees it. Never waits more than
   * `leaseMs / 3` for the store: what it could not read is null. A job that is not exclusive is this process's.
   */
  async fleetStatus(name: string): Promise<PeriodicFleetStatus> {
    return this.withHandlers(await this.entry(name, 'fleetStatus').fleetStatus());
  }

  /** A stored schedule's fleet status says which replicas lack its handler, when no live one has it. */
  private withHandlers(status: PeriodicFleetStatus): PeriodicFleetStatus {
    const missing = this.schedules.handlerMissing(status.name);
    // The status is made for this answer: told in place (a spread would make each of 100,000 an object of a
    // shape of its own).
    if (missing !== undefined) status.handlerMissing = missing;
    return status;
  }

  /** @internal The jobs whose state is the fleet's, kept in the coordinator's store, in registration order. */
  fleetJobs(): PeriodicScheduler[] {
    return this.getAll().filter((scheduler) => scheduler.fleetReplica !== undefined);
  }

  /** The fleet status of every job, in the order they were registered: one read of the store for them all. */
  async fleetStatusAll(): Promise<PeriodicFleetStatus[]> {
    return (await fleetStatusAll(this.getAll())).map((status) => this.withHandlers(status));
  }

  /** What the job is doing, and what it did last. */
  status(name: string): PeriodicJobStatus {
    return this.entry(name, 'status').status();
  }

  /** The status of every job, in the order they were registered. */
  statusAll(): PeriodicJobStatus[] {
    return Array.from(this.jobs.values(), (scheduler) => scheduler.status());
  }

  /** Adds a job's scheduler; a name already taken is a `PeriodicConfigError` naming both places. */
  private register(scheduler: PeriodicScheduler): void {
    const existing = this.jobs.get(scheduler.name);
    const place = placeOf(scheduler);
    if (existing !== undefined && this.removing.has(existing)) {
      throw new PeriodicConfigError(
        `${place}: the job "${scheduler.name}" is still being removed (its runs are draining); await ` +
          `registry.remove(${JSON.stringify(scheduler.name)}) before adding a job of this name again`,
      );
    }
    if (existing !== undefined) {
      throw new PeriodicConfigError(
        `two jobs are named "${scheduler.name}": ${placeOf(existing)} and ${place}; ` +
          'names must be unique in the application: give one of them another { name }',
      );
    }
    scheduler.registered = ++this.registeredLast;
    this.jobs.set(scheduler.name, scheduler);
  }

  /**
   * @internal Registers a job and starts it if the application has bootstrapped already (a job added at run
   * time, or found in a module loaded lazily); otherwise it starts with the others.
   */
  adopt(scheduler: PeriodicScheduler, start = true): void {
    this.register(scheduler);
    if (start && this.phase === 'bootstrapped') scheduler.start();
  }

  /** @internal Forgets a job whose scheduler has stopped (a stored schedule changed or removed). */
  unregister(scheduler: PeriodicScheduler): void {
    if (this.jobs.get(scheduler.name) === scheduler) this.jobs.delete(scheduler.name);
  }

  /** @internal The job named `name`, if there is one. */
  find(name: string): PeriodicScheduler | undefined {
    return this.jobs.get(name);
  }

  /** @internal Where the job `name` comes from, if there is one. */
  placeOf(name: string): string | DecoratedPlace | undefined {
    const scheduler = this.jobs.get(name);
    return scheduler === undefined ? undefined : placeOf(scheduler);
  }

  /** @internal The names of the jobs of decorated methods, in the order they were registered. */
  decoratedNames(): string[] {
    return [...this.jobs]
      .filter(([, scheduler]) => scheduler.method instanceof DecoratedPlace)
      .map(([name]) => name);
  }

  /** @internal The application has bootstrapped, all of it: every job starts. */
  bootstrap(): void {
    if (this.phase !== 'created') return;
    this.phase = 'bootstrapped';
    for (const scheduler of this.jobs.values()) {
      if (scheduler.state === 'idle') scheduler.start();
    }
    this.schedules.start();
  }

  /** @internal Whether the application has begun to close. */
  get closing(): boolean {
    return this.phase === 'closing';
  }

  /** @internal The application has begun to close: no job starts a run any more; each drains in its turn. */
  halt(): void {
    this.phase = 'closing';
    for (const scheduler of this.jobs.values()) scheduler.halt();
  }

  /** @internal Stops every job and resolves once every run has ended. */
  async close(): Promise<void> {
    this.halt();
    await Promise.all(this.getAll().map((scheduler) => scheduler.stop()));
    await this.schedules.close();
  }

  private entry(name: string, method: string): PeriodicScheduler {
    const scheduler = this.jobs.get(name);
    if (scheduler !== undefined) return scheduler;
    const names = [...this.jobs.keys()];
    const where = `PeriodicRegistry.${method}(${describeValue(name)})`;
    if (names.length === 0) {
      throw new PeriodicNotFoundError(
        `${where}: no job is registered` +
          (this.phase === 'created'
            ? ' yet: jobs are discovered when the application initialises (init())'
            : ''),
      );
    }
    const hint = typeof name === 'string' ? nearest(name, names) : undefined;
    throw new PeriodicNotFoundError(
      `${where}: no job has this name${hint === undefined ? '.' : `; did you mean "${hint}"?`} ` +
        `The jobs are: ${names.map((known) => JSON.stringify(known)).join(', ')}.`,
    );
  }
}
