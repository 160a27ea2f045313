import { Injectable, Logger, type OnModuleDestroy, type OnModuleInit, Scope } from '@nestjs/common';
import { LazyModuleLoader, ModulesContainer } from '@nestjs/core';
import { PeriodicConfigError } from '../scheduler/errors.js';
import {
  checkOption,
  JOB_OPTION_NAMES,
  jobOptionsOf,
  type PeriodicOptions,
  type PeriodicSchedulerOptions,
} from '../scheduler/options.js';
import { nearest, readOptions } from '../scheduler/rules.js';
import { PeriodicTelemetry } from './telemetry.js';
import { LOGGER_CONTEXT } from './constants.js';
import { handlerNameOf, periodicOptionsOf } from './decorator.js';
import { HandlerPlace } from './schedules.js';
import { PeriodicEvents } from './events.js';
import { Lifecycle } from './lifecycle.js';
import { DEFAULT_LOG_LEVELS, eventLogger } from './logger.js';
import { importedOptions, ModuleSettings, type ResolvedModuleOptions } from './options.js';
import { DecoratedPlace, PeriodicRegistry } from './registry.js';

/** What the explorer reads of Nest's `InstanceWrapper`: the same in Nest 11 and 12. */
interface Wrapper {
  readonly metatype: unknown;
  readonly instance: unknown;
  readonly inject?: unknown;
  readonly scope?: Scope;
  readonly isAlias: boolean;
  readonly isTransient: boolean;
  /** The module the provider is declared in. */
  readonly host?: NestModule;
  isDependencyTreeStatic(): boolean;
  getCtorMetadata(): (Wrapper | undefined)[] | undefined;
  getPropertiesMetadata(): { wrapper: Wrapper }[] | undefined;
  getStaticTransientInstances(): { instance: unknown }[];
}

/** What the explorer reads of Nest's `Module`. */
interface NestModule {
  readonly metatype: { name: string };
  /** From the root module (the least); Nest bootstraps the farthest first and destroys the nearest first. */
  readonly distance: number;
  readonly imports: Set<NestModule>;
  readonly providers: Map<unknown, Wrapper>;
  readonly controllers: Map<unknown, Wrapper>;
  readonly injectables: Map<unknown, Wrapper>;
  readonly middlewares: Map<unknown, Wrapper>;
}

type Load = LazyModuleLoader['load'];

/**
 * Finds every `@Periodic()` method at bootstrap, gives each a scheduler, and ties it to the lifecycle of the
 * application (see {@link Lifecycle}); modules loaded later through `LazyModuleLoader` are searched too.
 */
@Injectable()
export class PeriodicExplorer implements OnModuleInit, OnModuleDestroy {
  /** The modules searched for jobs so far. */
  private readonly searched = new WeakSet<NestModule>();

  constructor(
    private readonly container: ModulesContainer,
    private readonly lazyLoader: LazyModuleLoader,
    private readonly settings: ModuleSettings,
    private readonly registry: PeriodicRegistry,
    private readonly events: PeriodicEvents,
    private readonly telemetry: PeriodicTelemetry,
    private readonly lifecycle: Lifecycle,
  ) {}

  async onModuleInit(): Promise<void> {
    const options = this.settings.settle();
    // The event logger names a job's timeout, which only the registry knows; it is read when a run times out.
    const timeoutOf = (name: string): number =>
      this.registry.has(name) ? this.registry.get(name).options.timeout : 0;
    this.events.logWith(options.logger === false ? undefined : eventLogger(options.logger, timeoutOf));
    await this.telemetry.load();
    this.explore();
  }

  /** Finds the jobs, and starts them once the application has bootstrapped. */
  private explore(): void {
    this.warnOfOtherOptions();
    this.search();
    this.refuseUnknownOverrides();
    const root = this.modules().reduce((nearest, module) =>
      module.distance < nearest.distance ? module : nearest,
    );
    this.lifecycle.startAfter(root.providers.get(root.metatype)!.instance as object, () => this.watchable());
    // Nest calls no lifecycle hook in a module loaded lazily: its jobs start when it is loaded.
    const load = this.lazyLoader.load;
    this.lazyLoader.load = async (...args: Parameters<Load>) => {
      const loaded = await load.apply(this.lazyLoader, args);
      this.search();
      return loaded;
    };
  }

  async onModuleDestroy(): Promise<void> {
    await this.registry.close();
    this.lifecycle.release();
    Reflect.deleteProperty(this.lazyLoader, 'load');
  }

  private modules(): NestModule[] {
    return [...this.container.values()] as unknown as NestModule[];
  }

  /** A later import of `PeriodicModule` with other options than the first's gets a warning. */
  private warnOfOtherOptions(): void {
    const { options } = this.settings;
    const imported = importedOptions(this.container);
    const differs = (other: ResolvedModuleOptions) =>
      other.mode !== options.mode ||
      !sameEntries(other.logger, options.logger) ||
      other.coordinator !== options.coordinator ||
      other.telemetry !== options.telemetry ||
      !sameEntries(other.jobs, options.jobs, sameEntries);
    if (imported.some(differs)) {
      const { mode, logger, coordinator, jobs } = options;
      const levels =
        logger === false || sameEntries(logger, DEFAULT_LOG_LEVELS)
          ? logger !== false
          : '(levels of its own)';
      const named = Object.keys(jobs);
      new Logger(LOGGER_CONTEXT).warn(
        `PeriodicModule is imported ${imported.length} times with different options; the first import's ` +
          `apply: { mode: '${mode}', logger: ${levels}` +
          (coordinator === undefined ? '' : ', coordinator: (the first one)') +
          (named.length === 0 ? '' : `, jobs: ${named.map((name) => JSON.stringify(name)).join(', ')}`) +
          ' }',
      );
    }
  }

  /** A name in the module's `jobs` that is no decorated job's is a typo, or a job since renamed. */
  private refuseUnknownOverrides(): void {
    const overrides = Object.keys(this.settings.options.jobs);
    if (overrides.length === 0) return;
    const names = this.registry.decoratedNames();
    for (const name of overrides) {
      if (names.includes(name)) continue;
      const hint = nearest(name, names);
      throw new PeriodicConfigError(
        `PeriodicModule: "jobs" has options for ${JSON.stringify(name)}, but no @Periodic() method has this ` +
          `name${hint === undefined ? '.' : `; did you mean "${hint}"?`} The decorated jobs are: ` +
          `${names.length === 0 ? '(none)' : names.map((known) => JSON.stringify(known)).join(', ')}. ` +
          '(Jobs added with PeriodicRegistry.add() take their options there.)',
      );
    }
  }

  /** Gives a scheduler to every decorated method in the modules not searched yet. */
  private search(): void {
    const overrides = this.settings.options.jobs;
    for (const module of this.modules()) {
      if (this.searched.has(module)) continue;
      this.searched.add(module);
      for (const wrapper of [...module.providers.values(), ...module.controllers.values()]) {
        if (wrapper.isAlias) continue;
        const scanned = scanTarget(wrapper);
        if (scanned === undefined) continue;
        const { className, prototype } = scanned;
        let ties: Set<object> | undefined;
        // Shared by the jobs of the provider: what names them, and where they come from.
        const prefix = `${className}.`;
        const instance = wrapper.instance as object;
        const provider = { className, module: module.metatype.name, instance };
        for (const [key, decorated, handler] of decoratedMethods(prototype)) {
          if (handler !== undefined) {
            const where = `@PeriodicHandler() on ${className}.${String(key)}`;
            refuseScope(where, className, wrapper);
            ties ??= tiesOf(wrapper);
            this.registry.schedules.handle(new HandlerPlace(handler, provider, key, ties));
          }
          if (decorated === undefined) continue;
          const { options } = decorated;
          const where = `@Periodic() on ${className}.${String(key)}`;
          // Only a provider that has a job is asked for its scope, which walks its dependency tree.
          refuseScope(where, className, wrapper);
          const built = schedulerOptions(where, options, prefix + String(key), instance, key, overrides);
          // The same instance provided by two modules has its jobs once.
          const found = this.registry.placeOf(built.name);
          if (found instanceof DecoratedPlace && found.provider.instance === instance && found.key === key)
            continue;
          const named =
            built.name in overrides
              ? `${where} with jobs[${JSON.stringify(built.name)}] of PeriodicModule`
              : where;
          const scheduler = this.registry.schedulerOf(built, named, new DecoratedPlace(provider, key));
          this.lifecycle.tie(scheduler, (ties ??= tiesOf(wrapper)));
          this.registry.adopt(scheduler);
        }
      }
    }
  }

  /** Every object of the application whose `onModuleDestroy` Nest will call, but the explorers'. */
  private *watchable(): Generator<object> {
    for (const module of this.modules()) {
      for (const map of [module.providers, module.controllers, module.injectables, module.middlewares]) {
        for (const wrapper of map.values()) {
          if (wrapper.isAlias || !wrapper.isDependencyTreeStatic()) continue;
          const instances = wrapper.isTransient
            ? wrapper.getStaticTransientInstances().map((transient) => transient.instance)
            : [wrapper.instance];
          for (const instance of instances) {
            if (
              typeof instance === 'object' &&
              instance !== null &&
              !(instance instanceof PeriodicExplorer)
            ) {
              yield instance;
            }
          }
        }
      }
    }
  }
}

/**
 * The class and prototype to scan for decorated methods: the instance's, or, for a provider with no instance
 * of its own (request-scoped, transient), its class's, so that a decorated method there is refused, not
 * ignored.
 */
function scanTarget(wrapper: Wrapper): { className: string; prototype: object } | undefined {
  const { instance, metatype } = wrapper;
  if (typeof instance === 'object' && instance !== null) {
    const prototype: unknown = Object.getPrototypeOf(instance);
    if (typeof prototype !== 'object' || prototype === null) return undefined;
    return { className: instance.constructor?.name || '(anonymous class)', prototype };
  }
  if (typeof metatype !== 'function' || wrapper.inject) return undefined;
  return { className: metatype.name, prototype: metatype.prototype as object };
}

function refuseScope(where: string, className: string, wrapper: Wrapper): void {
  if (!wrapper.isTransient && wrapper.isDependencyTreeStatic()) return;
  const why = wrapper.isTransient
    ? `${className} is transient (Scope.TRANSIENT)`
    : wrapper.scope === Scope.REQUEST
      ? `${className} is request-scoped (Scope.REQUEST)`
      : `${className} depends on a request-scoped provider, which makes it request-scoped too`;
  throw new PeriodicConfigError(
    `${where}: ${why}, so there is no single instance to run the job on; ` +
      'put the job on a provider of the default (singleton) scope',
  );
}

/**
 * Every decorated method on a prototype chain, by the key it is called with, nearest class first: the options of
 * its `@Periodic()` (undefined without one) and the name of its `@PeriodicHandler()` (likewise). Nest's
 * `MetadataScanner.getAllMethodNames` walks the chain the same way but sees string keys only: a job on a method
 * named by a symbol would be dropped without a word.
 */
function* decoratedMethods(
  prototype: object,
): Generator<
  [key: string | symbol, periodic: { options: unknown } | undefined, handler: string | undefined]
> {
  const keys = new Set<string | symbol>();
  for (let proto: object | null = prototype; proto !== null && proto !== Object.prototype;) {
    for (const key of Reflect.ownKeys(proto)) {
      if (key === 'constructor' || keys.has(key)) continue;
      keys.add(key);
      const method: unknown = Object.getOwnPropertyDescriptor(proto, key)?.value;
      const decorated = periodicOptionsOf(method);
      const handler = handlerNameOf(method);
      if (decorated !== undefined || handler !== undefined) yield [key, decorated, handler];
    }
    proto = Object.getPrototypeOf(proto) as object | null;
  }
}

/**
 * The engine's options for a decorated method: every option of the table, from the decorator and the module's
 * `jobs`; the default name; `when` given the instance.
 */
function schedulerOptions(
  where: string,
  given: unknown,
  defaultName: string,
  instance: object,
  key: string | symbol,
  overrides: ResolvedModuleOptions['jobs'],
): Omit<PeriodicSchedulerOptions, 'coordinator'> {
  if (typeof given === 'object' && given !== null && 'run' in given) {
    throw new PeriodicConfigError(
      `${where}: "run" is not an option of @Periodic(); the decorated method is the job`,
    );
  }
  const decorated = readOptions(
    where,
    given,
    JOB_OPTION_NAMES,
    '{ every: 60_000 }',
  ) as Partial<PeriodicOptions>;
  const override = overrides[decorated.name ?? defaultName];
  if (override !== undefined) {
    // The decorator's own values are checked too: an override must not hide a mistake in the code.
    for (const [option, value] of Object.entries(decorated)) checkOption(where, option as never, value);
  }
  const options = override === undefined ? decorated : overridden(decorated, override);
  // Every option of the table, in one order for all jobs: reads from objects of one shape are what keep a
  // bootstrap of thousands of jobs fast.
  const built = jobOptionsOf(options, {
    name: options.name ?? defaultName,
    // The method the instance inherits; one that a test's spy puts on the instance is called instead.
    run: (instance as Record<string | symbol, unknown>)[key],
  });
  const { when } = options;
  const whenOwner = override?.when === undefined ? given : override;
  if (typeof when === 'function') built.when = () => when.call(whenOwner, instance);
  return built as unknown as Omit<PeriodicSchedulerOptions, 'coordinator'>;
}

/**
 * A job's options with those the module's `jobs` gives it. A schedule given there replaces the decorator's:
 * `cron` drops its `every`, `initialDelay`, `delayMode` and `at`; `every` drops its `cron`, `timezone` and `at`; `at`
 * drops `every`, `cron`, `initialDelay`, `delayMode` and `catchUp`.
 */
function overridden(
  decorated: Partial<PeriodicOptions>,
  override: Partial<PeriodicOptions>,
): Partial<PeriodicOptions> {
  const options = { ...decorated };
  if (override.cron !== undefined || override.at !== undefined) {
    delete options.every;
    delete options.initialDelay;
    delete options.delayMode;
  }
  if (override.every !== undefined) {
    delete options.cron;
    delete options.timezone;
  }
  if (override.every !== undefined || override.cron !== undefined) delete options.at;
  if (override.at !== undefined) {
    delete options.cron;
    delete options.catchUp;
  }
  return { ...options, ...override };
}

/** Whether two objects have the same keys with the same values (`same` compares the values). */
function sameEntries(
  a: object | false,
  b: object | false,
  same: (x: never, y: never) => boolean = Object.is,
): boolean {
  if (a === false || b === false) return a === b;
  const keys = Object.keys(a);
  return (
    keys.length === Object.keys(b).length &&
    keys.every((key) => key in b && same(a[key as never], b[key as never]))
  );
}

/**
 * The objects a job hangs on: its host, every provider the host depends on, directly or not, through its
 * constructor and its properties, and the module classes of the modules these sit in and of those the host's
 * module imports (a module class often opens a pool in its own hooks).
 */
function tiesOf(host: Wrapper): Set<object> {
  const ties = new Set<object>();
  const add = (instance: unknown) => {
    if (typeof instance === 'object' && instance !== null) ties.add(instance);
  };
  const modules = new Set<NestModule>(host.host === undefined ? [] : [host.host, ...host.host.imports]);
  const seen = new Set<Wrapper>([host]);
  const visit = (wrapper: Wrapper): void => {
    const properties = (wrapper.getPropertiesMetadata() ?? []).map((property) => property.wrapper);
    for (const dependency of [...(wrapper.getCtorMetadata() ?? []), ...properties]) {
      if (dependency === undefined || seen.has(dependency)) continue;
      seen.add(dependency);
      if (dependency.host !== undefined) modules.add(dependency.host);
      if (dependency.isTransient) {
        for (const transient of dependency.getStaticTransientInstances()) add(transient.instance);
      } else add(dependency.instance);
      visit(dependency);
    }
  };
  add(host.instance);
  visit(host);
  for (const module of modules) add(module.providers.get(module.metatype)?.instance);
  return ties;
}
