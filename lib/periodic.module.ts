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
import { PeriodicExplorer } from './periodic.explorer.js';
import {
  appOf,
  type PeriodicModuleOptions,
  resolveModuleOptions,
  type ResolvedModuleOptions,
} from './periodic.options.js';
import { PeriodicRegistry } from './periodic.registry.js';
import { PeriodicConfigError } from './scheduler/errors.js';
import { checkedOptions, type OptionRule } from './scheduler/rules.js';

/** Options of `PeriodicModule.forRootAsync()`: a factory of {@link PeriodicModuleOptions} and what it needs. */
export interface PeriodicModuleAsyncOptions {
  /** Modules that export what the factory injects. */
  imports?: ModuleMetadata['imports'];
  /** Tokens whose values are passed to the factory, in order. */
  inject?: FactoryProvider['inject'];
  /** Builds the module's options, possibly asynchronously. */
  useFactory: (...args: never[]) => PeriodicModuleOptions | Promise<PeriodicModuleOptions>;
}

const ASYNC_RULES = {
  imports: { accepts: Array.isArray, expected: 'an array' },
  inject: { accepts: Array.isArray, expected: 'an array' },
  useFactory: {
    accepts: (value) => typeof value === 'function',
    expected: "a function that returns the module's options",
    required: true,
  },
} satisfies Record<keyof PeriodicModuleAsyncOptions, OptionRule>;

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
    const given = checkedOptions(
      where,
      options,
      ASYNC_RULES,
      '{ imports: [ConfigModule], inject: [ConfigService], useFactory: (config) => ({ ... }) }',
    ) as unknown as PeriodicModuleAsyncOptions;
    const { imports = [], inject = [], useFactory } = given;
    return definition(imports, {
      provide: PERIODIC_MODULE_OPTIONS,
      inject,
      useFactory: async (...args: never[]) => {
        const built: unknown = await useFactory(...args);
        if (built === undefined) {
          throw new PeriodicConfigError(
            `${where}: useFactory returned undefined; it must return the module's options, such as ` +
              "{ mode: 'manual' } (an arrow function with braces needs a return)",
          );
        }
        return resolveModuleOptions(built, `${where}: the options returned by useFactory`);
      },
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
        inject: [ModulesContainer, PERIODIC_MODULE_OPTIONS],
        useFactory: (c: ModulesContainer, o: ResolvedModuleOptions) => appOf(c, o).registry,
      },
      {
        provide: PeriodicEvents,
        inject: [ModulesContainer, PERIODIC_MODULE_OPTIONS],
        useFactory: (c: ModulesContainer, o: ResolvedModuleOptions) => appOf(c, o).events,
      },
    ],
    exports: [PeriodicRegistry, PeriodicEvents],
  };
}
