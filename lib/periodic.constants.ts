/**
 * Metadata key under which `@Periodic()` stores a method's options. A string, not a symbol, so that the
 * CommonJS and the ESM copy of this package, if an application loads both, read the same metadata.
 */
export const PERIODIC_METADATA = 'nestjs-periodic:options';

/** Injection token of the options given to `PeriodicModule.forRoot()` or built by `forRootAsync()`. */
export const PERIODIC_MODULE_OPTIONS = 'nestjs-periodic:module-options';

/** The Nest `Logger` context of every line this package logs. */
export const LOGGER_CONTEXT = 'Periodic';
