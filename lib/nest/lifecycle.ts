import { Injectable } from '@nestjs/common';
import { PeriodicConfigError } from '../scheduler/errors.js';
import type { PeriodicScheduler } from '../scheduler/periodic-scheduler.js';
import { PeriodicRegistry } from './registry.js';

type Hook = (...args: unknown[]) => unknown;

/**
 * The `onModuleDestroy` of one object, wrapped once however many applications watch it (tests often share one
 * fake between applications), so that wrappers never pile up and a closed application is not kept alive.
 */
interface Slot {
  /** The object's own property before it was wrapped; none when the hook came from its prototype. */
  readonly own: PropertyDescriptor | undefined;
  readonly wrapper: Hook;
  /** The applications that watch the object. */
  readonly watchers: Set<Lifecycle>;
}

const slots = new WeakMap<object, Slot>();

/**
 * Ties jobs to the lifecycle of the application and of the objects they depend on. Nest calls the hooks of
 * the providers of one module side by side and orders modules by their distance from the root, so the hooks
 * of the objects themselves are the only ones that run at the right moment whatever the module tree: the
 * package wraps them while the application runs, and takes its wrappers away when it closes.
 *
 * - Every job starts once the whole application has bootstrapped: after the root module's own
 *   `onApplicationBootstrap`, the last hook of `init()`, which Nest calls only when every other succeeded. A
 *   failed `init()` therefore leaves no job ticking.
 * - Once any object of the application is destroyed, no job starts a run any more.
 * - A job is drained (its runs stopped and settled) before the `onModuleDestroy` of its host, of everything
 *   the host depends on, and of the module classes involved; at the latest by the module's own teardown.
 *
 * @internal A provider of the module, one per application.
 */
@Injectable()
export class Lifecycle {
  /** The jobs to drain before each object is destroyed. */
  private readonly ties = new Map<object, PeriodicScheduler[]>();
  private readonly watched: object[] = [];
  private root: { instance: object; own: PropertyDescriptor | undefined; wrapper: Hook } | undefined;

  constructor(private readonly registry: PeriodicRegistry) {}

  /** The job is drained before any of `instances` that has an `onModuleDestroy` is destroyed. */
  tie(scheduler: PeriodicScheduler, instances: Iterable<object>): void {
    for (const instance of instances) {
      if (typeof (instance as Record<string, unknown>).onModuleDestroy !== 'function') continue;
      if (!wrappable(instance, 'onModuleDestroy')) {
        throw new PeriodicConfigError(
          `job "${scheduler.name}": cannot tie it to the lifecycle of ${instance.constructor?.name ?? 'a provider'}, ` +
            'whose object is frozen or not extensible (its onModuleDestroy cannot be wrapped); do not freeze ' +
            'provider instances',
        );
      }
      const jobs = this.ties.get(instance);
      if (jobs === undefined) this.ties.set(instance, [scheduler]);
      else if (!jobs.includes(scheduler)) jobs.push(scheduler);
    }
  }

  /**
   * Starts every job after the root module's `onApplicationBootstrap` has resolved; from then on, watches the
   * `onModuleDestroy` of every one of `instances` (the application's objects) that has one.
   */
  startAfter(root: object, instances: () => Iterable<object>): void {
    const hook = 'onApplicationBootstrap';
    const own = Object.getOwnPropertyDescriptor(root, hook);
    const wrapper: Hook = async (...args) => {
      this.unwrapRoot();
      await original(root, hook, own)?.apply(root, args);
      if (this.registry.closing) return;
      for (const instance of instances()) this.watch(instance);
      this.registry.bootstrap();
    };
    if (!wrap(root, hook, wrapper)) {
      throw new PeriodicConfigError(
        `PeriodicModule: cannot start jobs after the application has bootstrapped, because the root module's ` +
          `object (${root.constructor?.name}) is frozen or not extensible; do not freeze module classes`,
      );
    }
    this.root = { instance: root, own, wrapper };
  }

  /** The application has closed: every wrapper it added is taken away, and no object refers to it any more. */
  release(): void {
    this.unwrapRoot();
    for (const instance of this.watched) {
      const slot = slots.get(instance)!;
      slot.watchers.delete(this);
      if (slot.watchers.size > 0) continue;
      slots.delete(instance);
      restore(instance, 'onModuleDestroy', slot.own, slot.wrapper);
    }
    this.watched.length = 0;
    this.ties.clear();
  }

  private watch(instance: object): void {
    if (typeof (instance as Record<string, unknown>).onModuleDestroy !== 'function') return;
    let slot = slots.get(instance);
    if (slot === undefined) {
      const own = Object.getOwnPropertyDescriptor(instance, 'onModuleDestroy');
      const watchers = new Set<Lifecycle>();
      const wrapper: Hook = (...args) => destroying(instance, own, watchers, args);
      // An object that cannot be wrapped and that no job depends on is simply not watched.
      if (!wrap(instance, 'onModuleDestroy', wrapper)) return;
      slots.set(instance, (slot = { own, wrapper, watchers }));
    }
    if (slot.watchers.has(this)) return;
    slot.watchers.add(this);
    this.watched.push(instance);
  }

  private unwrapRoot(): void {
    if (this.root === undefined) return;
    const { instance, own, wrapper } = this.root;
    this.root = undefined;
    restore(instance, 'onApplicationBootstrap', own, wrapper);
  }

  /** @internal An object this application watches is being destroyed; `sole`: by this application only. */
  destroying(instance: object, sole: boolean, draining: Promise<void>[]): void {
    // Once any object of the application is destroyed, the application is closing.
    if (sole) this.registry.halt();
    for (const scheduler of [
      ...(this.ties.get(instance) ?? []),
      ...this.registry.schedules.tiedTo(instance),
    ]) {
      const stopped = scheduler.stop();
      if (scheduler.running > 0) draining.push(stopped);
    }
  }
}

/**
 * The wrapped `onModuleDestroy`: first the jobs tied to the object are drained, then the object's own hook
 * runs, looked up now, so that a spy a test installed after `init()` is the one called. An object watched by
 * one application only tells it that it is closing; one shared by several cannot say which of them is, and
 * only drains the jobs that depend on it.
 */
function destroying(
  instance: object,
  own: PropertyDescriptor | undefined,
  watchers: Set<Lifecycle>,
  args: unknown[],
): unknown {
  const draining: Promise<void>[] = [];
  for (const lifecycle of watchers) lifecycle.destroying(instance, watchers.size === 1, draining);
  const destroy = () => original(instance, 'onModuleDestroy', own)?.apply(instance, args);
  // Synchronous when no run is in flight, the common case.
  return draining.length === 0 ? destroy() : Promise.all(draining).then(destroy);
}

/** The hook the object would have without the package's wrapper: its own property, else its prototype's. */
function original(instance: object, hook: string, own: PropertyDescriptor | undefined): Hook | undefined {
  let value: unknown;
  if (own !== undefined) value = own.get ? own.get.call(instance) : own.value;
  else {
    const prototype: unknown = Object.getPrototypeOf(instance);
    value =
      typeof prototype === 'object' && prototype !== null
        ? Reflect.get(prototype, hook, instance)
        : undefined;
  }
  return typeof value === 'function' ? (value as Hook) : undefined;
}

/** Makes `wrapper` the object's own hook; false when the object is frozen or not extensible. */
function wrap(instance: object, hook: string, wrapper: Hook): boolean {
  return Reflect.defineProperty(instance, hook, { value: wrapper, configurable: true, writable: true });
}

/** Puts the object's hook back as it was, unless someone replaced the wrapper since. */
function restore(instance: object, hook: string, own: PropertyDescriptor | undefined, wrapper: Hook): void {
  if (Object.getOwnPropertyDescriptor(instance, hook)?.value !== wrapper) return;
  if (own === undefined) Reflect.deleteProperty(instance, hook);
  else Reflect.defineProperty(instance, hook, own);
}

function wrappable(instance: object, hook: string): boolean {
  const own = Object.getOwnPropertyDescriptor(instance, hook);
  return own === undefined ? Object.isExtensible(instance) : own.configurable === true;
}
