import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  Periodic,
  PeriodicConfigError,
  type PeriodicContext,
  type PeriodicEvent,
  PeriodicEvents,
  PeriodicModule,
} from '../../lib/index.js';
import { DEFAULT_LOG_LEVELS, eventLogger } from '../../lib/nest/logger.js';
import { honouringRun } from '../scheduler/helpers.js';
import { useApps } from './helpers.js';

@Injectable()
class Jobs {
  @Periodic({ every: 1000, onOverlap: 'stopPrevious', jobShutdown: 'brutalKill' })
  sync(context: PeriodicContext): Promise<void> {
    return honouringRun(context);
  }

  @Periodic({ every: 1000 })
  quick(): void {}
}

const manual = PeriodicModule.forRoot({ mode: 'manual', logger: false });

describe('PeriodicEvents', () => {
  const createApp = useApps();

  it('on(type) delivers the events of that type, in order; on("*") every event', async () => {
    const app = await createApp({ imports: [manual], providers: [Jobs] });
    const finished: PeriodicEvent[] = [];
    const all: string[] = [];
    app.events.on('finished', (event) => finished.push(event));
    app.events.on('*', (event) => all.push(event.type));
    await app.registry.tick('Jobs.sync');
    await app.registry.tick('Jobs.sync');
    expect(all).toEqual(['nextTick', 'started', 'nextTick', 'finished', 'stoppedPrevious', 'started']);
    expect(finished).toEqual([
      { type: 'finished', name: 'Jobs.sync', jobId: 1, reason: 'killed', durationMs: expect.any(Number) },
    ]);
  });

  it('the function on() returns unsubscribes', async () => {
    const app = await createApp({ imports: [manual], providers: [Jobs] });
    const seen: number[] = [];
    const off = app.events.on('started', (event) => seen.push(event.jobId));
    await app.registry.syncTick('Jobs.quick');
    off();
    off();
    await app.registry.syncTick('Jobs.quick');
    expect(seen).toEqual([1]);
  });

  it('one function subscribed twice is called twice, and each subscription ends on its own', async () => {
    const app = await createApp({ imports: [manual], providers: [Jobs] });
    const seen: number[] = [];
    const listener = (event: { jobId: number }) => seen.push(event.jobId);
    const offFirst = app.events.on('started', listener);
    app.events.on('started', listener);
    await app.registry.syncTick('Jobs.quick');
    offFirst();
    await app.registry.syncTick('Jobs.quick');
    expect(seen).toEqual([1, 1, 2]);
  });

  it('once(type, predicate) resolves with the next matching event', async () => {
    const app = await createApp({ imports: [manual], providers: [Jobs] });
    const second = app.events.once('started', (event) => event.jobId === 2);
    const any = app.events.once('*');
    await app.registry.syncTick('Jobs.quick');
    await app.registry.syncTick('Jobs.quick');
    await expect(second).resolves.toMatchObject({ type: 'started', name: 'Jobs.quick', jobId: 2 });
    await expect(any).resolves.toMatchObject({ type: 'nextTick' });
  });

  it('once() rejects with the error of a predicate that throws', async () => {
    const app = await createApp({ imports: [manual], providers: [Jobs] });
    const next = app.events.once('started', () => {
      throw new Error('bad predicate');
    });
    await app.registry.syncTick('Jobs.quick');
    await expect(next).rejects.toThrow('bad predicate');
  });

  it('a listener that throws changes nothing else and is logged at error level, also with logger: false', async () => {
    const app = await createApp({ imports: [manual], providers: [Jobs] });
    const before: string[] = [];
    const after: string[] = [];
    app.events.on('*', (event) => before.push(event.type));
    app.events.on('started', () => {
      throw new Error('listener bug');
    });
    app.events.on('*', (event) => after.push(event.type));
    expect(await app.registry.syncTick('Jobs.quick')).toMatchObject({ ok: true, reason: 'normal' });
    expect(before).toEqual(['nextTick', 'started', 'finished']);
    expect(after).toEqual(before);
    const errors = app.logs.lines.filter((line) => line.level === 'error');
    expect(errors).toEqual([
      {
        level: 'error',
        context: 'Periodic',
        message: 'a listener of "started" threw on a "started" event of Jobs.quick: listener bug',
        stack: expect.stringContaining('listener bug'),
      },
    ]);
    expect(app.registry.get('Jobs.quick').state).toBe('ticking');
  });

  it('a listener that throws a non-Error value is logged too', async () => {
    const app = await createApp({ imports: [manual], providers: [Jobs] });
    app.events.on('finished', () => {
      throw 'plain string';
    });
    await app.registry.syncTick('Jobs.quick');
    expect(app.logs.periodic()).toEqual([
      'error: a listener of "finished" threw on a "finished" event of Jobs.quick: "plain string"',
    ]);
  });

  it('on() refuses an unknown type and a listener that is not a function', async () => {
    const app = await createApp({ imports: [manual] });
    expect(() => app.events.on('finish' as 'finished', () => undefined)).toThrow(PeriodicConfigError);
    expect(() => app.events.on('finish' as 'finished', () => undefined)).toThrow(
      `PeriodicEvents.on("finish"): unknown event type; did you mean 'finished'?`,
    );
    expect(() => app.events.on('started', 'nope' as never)).toThrow(
      'PeriodicEvents.on("started"): the listener must be a function, got "nope"',
    );
    expect(() => app.events.on('zzz' as 'finished', () => undefined)).toThrow(
      'PeriodicEvents.on("zzz"): unknown event type. The types are: started,',
    );
  });

  it('once() refuses an unknown type at once, as on() does, not through a rejected promise', async () => {
    const app = await createApp({ imports: [manual] });
    expect(() => app.events.once('finishd' as 'finished')).toThrow(PeriodicConfigError);
    expect(() => app.events.once('finishd' as 'finished')).toThrow(
      `PeriodicEvents.once("finishd"): unknown event type; did you mean 'finished'?`,
    );
  });
});

describe('diagnostics_channel', () => {
  const createApp = useApps();

  it('publishes every event on nestjs-periodic:<type>', async () => {
    const app = await createApp({ imports: [manual], providers: [Jobs] });
    const published: [string, unknown][] = [];
    const onStarted = (message: unknown, name: string | symbol) => published.push([String(name), message]);
    const onFinished = onStarted;
    subscribe('nestjs-periodic:started', onStarted);
    subscribe('nestjs-periodic:finished', onFinished);
    try {
      await app.registry.syncTick('Jobs.quick');
    } finally {
      unsubscribe('nestjs-periodic:started', onStarted);
      unsubscribe('nestjs-periodic:finished', onFinished);
    }
    expect(published).toEqual([
      ['nestjs-periodic:started', expect.objectContaining({ type: 'started', name: 'Jobs.quick', jobId: 1 })],
      [
        'nestjs-periodic:finished',
        expect.objectContaining({ type: 'finished', name: 'Jobs.quick', reason: 'normal' }),
      ],
    ]);
  });

  it('an event type is wanted only when a listener, a channel subscriber or the logger would see it', () => {
    // The scheduler builds no event object of a type that is not wanted.
    const events = new PeriodicEvents();
    expect(events.wants('started')).toBe(false);
    const off = events.on('finished', () => undefined);
    expect([events.wants('finished'), events.wants('started')]).toEqual([true, false]);
    off();
    expect(events.wants('finished')).toBe(false);
    const onStarted = () => undefined;
    subscribe('nestjs-periodic:started', onStarted);
    expect(events.wants('started')).toBe(true);
    unsubscribe('nestjs-periodic:started', onStarted);
    expect(events.wants('started')).toBe(false);
    // By default the logger wants what a healthy job never does: no `started`, but `finished` (a failure).
    const logged = new PeriodicEvents();
    logged.logWith(eventLogger(DEFAULT_LOG_LEVELS, () => 0));
    expect(
      ['missed', 'nextTick', 'started', 'finished', 'skipped'].map((type) => logged.wants(type as never)),
    ).toEqual([true, false, false, true, true]);
    // A run that ended normally makes no line by default: its event is not built for the logger alone.
    expect([logged.wants('finished', 'normal'), logged.wants('finished', 'error')]).toEqual([false, true]);
    const quiet = new PeriodicEvents();
    quiet.logWith(
      eventLogger({ ...DEFAULT_LOG_LEVELS, missed: false, skipped: false, started: 'debug' }, () => 0),
    );
    expect(['missed', 'skipped', 'started'].map((type) => quiet.wants(type as never))).toEqual([
      false,
      false,
      true,
    ]);
  });
});
