import { PeriodicConfigError } from '../scheduler/errors.js';
import type { PeriodicOptions } from '../scheduler/options.js';
import { PERIODIC_OPTIONS } from './constants.js';

/**
 * Runs the decorated method periodically: `PeriodicModule` finds it at bootstrap and gives it a scheduler of
 * its own. The method is called on the provider (or controller) instance with a `PeriodicContext`. The
 * options are validated at bootstrap; a misplaced decorator (static method, getter, property) throws here.
 */
export function Periodic<Host extends object>(options: PeriodicOptions<Host>): MethodDecorator {
  return (target, key, descriptor) => {
    const where = `@Periodic() on ${placeOf(target, key)}`;
    if (typeof target === 'function') {
      throw new PeriodicConfigError(
        `${where}: the method is static; @Periodic() goes on an instance method of a provider or controller`,
      );
    }
    const method: unknown = descriptor?.value;
    if (typeof method !== 'function') {
      const what = descriptor?.get || descriptor?.set ? 'an accessor' : 'a property';
      throw new PeriodicConfigError(
        `${where}: ${String(key)} is ${what}, not a method; @Periodic() goes on a method, which is called on each run`,
      );
    }
    if (Object.hasOwn(method, PERIODIC_OPTIONS)) {
      throw new PeriodicConfigError(
        `${where}: @Periodic() is applied twice; a method is one job, so keep one decorator ` +
          '(or call the work from a second method with its own @Periodic())',
      );
    }
    Object.defineProperty(method, PERIODIC_OPTIONS, { value: options });
  };
}

/** The options `@Periodic()` stored on a method, as given (validated at bootstrap); `undefined` if it has none. */
export function periodicOptionsOf(method: unknown): { options: unknown } | undefined {
  if (typeof method !== 'function' || !Object.hasOwn(method, PERIODIC_OPTIONS)) return undefined;
  return { options: (method as unknown as Record<symbol, unknown>)[PERIODIC_OPTIONS] };
}

function placeOf(target: object, key: string | symbol): string {
  const owner = typeof target === 'function' ? target : target.constructor;
  return `${owner?.name || '(anonymous class)'}.${String(key)}`;
}
