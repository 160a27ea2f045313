import type { PeriodicRegistry } from './periodic.registry.js';
import { PeriodicConfigError } from './scheduler/errors.js';
import type { PeriodicScheduler } from './scheduler/periodic-scheduler.js';

interface Job {
  readonly scheduler: PeriodicScheduler;
  /** How many of the application's bootstrap and its dependencies' `onApplicationBootstrap` it still waits for. */
  waiting: number;
}

interface Hooked {
  bootstrapped: boolean;
  drains: boolean;
  /** The jobs this instance is the host of, or that depend on it. */
  readonly jobs: Set<Job>;
}

type Hook = (...args: unknown[]) => unknown;

/**
 * Ties jobs to the lifecycle of the instances they hang on, by wrapping those instances' own Nest hooks: Nest
 * calls hooks of providers in one module side by side and orders modules by distance, so only the hooks of
 * the instances themselves run at the right moment whatever the module tree looks like.
 */
export class Lifecycle {
  private readonly jobs: Job[] = [];
  private readonly hooked = new WeakMap<object, Hooked>();

  constructor(private readonly registry: PeriodicRegistry) {}

  /**
   * The job starts once the application and every dependency have bootstrapped. It is drained before the
   * `onModuleDestroy` of its host or of any dependency that has one; otherwise by the module's own teardown.
   */
  tie(scheduler: PeriodicScheduler, host: object, dependencies: object[]): void {
    const job: Job = { scheduler, waiting: 1 };
    this.jobs.push(job);
    for (const instance of new Set([host, ...dependencies])) {
      const hooked = this.hook(instance, scheduler.name);
      hooked.jobs.add(job);
      if (!hooked.bootstrapped) job.waiting++;
    }
  }

  /** The application's `onApplicationBootstrap` phase has begun: every `onModuleInit` has resolved. */
  bootstrap(): void {
    for (const job of this.jobs) this.ready(job);
  }

  private ready(job: Job): void {
    if (--job.waiting === 0 && !this.registry.closing && job.scheduler.state === 'idle') {
      job.scheduler.start();
    }
  }

  private hook(instance: object, name: string): Hooked {
    const target = instance as Record<string, Hook | undefined>;
    let hooked = this.hooked.get(instance);
    if (hooked === undefined) {
      const bootstrap = target.onApplicationBootstrap;
      hooked = { bootstrapped: typeof bootstrap !== 'function', drains: false, jobs: new Set() };
      this.hooked.set(instance, hooked);
      if (typeof bootstrap === 'function') {
        const state = hooked;
        patch(instance, 'onApplicationBootstrap', name, async (...args) => {
          const result = await bootstrap.apply(instance, args);
          // Once: an object provided by two modules gets its hook called twice.
          if (!state.bootstrapped) {
            state.bootstrapped = true;
            for (const job of state.jobs) this.ready(job);
          }
          return result;
        });
      }
    }
    const destroy = target.onModuleDestroy;
    if (!hooked.drains && typeof destroy === 'function') {
      const { jobs } = hooked;
      hooked.drains = true;
      patch(instance, 'onModuleDestroy', name, (...args) => {
        // Synchronous when no run is in flight, the common case: no promise to wait for, per host.
        const draining = [];
        for (const { scheduler } of jobs) {
          const stopped = scheduler.stop();
          if (scheduler.running > 0) draining.push(stopped);
        }
        if (draining.length === 0) return destroy.apply(instance, args);
        return Promise.all(draining).then(() => destroy.apply(instance, args));
      });
    }
    return hooked;
  }
}

function patch(instance: object, hook: string, name: string, wrapper: Hook): void {
  if (!Reflect.defineProperty(instance, hook, { value: wrapper, configurable: true, writable: true })) {
    throw new PeriodicConfigError(
      `job "${name}": cannot tie it to the lifecycle of ${instance.constructor?.name ?? 'a provider'}, whose ` +
        `object is frozen or not extensible (its ${hook} cannot be wrapped); do not freeze provider instances`,
    );
  }
}
