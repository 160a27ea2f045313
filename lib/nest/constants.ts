/**
 * The property under which `@Periodic()` stores its options on the decorated method: a plain property, read
 * at bootstrap for every method of every provider, is much faster to look up than `reflect-metadata`. A
 * registered symbol, so that the CommonJS and the ESM copy of this package, if an application loads both,
 * read the same property.
 */
export const PERIODIC_OPTIONS = Symbol.for('nestjs-periodic:options');

/** The property under which `@PeriodicHandler()` stores its name on the decorated method, as `@Periodic()` does. */
export const PERIODIC_HANDLER = Symbol.for('nestjs-periodic:handler');

/** Injection token of the options given to `PeriodicModule.forRoot()` or built by `forRootAsync()`. */
export const PERIODIC_MODULE_OPTIONS = 'nestjs-periodic:module-options';

/** The Nest `Logger` context of every line this package logs. */
export const LOGGER_CONTEXT = 'Periodic';
