import {
  type DynamicModule,
  type FactoryProvider,
  Module,
  type ModuleMetadata,
  type Provider,
} from '@nestjs/common';
import { ModulesContainer } from '@nestjs/core';
import { PERIODIC_MODULE_OPTIONS } from './periodic.constants.js';
import { PeriodicEvents } from './periodic.events.js';
import { appOf, PeriodicExplorer } from './periodic.explorer.js';
import { PeriodicRegistry } from './periodic.registry.js';
import { describeValue, PeriodicConfigError } from './scheduler/errors.js';
import { checkOption, checkOptionsObject, type SchedulerMode } from './scheduler/options.js';
import type { RedisCoordinator } from './scheduler/redis-coordinator.js';

/** Options of `PeriodicModule.forRoot()`. */
export interface PeriodicModuleOptions {
  /** The mode of every job that does not set its own; `'manual'` for tests. @default 'auto' */
  mode?: SchedulerMode;
  /** Log every event but `nextTick` through Nest's `Logger`, context `Periodic`. @default true */
  logger?: boolean;
  /** Shares the leases of `exclusive` jobs between the application's replicas. @default none */
  coordinator?: RedisCoordinator;
}

/** The module's options, validated, with defaults filled in. */
export type ResolvedModuleOptions = Required<Omit<PeriodicModuleOptions, 'coordinator'>> &
  Pick<PeriodicModuleOptions, 'coordinator'>;

/** Options of `PeriodicModule.forRootAsync()`: a factory of {@link PeriodicModuleOptions} and what it needs. */
export interface PeriodicModuleAsyncOptions {
  /** Modules that export what the factory injects. */
  imports?: ModuleMetadata['imports'];
  /** Tokens whose values are passed to the factory, in order. */
  inject?: FactoryProvider['inject'];
  /** Builds the module's options, possibly asynchronously. */
  useFactory: (...args: never[]) => PeriodicModuleOptions | Promise<PeriodicModuleOptions>;
}

/**
 * Runs every `@Periodic()` method of the application. Global: import it once, in the root module. Importing
 * it again registers nothing twice; the first import's options apply.
 */
@Module({})
export class PeriodicModule {
  /** The module with the given options. */
  static forRoot(options: PeriodicModuleOptions = {}): DynamicModule {
    const value = resolveModuleOptions(options, 'PeriodicModule.forRoot()');
    return definition([], { provide: PERIODIC_MODULE_OPTIONS, useValue: value });
  }

  /** The module with options built by a factory, which may inject providers of the modules in `imports`. */
  static forRootAsync(options: PeriodicModuleAsyncOptions): DynamicModule {
    const where = 'PeriodicModule.forRootAsync()';
    if (typeof options?.useFactory !== 'function') {
      throw new PeriodicConfigError(
        `${where}: "useFactory" must be a function that returns the module's options, got ` +
          describeValue(options?.useFactory),
      );
    }
    const { imports = [], inject = [], useFactory } = options;
    return definition(imports, {
      provide: PERIODIC_MODULE_OPTIONS,
      inject,
      useFactory: async (...args: never[]) =>
        resolveModuleOptions(await useFactory(...args), `${where}: the options returned by useFactory`),
    });
  }
}

function definition(imports: NonNullable<ModuleMetadata['imports']>, options: Provider): DynamicModule {
  return {
    global: true,
    module: PeriodicModule,
    imports,
    providers: [
      options,
      PeriodicExplorer,
      // Shared by every import of the module in the application, so that no job is registered twice.
      {
        provide: PeriodicRegistry,
        inject: [ModulesContainer],
        useFactory: (c: ModulesContainer) => appOf(c).registry,
      },
      {
        provide: PeriodicEvents,
        inject: [ModulesContainer],
        useFactory: (c: ModulesContainer) => appOf(c).events,
      },
    ],
    exports: [PeriodicRegistry, PeriodicEvents],
  };
}

const MODULE_OPTIONS = ['mode', 'logger', 'coordinator'];

function resolveModuleOptions(input: unknown, where: string): ResolvedModuleOptions {
  if (input === undefined) input = {};
  checkOptionsObject(where, input, MODULE_OPTIONS, "{ mode: 'manual' }");
  const { mode = 'auto', logger = true, coordinator } = input as PeriodicModuleOptions;
  checkOption(where, 'mode', mode);
  if (typeof logger !== 'boolean') {
    throw new PeriodicConfigError(`${where}: "logger" must be true or false, got ${describeValue(logger)}`);
  }
  if (coordinator !== undefined) checkOption(where, 'coordinator', coordinator);
  return { mode, logger, coordinator };
}
