import {
  Injectable,
  Logger,
  type OnApplicationBootstrap,
  type OnModuleDestroy,
  type OnModuleInit,
  Scope,
} from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { LOGGER_CONTEXT, PERIODIC_MODULE_OPTIONS } from './periodic.constants.js';
import { periodicOptionsOf } from './periodic.decorator.js';
import { PeriodicEvents } from './periodic.events.js';
import { Lifecycle } from './periodic.lifecycle.js';
import { eventLogger } from './periodic.logger.js';
import type { ResolvedModuleOptions } from './periodic.module.js';
import { PeriodicRegistry } from './periodic.registry.js';
import { PeriodicConfigError } from './scheduler/errors.js';
import { checkOptionsObject, JOB_OPTION_NAMES, type PeriodicOptions } from './scheduler/options.js';
import { PeriodicScheduler } from './scheduler/periodic-scheduler.js';

/** What the explorer reads of Nest's `InstanceWrapper`: the same in Nest 11 and 12. */
interface Wrapper {
  readonly metatype: unknown;
  readonly instance: unknown;
  readonly inject?: unknown;
  readonly scope?: Scope;
  readonly isAlias: boolean;
  readonly isTransient: boolean;
  isDependencyTreeStatic(): boolean;
  getCtorMetadata(): (Wrapper | undefined)[] | undefined;
  getPropertiesMetadata(): { wrapper: Wrapper }[] | undefined;
  getStaticTransientInstances(): { instance: unknown }[];
}

/** What the explorer reads of Nest's `Module`. */
interface NestModule {
  readonly metatype: { name: string };
  readonly providers: Map<unknown, Wrapper>;
  readonly controllers: Map<unknown, Wrapper>;
}

/** The registry and emitter of one application, shared by every import of `PeriodicModule` in it. */
interface App {
  readonly registry: PeriodicRegistry;
  readonly events: PeriodicEvents;
  /** The explorer that discovers the jobs: the first to initialise; the others stand by. */
  explorer?: PeriodicExplorer;
}

const apps = new WeakMap<ModulesContainer, App>();

/** The registry and emitter of the application that owns `container`. */
export function appOf(container: ModulesContainer): App {
  let app = apps.get(container);
  if (app === undefined) {
    const events = new PeriodicEvents();
    apps.set(container, (app = { events, registry: new PeriodicRegistry(events) }));
  }
  return app;
}

/**
 * Finds every `@Periodic()` method at bootstrap, gives each a scheduler, and ties it to its host's lifecycle:
 * a job starts once its host and every provider the host depends on have bootstrapped, and is drained before
 * any of them is destroyed.
 */
@Injectable()
export class PeriodicExplorer implements OnModuleInit, OnApplicationBootstrap, OnModuleDestroy {
  private readonly app: App;
  private readonly lifecycle: Lifecycle;

  constructor(private readonly container: ModulesContainer) {
    this.app = appOf(container);
    this.lifecycle = new Lifecycle(this.app.registry);
  }

  onModuleInit(): void {
    if (this.app.explorer !== undefined) return;
    this.app.explorer = this;
    const { mode, logger, coordinator } = this.moduleOptions();
    const { registry, events } = this.app;
    registry.mode = mode;
    registry.coordinator = coordinator;
    // Failures of Redis are logged whatever `logger` says: they stop exclusive jobs.
    if (coordinator !== undefined) coordinator.log = new Logger(LOGGER_CONTEXT);
    if (logger) {
      events.log = eventLogger((name) => (registry.has(name) ? registry.get(name).options.timeout : 0));
    }
    this.discover();
  }

  onApplicationBootstrap(): void {
    if (this.app.explorer !== this) return;
    this.app.registry.bootstrap();
    this.lifecycle.bootstrap();
  }

  async onModuleDestroy(): Promise<void> {
    if (this.app.explorer === this) await this.app.registry.close();
  }

  private modules(): NestModule[] {
    return [...this.container.values()] as unknown as NestModule[];
  }

  /** The options of the first import of `PeriodicModule`; later imports with other options get a warning. */
  private moduleOptions(): ResolvedModuleOptions {
    const imported = this.modules().flatMap((module) => {
      const options = module.providers.get(PERIODIC_MODULE_OPTIONS)?.instance;
      return options === undefined ? [] : [options as ResolvedModuleOptions];
    });
    const [first] = imported;
    const differs = (other: ResolvedModuleOptions) =>
      other.mode !== first.mode || other.logger !== first.logger || other.coordinator !== first.coordinator;
    if (imported.some(differs)) {
      const coordinator = first.coordinator === undefined ? '' : ', coordinator: (the first one)';
      new Logger(LOGGER_CONTEXT).warn(
        `PeriodicModule is imported ${imported.length} times with different options; the first import's ` +
          `apply: { mode: '${first.mode}', logger: ${first.logger}${coordinator} }`,
      );
    }
    return first;
  }

  private discover(): void {
    const { registry, events } = this.app;
    const found = new Map<object, Set<string | symbol>>();
    for (const module of this.modules()) {
      for (const wrapper of [...module.providers.values(), ...module.controllers.values()]) {
        if (wrapper.isAlias) continue;
        const scanned = scanTarget(wrapper);
        if (scanned === undefined) continue;
        const { className, prototype } = scanned;
        let dependencies: object[] | undefined;
        for (const [key, options] of decoratedMethods(prototype)) {
          const where = `@Periodic() on ${className}.${String(key)}`;
          // Only a provider that has a job is asked for its scope, which walks its dependency tree.
          refuseScope(where, className, wrapper);
          const instance = wrapper.instance as object;
          const keys = found.get(instance) ?? new Set();
          if (keys.has(key)) continue; // the same instance provided by two modules
          found.set(instance, keys.add(key));
          const scheduler = new PeriodicScheduler(
            schedulerOptions(where, options, `${className}.${String(key)}`, instance, key, registry),
            events,
            where,
          );
          registry.register(scheduler, `${where} (in ${module.metatype.name})`);
          this.lifecycle.tie(scheduler, instance, (dependencies ??= dependenciesOf(wrapper)));
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

/** Every decorated method on a prototype chain, by the key it is called with, nearest class first. */
function* decoratedMethods(prototype: object): Generator<[string | symbol, unknown]> {
  const keys = new Set<string | symbol>();
  for (let proto: object | null = prototype; proto !== null && proto !== Object.prototype;) {
    for (const key of Reflect.ownKeys(proto)) {
      if (key === 'constructor' || keys.has(key)) continue;
      keys.add(key);
      const decorated = periodicOptionsOf(Object.getOwnPropertyDescriptor(proto, key)?.value);
      if (decorated !== undefined) yield [key, decorated.options];
    }
    proto = Object.getPrototypeOf(proto) as object | null;
  }
}

/** The engine's options for a decorated method: default name, the module's mode, `when` given the instance. */
function schedulerOptions(
  where: string,
  given: unknown,
  defaultName: string,
  instance: object,
  key: string | symbol,
  registry: PeriodicRegistry,
): ConstructorParameters<typeof PeriodicScheduler>[0] {
  // Not an object: the engine's validation says so.
  if (typeof given !== 'object' || given === null) return given as never;
  if ('run' in given) {
    throw new PeriodicConfigError(
      `${where}: "run" is not an option of @Periodic(); the decorated method is the job`,
    );
  }
  checkOptionsObject(where, given, JOB_OPTION_NAMES, '{ every: 60_000 }');
  const options = given as PeriodicOptions;
  const { when } = options;
  const method = instance as Record<string | symbol, (context: unknown) => unknown>;
  // Every option spelled out, in one shape for all jobs, rather than spread: the engine reads each of them,
  // and reads from objects of one shape are what keep a bootstrap of thousands of jobs fast.
  return {
    every: options.every,
    name: options.name ?? defaultName,
    initialDelay: options.initialDelay,
    delayMode: options.delayMode,
    when: typeof when === 'function' ? () => options.when!(instance) : (when as undefined),
    onOverlap: options.onOverlap,
    timeout: options.timeout,
    jobShutdown: options.jobShutdown,
    mode: options.mode ?? registry.mode,
    exclusive: options.exclusive,
    coordinator: registry.coordinator,
    // Looked up on each run, so that a spy installed on the instance in a test sees the calls.
    run: (context) => method[key](context),
  };
}

/** The instances a provider depends on, directly or not, through its constructor and its properties. */
function dependenciesOf(host: Wrapper): object[] {
  const seen = new Set<Wrapper>([host]);
  const instances = new Set<object>();
  const visit = (wrapper: Wrapper): void => {
    const properties = (wrapper.getPropertiesMetadata() ?? []).map((property) => property.wrapper);
    for (const dependency of [...(wrapper.getCtorMetadata() ?? []), ...properties]) {
      if (dependency === undefined || seen.has(dependency)) continue;
      seen.add(dependency);
      const candidates = dependency.isTransient
        ? dependency.getStaticTransientInstances().map((transient) => transient.instance)
        : [dependency.instance];
      for (const instance of candidates) {
        if (typeof instance === 'object' && instance !== null) instances.add(instance);
      }
      visit(dependency);
    }
  };
  visit(host);
  return [...instances];
}
