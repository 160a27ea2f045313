import { channel, type Channel } from 'node:diagnostics_channel';
import { Injectable, Logger } from '@nestjs/common';
import { describeValue, PeriodicConfigError } from '../scheduler/errors.js';
import type {
  JobExitReason,
  PeriodicEvent,
  PeriodicEventOf,
  PeriodicEventType,
} from '../scheduler/events.js';
import { nearest } from '../scheduler/rules.js';
import { LOGGER_CONTEXT } from './constants.js';
import { type EventLogger, logError } from './logger.js';

const EVENT_TYPES = [
  'started',
  'finished',
  'skipped',
  'stoppedPrevious',
  'nextTick',
  'missed',
  'retrying',
  'guardFailed',
  'leaseAcquired',
  'leaseLost',
  'operated',
  'storeReset',
  'incident',
  'recovered',
] as const satisfies readonly PeriodicEventType[];

/** One `diagnostics_channel` per event type, named `nestjs-periodic:<type>`. */
const CHANNELS = new Map<string, Channel>(
  EVENT_TYPES.map((type) => [type, channel(`nestjs-periodic:${type}`)]),
);

type Listener = (event: PeriodicEvent) => void;

/**
 * The events of every job of the application, delivered synchronously in the order they happen. Each event
 * is also published on `diagnostics_channel` as `nestjs-periodic:<type>`. A listener that throws is logged at
 * error level and disturbs neither the scheduler nor the other listeners.
 */
@Injectable()
export class PeriodicEvents {
  private readonly listeners = new Map<PeriodicEventType | '*', Set<Listener>>();
  /** How many subscriptions there are, of any type: none, the common case, spares a run two lookups per event. */
  private subscriptions = 0;
  private readonly logger = new Logger(LOGGER_CONTEXT);

  /** Turns events into log lines; none when the module's `logger` option is off. */
  private log: EventLogger | undefined;

  /** @internal The module's options are settled: events are logged as they say. */
  logWith(log: EventLogger | undefined): void {
    this.log = log;
  }

  /** Calls `listener` with every event of `type` (`'*'`: every event); returns the function that unsubscribes it. */
  on<T extends PeriodicEventType>(type: T, listener: (event: PeriodicEventOf<T>) => void): () => void;
  on(type: '*', listener: (event: PeriodicEvent) => void): () => void;
  on(type: PeriodicEventType | '*', listener: Listener): () => void {
    checkType(`PeriodicEvents.on(${describeValue(type)})`, type);
    if (typeof listener !== 'function') {
      throw new PeriodicConfigError(
        `PeriodicEvents.on(${describeValue(type)}): the listener must be a function, got ${describeValue(listener)}`,
      );
    }
    let set = this.listeners.get(type);
    if (set === undefined) this.listeners.set(type, (set = new Set()));
    // A wrapper per subscription, so that one function subscribed twice is also unsubscribed twice.
    const subscription: Listener = (event) => listener(event);
    set.add(subscription);
    this.subscriptions++;
    return () => {
      if (set.delete(subscription)) this.subscriptions--;
    };
  }

  /** Resolves with the next event of `type` (`'*'`: any) for which `predicate`, if given, is true. */
  once<T extends PeriodicEventType>(
    type: T,
    predicate?: (event: PeriodicEventOf<T>) => boolean,
  ): Promise<PeriodicEventOf<T>>;
  once(type: '*', predicate?: (event: PeriodicEvent) => boolean): Promise<PeriodicEvent>;
  once(type: PeriodicEventType | '*', predicate?: (event: PeriodicEvent) => boolean): Promise<PeriodicEvent> {
    if (predicate !== undefined && typeof predicate !== 'function') {
      throw new PeriodicConfigError(
        `PeriodicEvents.once(${describeValue(type)}): the predicate must be a function, got ${describeValue(predicate)}`,
      );
    }
    // Checked before the promise is made: a wrong type throws at once, as on() does, not as a rejection.
    checkType(`PeriodicEvents.once(${describeValue(type)})`, type);
    return new Promise((resolve, reject) => {
      const unsubscribe = this.on(type as '*', (event) => {
        let matches: boolean;
        try {
          matches = predicate === undefined || predicate(event);
        } catch (error) {
          unsubscribe();
          reject(error as Error);
          return;
        }
        if (matches) {
          unsubscribe();
          resolve(event);
        }
      });
    });
  }

  /**
   * @internal Whether anyone would see an event of `type` (for `finished`, of a run that ended with `reason`):
   * the scheduler builds no event that no one wants.
   */
  wants(type: PeriodicEventType, reason?: JobExitReason): boolean {
    return (
      this.log?.wants(type, reason) === true ||
      (this.subscriptions > 0 &&
        ((this.listeners.get(type)?.size ?? 0) > 0 || (this.listeners.get('*')?.size ?? 0) > 0)) ||
      CHANNELS.get(type)!.hasSubscribers
    );
  }

  /** @internal Delivers an event to the logger, the listeners of its type, the `'*'` listeners, then the channel. */
  emit(event: PeriodicEvent): void {
    if (this.log !== undefined) this.deliver(this.log.write, event, 'the logger');
    this.deliverAll(event.type, event);
    this.deliverAll('*', event);
    const published = CHANNELS.get(event.type)!;
    if (published.hasSubscribers) published.publish(event);
  }

  private deliverAll(type: PeriodicEventType | '*', event: PeriodicEvent): void {
    const set = this.listeners.get(type);
    if (set === undefined || set.size === 0) return;
    // A copy: a listener may subscribe or unsubscribe others while the event is delivered.
    for (const listener of [...set]) this.deliver(listener, event, `a listener of "${type}"`);
  }

  private deliver(listener: Listener, event: PeriodicEvent, who: string): void {
    try {
      listener(event);
    } catch (error) {
      const of = 'name' in event ? event.name : 'the fleet';
      logError(this.logger, `${who} threw on a "${event.type}" event of ${of}`, error);
    }
  }
}

function checkType(where: string, type: unknown): asserts type is PeriodicEventType | '*' {
  if (type === '*' || EVENT_TYPES.includes(type as PeriodicEventType)) return;
  const hint = typeof type === 'string' ? nearest(type, EVENT_TYPES) : undefined;
  throw new PeriodicConfigError(
    `${where}: unknown event type${hint === undefined ? '.' : `; did you mean '${hint}'?`} ` +
      `The types are: ${EVENT_TYPES.join(', ')}, or '*' for all.`,
  );
}
