import { Logger } from '@nestjs/common';
import type { ModulesContainer } from '@nestjs/core';
import { LOGGER_CONTEXT, PERIODIC_MODULE_OPTIONS } from './periodic.constants.js';
import { PeriodicEvents } from './periodic.events.js';
import {
  DEFAULT_LOG_LEVELS,
  eventLogger,
  LOG_KINDS,
  LOG_LEVELS,
  type PeriodicLoggerLevels,
} from './periodic.logger.js';
import { PeriodicRegistry } from './periodic.registry.js';
import { describeValue, PeriodicConfigError } from './scheduler/errors.js';
import {
  JOB_OPTION_NAMES,
  type PeriodicOptions,
  type PeriodicSchedulerOptions,
  RULES,
  type SchedulerMode,
} from './scheduler/options.js';
import { checkedOptions, nearest, type OptionRule, readOptions } from './scheduler/rules.js';
import { type PeriodicCoordinator, reportCoordinatorTo } from './scheduler/coordinator.js';
import type { PeriodicContext } from './scheduler/run.js';

/** Options of a decorated job given by name in the module's `jobs`: any option but `name`. */
export type PeriodicJobOverrides = Partial<Omit<PeriodicOptions, 'name'>>;

/** Options of `PeriodicModule.forRoot()`. */
export interface PeriodicModuleOptions {
  /** The mode of every job that does not set its own; `'manual'` for tests. @default 'auto' */
  mode?: SchedulerMode;
  /**
   * Log events through Nest's `Logger`, context `Periodic`: `true` at the default levels, `false` not at all,
   * or an object of the levels to change, e.g. `{ started: 'debug', finished: 'debug' }`. @default true
   */
  logger?: boolean | PeriodicLoggerLevels;
  /** Shares the leases of `exclusive` jobs between the application's replicas. @default none */
  coordinator?: PeriodicCoordinator;
  /**
   * Options of decorated jobs by job name, over those of their `@Periodic()`, e.g. from configuration;
   * `{ mode: 'manual' }` switches a job off. @default none
   */
  jobs?: Record<string, PeriodicJobOverrides>;
  /**
   * Record every run as an OpenTelemetry span, and the metrics of runs and ticks, through
   * `@opentelemetry/api` (an optional peer). @default false
   */
  telemetry?: boolean;
}

/** The module's options, validated, with defaults filled in. */
export interface ResolvedModuleOptions {
  readonly mode: SchedulerMode;
  /** The level of each kind of line; `false`: no event is logged. */
  readonly logger: Required<PeriodicLoggerLevels> | false;
  readonly coordinator: PeriodicCoordinator | undefined;
  readonly jobs: Readonly<Record<string, PeriodicJobOverrides>>;
  readonly telemetry: boolean;
}

const isObject = (value: unknown): value is object =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

const MODULE_RULES = {
  mode: RULES.mode,
  logger: {
    accepts: (value) => typeof value === 'boolean' || isObject(value),
    expected: "true, false or an object of levels such as { started: 'debug' }",
  },
  coordinator: RULES.coordinator,
  jobs: {
    accepts: isObject,
    expected: "an object of options by job name such as { 'Cleanup.purge': { every: 30_000 } }",
  },
  telemetry: { accepts: (value) => typeof value === 'boolean', expected: 'true or false' },
} satisfies Record<keyof PeriodicModuleOptions, OptionRule>;
/** The rules of every option of a job but its name, which is how `jobs` finds it. */
const OVERRIDE_RULES = Object.fromEntries(
  JOB_OPTION_NAMES.filter((name) => name !== 'name').map((name) => [name, RULES[name as keyof typeof RULES]]),
);

/** Validates the options of `forRoot()` (or those `forRootAsync()`'s factory built) and fills in the defaults. */
export function resolveModuleOptions(input: unknown, where: string): ResolvedModuleOptions {
  const given = checkedOptions(where, input, MODULE_RULES, "{ mode: 'manual' }") as PeriodicModuleOptions;
  const { mode = 'auto', coordinator, telemetry = false } = given;
  const logger = logLevels(where, given.logger);
  return { mode, logger, coordinator, jobs: jobOverrides(where, given.jobs), telemetry };
}

function logLevels(where: string, logger: unknown): ResolvedModuleOptions['logger'] {
  if (logger === undefined || logger === true) return DEFAULT_LOG_LEVELS;
  if (logger === false) return false;
  if (typeof (logger as { log?: unknown }).log === 'function') {
    throw new PeriodicConfigError(
      `${where}: "logger" takes true, false or a level per kind of line such as { started: 'debug' }, got a ` +
        "logger object; the package logs through Nest's Logger, so give your logger to Nest: " +
        'NestFactory.create(AppModule, { logger }) or app.useLogger(logger)',
    );
  }
  const given = readOptions(`${where}: "logger"`, logger, LOG_KINDS, "{ started: 'debug' }");
  for (const [kind, level] of Object.entries(given)) {
    if (level === false || LOG_LEVELS.includes(level as never)) continue;
    const hint = typeof level === 'string' ? nearest(level, LOG_LEVELS) : undefined;
    throw new PeriodicConfigError(
      `${where}: "logger.${kind}" must be ${LOG_LEVELS.map((known) => `'${known}'`).join(', ')} or false, ` +
        `got ${describeValue(level)}${hint === undefined ? '' : `; did you mean '${hint}'?`}`,
    );
  }
  return { ...DEFAULT_LOG_LEVELS, ...given };
}

// Without a prototype, so that no job name (`constructor`, `__proto__`) finds an inherited property.
const NO_OVERRIDES: ResolvedModuleOptions['jobs'] = Object.freeze(
  Object.create(null) as Record<string, never>,
);

/** Checks each job's overrides as `@Periodic()` checks its options, each on its own. */
function jobOverrides(where: string, jobs: PeriodicModuleOptions['jobs']): ResolvedModuleOptions['jobs'] {
  if (jobs === undefined) return NO_OVERRIDES;
  const overrides = Object.create(null) as Record<string, PeriodicJobOverrides>;
  for (const [name, options] of Object.entries(jobs)) {
    const job = `${where}: jobs[${JSON.stringify(name)}]`;
    if (typeof options === 'object' && options !== null && 'name' in options) {
      throw new PeriodicConfigError(
        `${job}: "name" cannot be overridden, it is how "jobs" finds the job; rename the job in its ` +
          '@Periodic({ name }) instead',
      );
    }
    overrides[name] = checkedOptions(job, options, OVERRIDE_RULES, '{ every: 30_000 }');
  }
  return overrides;
}

/** What one application shares between every import of `PeriodicModule` in it. */
export interface App {
  /**
   * The options of the first import: the one nearest the root module. Until every import's options are built
   * (`settleOptions`), those of the nearest import built so far.
   */
  options: ResolvedModuleOptions;
  readonly registry: PeriodicRegistry;
  readonly events: PeriodicEvents;
  /** The explorer that discovers the jobs: the first to initialise; the others stand by. */
  explorer: object | undefined;
  /** With `telemetry: true`, once the explorer has loaded it: what calls each run inside its span. */
  telemetry: { run(context: PeriodicContext, job: Job): unknown } | undefined;
  /** A job's function, to call through the telemetry once there is one. */
  traced(job: Job): Job;
}

type Job = PeriodicSchedulerOptions['run'];

const apps = new WeakMap<ModulesContainer, App>();

/**
 * The registry and emitter of the application that owns `container`, made when the first of them is injected,
 * so that a job added before the module initialises (from a constructor or a factory) finds them. `given` are
 * the options of the import asking, which apply until nearer ones are built: a `forRootAsync()` whose factory
 * awaits I/O is built after a feature module's `forRoot()`, and still wins once it is (`settleOptions`).
 */
export function appOf(container: ModulesContainer, given: ResolvedModuleOptions): App {
  let app = apps.get(container);
  if (app === undefined) {
    // The event logger names a job's timeout, which only the registry knows; it is read when a run times out.
    const timeoutOf = (name: string): number => (registry.has(name) ? registry.get(name).options.timeout : 0);
    const events = new PeriodicEvents();
    // Read on each run: jobs are made before the explorer loads the telemetry. Without it, jobs are called as
    // they are.
    const traced = (job: Job): Job =>
      shared.options.telemetry
        ? (context) => (shared.telemetry === undefined ? job(context) : shared.telemetry.run(context, job))
        : job;
    const registry: PeriodicRegistry = new PeriodicRegistry(
      events,
      {
        get mode() {
          return shared.options.mode;
        },
        get coordinator() {
          return shared.options.coordinator;
        },
      },
      traced,
    );
    const shared: App = {
      options: importedOptions(container)[0] ?? given,
      registry,
      events,
      explorer: undefined,
      telemetry: undefined,
      traced,
    };
    events.logWith(loggerOf(shared.options, timeoutOf));
    apps.set(container, (app = shared));
    unsettled.set(shared, timeoutOf);
  }
  return app;
}

/** The apps whose options may still change, with how their event logger finds a job's timeout. */
const unsettled = new WeakMap<App, (name: string) => number>();

/**
 * Every import's options are built (the module initialises): the first import's apply from now on, to the
 * registry, the event logger and the coordinator's failures.
 */
export function settleOptions(app: App, container: ModulesContainer): void {
  const timeoutOf = unsettled.get(app);
  if (timeoutOf === undefined) return;
  unsettled.delete(app);
  app.options = importedOptions(container)[0] ?? app.options;
  app.events.logWith(loggerOf(app.options, timeoutOf));
  // Failures of the store are logged whatever `logger` says: they stop exclusive jobs.
  if (app.options.coordinator !== undefined)
    reportCoordinatorTo(app.options.coordinator, new Logger(LOGGER_CONTEXT));
}

function loggerOf(options: ResolvedModuleOptions, timeoutOf: (name: string) => number) {
  return options.logger === false ? undefined : eventLogger(options.logger, timeoutOf);
}

/**
 * The options of every import of `PeriodicModule` whose options are built already, the import nearest the root
 * module first (then in the container's order).
 */
export function importedOptions(container: ModulesContainer): ResolvedModuleOptions[] {
  const found: { options: ResolvedModuleOptions; distance: number }[] = [];
  for (const module of container.values()) {
    const options: unknown = module.providers.get(PERIODIC_MODULE_OPTIONS)?.instance;
    if (options !== undefined && options !== null) {
      found.push({ options: options as ResolvedModuleOptions, distance: module.distance });
    }
  }
  return found.sort((a, b) => a.distance - b.distance).map((import_) => import_.options);
}
