import {
  type DynamicModule,
  type FactoryProvider,
  Global,
  Module,
  type ModuleMetadata,
  type Provider,
} from '@nestjs/common';
import { PeriodicConfigError } from '../scheduler/errors.js';
import { checkedOptions, type OptionRule } from '../scheduler/rules.js';
import { PeriodicTelemetry } from './telemetry.js';
import { PERIODIC_MODULE_OPTIONS } from './constants.js';
import { PeriodicEvents } from './events.js';
import { PeriodicExplorer } from './explorer.js';
import { Lifecycle } from './lifecycle.js';
import { ModuleSettings, type PeriodicModuleOptions, resolveModuleOptions } from './options.js';
import { PeriodicRegistry } from './registry.js';

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
 * it again registers nothing twice; the options of the import nearest the root module apply.
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

/**
 * The parts of the module, one of each per application however many times `PeriodicModule` is imported: a
 * module without options of its own is one instance in an application, wherever it is imported from. Global,
 * so that the registry and the events can be injected anywhere.
 */
@Global()
@Module({
  providers: [
    ModuleSettings,
    PeriodicEvents,
    PeriodicTelemetry,
    PeriodicRegistry,
    Lifecycle,
    PeriodicExplorer,
  ],
  exports: [PeriodicRegistry, PeriodicEvents],
})
class PeriodicCoreModule {}

/** An import of the module: its options, global so that the module's parts wait for them when they are made. */
function definition(imports: NonNullable<ModuleMetadata['imports']>, options: Provider): DynamicModule {
  return {
    global: true,
    module: PeriodicModule,
    imports: [PeriodicCoreModule, ...imports],
    providers: [options],
    exports: [PERIODIC_MODULE_OPTIONS],
  };
}
