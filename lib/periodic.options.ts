import { Logger } from '@nestjs/common';
import type { ModulesContainer } from '@nestjs/core';
import { LOGGER_CONTEXT, PERIODIC_MODULE_OPTIONS } from './periodic.constants.js';
import { PeriodicEvents } from './periodic.events.js';
import { eventLogger } from './periodic.logger.js';
import { PeriodicRegistry } from './periodic.registry.js';
import { describeValue, PeriodicConfigError } from './scheduler/errors.js';
import { checkOption, readOptions, type SchedulerMode } from './scheduler/options.js';
import { type PeriodicCoordinator, reportCoordinatorTo } from './scheduler/coordinator.js';

/** Options of `PeriodicModule.forRoot()`. */
export interface PeriodicModuleOptions {
  /** The mode of every job that does not set its own; `'manual'` for tests. @default 'auto' */
  mode?: SchedulerMode;
  /** Log events through Nest's `Logger`, context `Periodic`. @default true */
  logger?: boolean;
  /** Shares the leases of `exclusive` jobs between the application's replicas. @default none */
  coordinator?: PeriodicCoordinator;
}

/** The module's options, validated, with defaults filled in. */
export type ResolvedModuleOptions = Required<Omit<PeriodicModuleOptions, 'coordinator'>> &
  Pick<PeriodicModuleOptions, 'coordinator'>;

const MODULE_OPTIONS = ['mode', 'logger', 'coordinator'];

/** Validates the options of `forRoot()` (or those `forRootAsync()`'s factory built) and fills in the defaults. */
export function resolveModuleOptions(input: unknown, where: string): ResolvedModuleOptions {
  const given = readOptions(
    where,
    input ?? {},
    MODULE_OPTIONS,
    "{ mode: 'manual' }",
  ) as PeriodicModuleOptions;
  const { mode = 'auto', logger = true, coordinator } = given;
  checkOption(where, 'mode', mode);
  if (typeof logger !== 'boolean') {
    throw new PeriodicConfigError(`${where}: "logger" must be true or false, got ${describeValue(logger)}`);
  }
  if (coordinator !== undefined) checkOption(where, 'coordinator', coordinator);
  return { mode, logger, coordinator };
}

/** What one application shares between every import of `PeriodicModule` in it. */
export interface App {
  /** The options of the first import. */
  readonly options: ResolvedModuleOptions;
  readonly registry: PeriodicRegistry;
  readonly events: PeriodicEvents;
  /** The explorer that discovers the jobs: the first to initialise; the others stand by. */
  explorer: object | undefined;
}

const apps = new WeakMap<ModulesContainer, App>();

/**
 * The registry and emitter of the application that owns `container`, made with the module's options when the
 * first of them is injected, so that a job added before the module initialises (from a constructor or a
 * factory) gets those options too. `given` are the options of the import asking; the first import's apply, as
 * far as they are known yet: those of `forRoot()` always are.
 */
export function appOf(container: ModulesContainer, given: ResolvedModuleOptions): App {
  let app = apps.get(container);
  if (app === undefined) {
    const options = importedOptions(container)[0] ?? given;
    // The event logger names a job's timeout, which only the registry knows; it is read when a run times out.
    const timeoutOf = (name: string): number => (registry.has(name) ? registry.get(name).options.timeout : 0);
    const events = new PeriodicEvents(options.logger ? eventLogger(timeoutOf) : undefined);
    const registry: PeriodicRegistry = new PeriodicRegistry(events, options);
    // Failures of the store are logged whatever `logger` says: they stop exclusive jobs.
    if (options.coordinator !== undefined)
      reportCoordinatorTo(options.coordinator, new Logger(LOGGER_CONTEXT));
    apps.set(container, (app = { options, registry, events, explorer: undefined }));
  }
  return app;
}

/** The options of every import of `PeriodicModule` whose options are built already, in the container's order. */
export function importedOptions(container: ModulesContainer): ResolvedModuleOptions[] {
  const found: ResolvedModuleOptions[] = [];
  for (const module of container.values()) {
    const options: unknown = module.providers.get(PERIODIC_MODULE_OPTIONS)?.instance;
    if (options !== undefined && options !== null) found.push(options as ResolvedModuleOptions);
  }
  return found;
}
