import { Inject, Injectable, Logger } from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { StoreLog } from '../scheduler/store-log.js';
import {
  incidentSettings,
  INCIDENTS_RULE,
  type IncidentSettings,
  type PeriodicIncidentOptions,
} from '../scheduler/incidents.js';
import {
  HISTORY_RULE,
  type HistorySettings,
  historySettings,
  type PeriodicHistoryOptions,
} from '../scheduler/history.js';
import { defaultReplicaName, Replica } from '../scheduler/replica.js';
import { describeValue, PeriodicConfigError } from '../scheduler/errors.js';
import {
  JOB_OPTION_NAMES,
  JOB_OPTIONS,
  type PeriodicOptions,
  RULES,
  type SchedulerMode,
} from '../scheduler/options.js';
import {
  checkedOptions,
  NAME_RULE,
  nearest,
  oneOf,
  type OptionRule,
  readOptions,
} from '../scheduler/rules.js';
import type { PeriodicCoordinator } from '../scheduler/coordinator-port.js';
import { CHECK_INS_RULE, type PeriodicCheckIns } from '../scheduler/check-ins.js';
import { LOGGER_CONTEXT, PERIODIC_MODULE_OPTIONS } from './constants.js';
import { DEFAULT_LOG_LEVELS, LOG_KINDS, LOG_LEVELS, type PeriodicLoggerLevels } from './logger.js';

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
   * This process's name in the fleet, as status, history, audit and the store's records show it, e.g. the pod's
   * name. @default `<hostname>:<pid>`
   */
  replica?: string;
  /**
   * Options of decorated jobs by job name, over those of their `@Periodic()`, e.g. from configuration;
   * `{ mode: 'manual' }` switches a job off. @default none
   */
  jobs?: Record<string, PeriodicJobOverrides>;
  /**
   * The run history (docs/operations.md, "Run history"): how many runs, and entries of the audit trail, each job keeps (in the
   * coordinator's store for exclusive jobs, in memory for the others), and whether errors keep their message
   * (`errors: 'name'` keeps only the class name, for errors that may carry secrets); `false` records no run.
   * @default { keep: 100, errors: 'message' }
   */
  history?: PeriodicHistoryOptions | false;
  /**
   * What a run's error becomes wherever it leaves the run: the history, fleet status, the dashboard and its
   * API, with the history on or off. `'name'` keeps only its class name, for errors that may carry secrets
   * (`history.errors` is the same option). @default 'message'
   */
  errors?: 'message' | 'name';
  /**
   * Record every run as an OpenTelemetry span, and the metrics of runs and ticks, through
   * `@opentelemetry/api` (an optional peer). @default false
   */
  telemetry?: boolean;
  /**
   * Check-ins to an outside monitor, for every job that does not set its own `checkIn` (docs/alerts.md): each run
   * pings `POST <url>/start`, `<url>` when it ends normally, `<url>/fail` otherwise; or `send(event)` does.
   * @default none
   */
  checkIns?: PeriodicCheckIns;
  /**
   * When a job opens an incident, once for the fleet, and when it closes (docs/alerts.md): `true` for the
   * defaults, `false` for never.
   * @default { failedSlots: 3, lateAfter: 60_000, hungAfter: 3_600_000, recoverAfter: 1 }
   */
  incidents?: PeriodicIncidentOptions | boolean;
}

/** The module's options, validated, with defaults filled in. */
export interface ResolvedModuleOptions {
  readonly mode: SchedulerMode;
  /** The level of each kind of line; `false`: no event is logged. */
  readonly logger: Required<PeriodicLoggerLevels> | false;
  readonly coordinator: PeriodicCoordinator | undefined;
  readonly replica: string;
  readonly jobs: Readonly<Record<string, PeriodicJobOverrides>>;
  readonly history: HistorySettings;
  readonly errors: 'message' | 'name';
  readonly telemetry: boolean;
  readonly checkIns: PeriodicCheckIns | undefined;
  readonly incidents: IncidentSettings;
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
  replica: {
    ...NAME_RULE,
    expected: `${NAME_RULE.expected}, naming this process, such as process.env.HOSTNAME`,
  },
  jobs: {
    accepts: isObject,
    expected: "an object of options by job name such as { 'Cleanup.purge': { every: 30_000 } }",
  },
  history: HISTORY_RULE,
  errors: oneOf('message', 'name'),
  telemetry: { accepts: (value) => typeof value === 'boolean', expected: 'true or false' },
  checkIns: CHECK_INS_RULE,
  incidents: INCIDENTS_RULE,
} satisfies Record<keyof PeriodicModuleOptions, OptionRule>;
/** The rules of every option of a job but its name, which is how `jobs` finds it. */
const OVERRIDE_RULES = Object.fromEntries(
  JOB_OPTION_NAMES.filter((name) => name !== 'name').map((name) => [name, JOB_OPTIONS[name]]),
);

/** Validates the options of `forRoot()` (or those `forRootAsync()`'s factory built) and fills in the defaults. */
export function resolveModuleOptions(input: unknown, where: string): ResolvedModuleOptions {
  const given = checkedOptions(where, input, MODULE_RULES, "{ mode: 'manual' }") as PeriodicModuleOptions;
  const { mode = 'auto', coordinator, replica = defaultReplicaName(), telemetry = false } = given;
  const logger = logLevels(where, given.logger);
  const history = historySettings(where, given.history);
  const aliased = given.history === undefined || given.history === false ? undefined : given.history.errors;
  if (given.errors !== undefined && aliased !== undefined && given.errors !== aliased) {
    throw new PeriodicConfigError(
      `${where}: "errors" is '${given.errors}' and "history.errors" is '${aliased}': they are one option, ` +
        'what an error becomes wherever it is shown; give one of them',
    );
  }
  const errors = given.errors ?? aliased ?? 'message';
  const resolved = history === false ? history : { ...history, errors };
  return {
    mode,
    logger,
    coordinator,
    replica,
    jobs: jobOverrides(where, given.jobs),
    history: resolved,
    errors,
    telemetry,
    checkIns: given.checkIns,
    incidents: incidentSettings(where, given.incidents),
  };
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

/**
 * The module's options as they apply to the application (a part of the module, not of its public API): those of the import of `PeriodicModule`
 * nearest the root module. Until every import's options are built (`settle()`, when the module initialises),
 * those of the nearest import built so far: a `forRootAsync()` whose factory awaits I/O is built after a
 * feature module's `forRoot()`, and still wins once it is.
 */
@Injectable()
export class ModuleSettings {
  #settled: ResolvedModuleOptions | undefined;
  #replica: Replica | undefined;

  /** @param given the options of an import, which the module's parts wait for when they are made. */
  constructor(
    private readonly container: ModulesContainer,
    @Inject(PERIODIC_MODULE_OPTIONS) private readonly given: ResolvedModuleOptions,
  ) {}

  get options(): ResolvedModuleOptions {
    return this.#settled ?? importedOptions(this.container)[0] ?? this.given;
  }

  /** Every import's options are built: the first import's apply from now on. */
  settle(): ResolvedModuleOptions {
    return (this.#settled ??= this.options);
  }

  /**
   * This replica in the fleet of the module's coordinator, for all the exclusive jobs of the application: their
   * leases are renewed and taken together, and the store's failures are logged at most once per lease period,
   * whatever `logger` says (they stop exclusive jobs).
   */
  get replica(): Replica | undefined {
    const { coordinator, replica } = this.options;
    if (coordinator === undefined) return undefined;
    if (this.#replica?.calls.coordinator !== coordinator || this.#replica.name !== replica) {
      const logger = new Logger(LOGGER_CONTEXT);
      this.#replica = new Replica(new StoreLog(coordinator, logger), replica);
      const { calls } = this.#replica;
      const missing = [
        [calls.operated, 'operate(), readPause() and readAudit()', 'paused, resumed and audited'],
        [calls.recorded, 'recordRuns(), readHistory() and readFleet()', 'recorded and seen'],
        [calls.triggered, 'requestTrigger(), readTrigger() and answerTrigger()', 'triggered'],
      ].filter(([has]) => has === false);
      if (missing.length > 0) {
        logger.log(
          `The coordinator has no ${missing.map(([, steps]) => steps).join(', nor ')}: exclusive jobs are ` +
            `${missing.map(([, , what]) => what).join(', ')} in each replica on its own, not for the fleet ` +
            '(docs/replicas.md, "Writing a coordinator")',
        );
      }
    }
    return this.#replica;
  }
}

/** What the module reads of Nest's `Module`: the same in Nest 11 and 12. */
interface NestModule {
  readonly metatype: unknown;
  /** From the root module (the least); global modules are at the end. */
  readonly distance: number;
  readonly providers: Map<unknown, { readonly instance: unknown; readonly metatype: unknown }>;
}

/**
 * The options of every import of `PeriodicModule` whose options are built already, the import nearest the root
 * module first: breadth first through the imports the modules declare, each module's in their order. (Nest
 * gives global modules, such as these imports, no distance from the root.)
 */
export function importedOptions(container: ModulesContainer): ResolvedModuleOptions[] {
  const modules = [...container.values()] as unknown as NestModule[];
  const root = modules.reduce((nearest, module) => (module.distance < nearest.distance ? module : nearest));
  const declared = declaredImports(root.metatype);
  const found: { options: ResolvedModuleOptions; rank: number }[] = [];
  for (const module of modules) {
    const options = module.providers.get(PERIODIC_MODULE_OPTIONS);
    if (options?.instance === undefined || options.instance === null) continue;
    // The provider the import declared: a value (forRoot) or a factory (forRootAsync), as Nest keeps it.
    const rank = declared.findIndex(
      ({ provider }) => provider.useValue === options.instance || provider.useFactory === options.metatype,
    );
    found.push({ options: options.instance as ResolvedModuleOptions, rank: rank < 0 ? Infinity : rank });
  }
  return found.sort((a, b) => a.rank - b.rank).map((import_) => import_.options);
}

/** An import of `PeriodicModule` as a module declares it, with the provider of its options. */
interface Declared {
  provider: { useValue?: unknown; useFactory?: unknown };
}

/** The imports of `PeriodicModule` declared from `root` down, breadth first. */
function declaredImports(root: unknown): Declared[] {
  const found: Declared[] = [];
  const seen = new Set<unknown>();
  const queue: unknown[] = [root];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (let declared of importsOf(next)) {
      // forwardRef(() => Module)
      const forward = (declared as { forwardRef?: unknown } | null)?.forwardRef;
      if (typeof forward === 'function') declared = forward();
      if (declared === null || (typeof declared !== 'object' && typeof declared !== 'function')) continue;
      if (seen.has(declared)) continue;
      seen.add(declared);
      const { module, providers } = declared as { module?: unknown; providers?: unknown[] };
      const provider = providers?.find(
        (candidate) => (candidate as { provide?: unknown } | null)?.provide === PERIODIC_MODULE_OPTIONS,
      );
      if (module !== undefined && provider !== undefined)
        found.push({ provider: provider as Declared['provider'] });
      queue.push(declared);
    }
  }
  return found;
}

/** The imports a module class, or a dynamic module, declares. */
function importsOf(declared: unknown): unknown[] {
  const staticImports = (type: unknown): unknown[] =>
    typeof type === 'function' ? ((Reflect.getMetadata('imports', type) as unknown[] | undefined) ?? []) : [];
  if (typeof declared === 'function') return staticImports(declared);
  const { module, imports = [] } = declared as { module?: unknown; imports?: unknown[] };
  return [...staticImports(module), ...imports];
}
