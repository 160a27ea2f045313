import { describeValue, PeriodicConfigError } from '../scheduler/errors.js';
import type { PeriodicOptions } from '../scheduler/options.js';
import { NAME_RULE } from '../scheduler/rules.js';
import { PERIODIC_HANDLER, PERIODIC_OPTIONS } from './constants.js';

/**
 * Runs the decorated method periodically: `PeriodicModule` finds it at bootstrap and gives it a scheduler of
 * its own. The method is called on the provider (or controller) instance with a `PeriodicContext`. The
 * options are validated at bootstrap; a misplaced decorator (static method, getter, property) throws here.
 */
export function Periodic<Host extends object>(options: PeriodicOptions<Host>): MethodDecorator {
  return (target, key, descriptor) => {
    const where = `@Periodic() on ${placeOf(target, key)}`;
    const method = methodOf(where, '@Periodic()', target, key, descriptor);
    if (Object.hasOwn(method, PERIODIC_OPTIONS)) {
      throw new PeriodicConfigError(
        `${where}: @Periodic() is applied twice; a method is one job, so keep one decorator ` +
          '(or call the work from a second method with its own @Periodic())',
      );
    }
    Object.defineProperty(method, PERIODIC_OPTIONS, { value: options });
  };
}

/**
 * Runs the stored schedules that name this handler (`registry.schedules`, docs/schedules.md): the method is
 * called on the provider's instance with each run's `PeriodicContext`, whose `data` is the schedule's. Names
 * are unique in the application; the rules of a job's name apply.
 */
export function PeriodicHandler(name: string): MethodDecorator {
  return (target, key, descriptor) => {
    const where = `@PeriodicHandler() on ${placeOf(target, key)}`;
    if (!NAME_RULE.accepts(name)) {
      throw new PeriodicConfigError(
        `${where}: the handler's name must be ${NAME_RULE.expected}, got ${describeValue(name)}` +
          (NAME_RULE.problem(name) === undefined ? '' : `: ${NAME_RULE.problem(name)}`),
      );
    }
    const method = methodOf(where, '@PeriodicHandler()', target, key, descriptor);
    if (Object.hasOwn(method, PERIODIC_HANDLER)) {
      throw new PeriodicConfigError(
        `${where}: @PeriodicHandler() is applied twice; a method is one handler, so keep one decorator`,
      );
    }
    Object.defineProperty(method, PERIODIC_HANDLER, { value: name });
  };
}

/** The method a decorator is on; a static one, an accessor or a property is refused. */
function methodOf(
  where: string,
  decorator: string,
  target: object,
  key: string | symbol,
  descriptor: PropertyDescriptor | undefined,
): object {
  if (typeof target === 'function') {
    throw new PeriodicConfigError(
      `${where}: the method is static; ${decorator} goes on an instance method of a provider or controller`,
    );
  }
  const method: unknown = descriptor?.value;
  if (typeof method !== 'function') {
    const what = descriptor?.get || descriptor?.set ? 'an accessor' : 'a property';
    throw new PeriodicConfigError(
      `${where}: ${String(key)} is ${what}, not a method; ${decorator} goes on a method, which is called on each run`,
    );
  }
  return method;
}

/** The name `@PeriodicHandler()` stored on a method; `undefined` if it has none. */
export function handlerNameOf(method: unknown): string | undefined {
  if (typeof method !== 'function' || !Object.hasOwn(method, PERIODIC_HANDLER)) return undefined;
  return (method as unknown as Record<symbol, string>)[PERIODIC_HANDLER];
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
