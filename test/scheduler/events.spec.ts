import { describe, expect, it, jest } from '@jest/globals';
import type { PeriodicEvent, PeriodicEventType } from '../../lib/scheduler/events.js';
import type { PeriodicSchedulerOptions } from '../../lib/scheduler/options.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { flush, startScheduler, stuckRun, useFakeTimers } from './helpers.js';

useFakeTimers();

const run = () => undefined;

describe('event sinks', () => {
  it('a function sink receives every event', async () => {
    const events: PeriodicEvent[] = [];
    const scheduler = new PeriodicScheduler({ name: 'job', every: 10, mode: 'manual', run }, (event) =>
      events.push(event),
    );
    scheduler.start();
    await scheduler.tick();
    expect(events.map((event) => event.type)).toEqual(['nextTick', 'nextTick', 'started', 'finished']);
  });

  it('an object sink without wants receives every event', async () => {
    const emit = jest.fn();
    const scheduler = new PeriodicScheduler({ name: 'job', every: 10, mode: 'manual', run }, { emit });
    scheduler.start();
    await scheduler.tick();
    expect(emit).toHaveBeenCalledTimes(4);
  });

  it('wants(type) filters by type before any event object is built', async () => {
    const asked = new Set<PeriodicEventType>();
    const emit = jest.fn();
    const scheduler = new PeriodicScheduler(
      { name: 'job', every: 10, mode: 'manual', run },
      {
        emit,
        wants: (type) => {
          asked.add(type);
          return type === 'finished';
        },
      },
    );
    scheduler.start();
    await scheduler.tick();
    expect(emit.mock.calls.map(([event]) => (event as PeriodicEvent).type)).toEqual(['finished']);
    expect([...asked].sort()).toEqual(['finished', 'nextTick', 'started']);
  });

  it('a started event carries scheduledAt and startedAt; a finished event the reason and duration', async () => {
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual' });
    jest.advanceTimersByTime(7);
    await scheduler.tick();
    expect(log.events.slice(2)).toEqual([
      { type: 'started', name: 'job', jobId: 1, scheduledAt: 7, startedAt: 7 },
      { type: 'finished', name: 'job', jobId: 1, reason: 'normal', durationMs: 0 },
    ]);
  });

  it('a sink that throws is reported as a process warning and disturbs nothing', async () => {
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const scheduler = new PeriodicScheduler({ name: 'job', every: 10, run }, () => {
      throw new Error('listener bug');
    });
    scheduler.start();
    jest.advanceTimersByTime(30);
    await scheduler.stop();
    expect(warn).toHaveBeenCalledWith(
      expect.stringContaining(
        'the event sink of job "job" threw on "nextTick": Error: listener bug\n    at ',
      ),
      { code: 'PERIODIC_EVENT_SINK' },
    );
    // 1 + 3 nextTick, 3 started, 3 finished: every one reported, the schedule unharmed.
    expect(warn).toHaveBeenCalledTimes(10);
  });

  it('a sink whose wants() throws is reported too, and that event is not delivered', () => {
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const emit = jest.fn();
    const wants = (type: PeriodicEventType) => {
      if (type === 'started') throw new Error('wants bug');
      return true;
    };
    const scheduler = new PeriodicScheduler({ name: 'job', every: 10, run }, { emit, wants });
    scheduler.start();
    jest.advanceTimersByTime(10);
    expect(emit.mock.calls.map(([event]) => (event as PeriodicEvent).type)).toEqual([
      'nextTick',
      'nextTick',
      'finished',
    ]);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining('threw on "started": Error: wants bug'), {
      code: 'PERIODIC_EVENT_SINK',
    });
    void scheduler.stop();
  });

  it('a listener that stops the scheduler on nextTick prevents the guard and the run of that tick', () => {
    const when = jest.fn(() => true);
    const scheduler: PeriodicScheduler = new PeriodicScheduler(
      { name: 'job', every: 10, initialDelay: 5, when, run },
      (event) => {
        if (event.type === 'nextTick' && event.in === 10) void scheduler.stop();
      },
    );
    scheduler.start();
    jest.advanceTimersByTime(5);
    expect(when).not.toHaveBeenCalled();
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('a listener may stop the scheduler at any event', () => {
  type Scenario = [PeriodicEventType, Omit<PeriodicSchedulerOptions, 'name' | 'run'>, (() => unknown)?];
  const scenarios: Scenario[] = [
    ['nextTick', { every: 10 }],
    ['missed', { every: 10 }],
    ['started', { every: 10 }],
    ['finished', { every: 10 }],
    ['skipped', { every: 10, onOverlap: 'ignore' }, stuckRun],
    ['stoppedPrevious', { every: 10, onOverlap: 'stopPrevious' }, stuckRun],
    [
      'guardFailed',
      {
        every: 10,
        when: () => {
          throw new Error('no');
        },
      },
    ],
  ];
  // In shifted mode no tick is late, and no tick comes while a run is running.
  const regularOnly = ['missed', 'skipped', 'stoppedPrevious'];
  const cases = scenarios.flatMap(([type, options, job]) =>
    (['regular', 'shifted'] as const)
      .filter((delayMode) => delayMode === 'regular' || !regularOnly.includes(type))
      .map((delayMode) => [type, delayMode, options, job] as const),
  );

  it.each(cases)(
    'stopped on %s (%s mode): no timer remains, nothing starts after',
    async (type, delayMode, options, job) => {
      const seen: PeriodicEvent[] = [];
      let stoppedAt = -1;
      const scheduler: PeriodicScheduler = new PeriodicScheduler(
        { name: 'job', ...options, delayMode, jobShutdown: 0, run: job ?? run },
        (event) => {
          seen.push(event);
          if (event.type === type && stoppedAt < 0) {
            stoppedAt = seen.length;
            void scheduler.stop();
          }
        },
      );
      scheduler.start();
      if (type === 'missed') {
        // The clock jumps three intervals ahead before the first tick is handled, as after a stalled process.
        const fakeNow = performance.now.bind(performance);
        jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + 35);
      }
      await jest.advanceTimersByTimeAsync(100);
      expect(stoppedAt).toBeGreaterThan(0);
      expect(jest.getTimerCount()).toBe(0);
      expect(scheduler.running).toBe(0);
      const after = seen.slice(stoppedAt).map((event) => event.type);
      expect(after.filter((later) => later !== 'finished')).toEqual([]);
    },
  );
});

describe('zero cost for what is not used', () => {
  it('with no sink and no listener nothing is built', () => {
    const wants = jest.fn(() => false);
    const emit = jest.fn();
    const scheduler = new PeriodicScheduler(
      { name: 'job', every: 10, onOverlap: 'ignore', run: stuckRun },
      { emit, wants },
    );
    scheduler.start();
    jest.advanceTimersByTime(100);
    expect(wants).toHaveBeenCalled();
    expect(emit).not.toHaveBeenCalled();
  });

  it('no AbortController is created before a run reads its signal', async () => {
    const Original = globalThis.AbortController;
    let created = 0;
    globalThis.AbortController = class extends Original {
      constructor() {
        super();
        created++;
      }
    };
    try {
      let open = false;
      let read = false;
      const { scheduler } = startScheduler({
        every: 10,
        mode: 'manual',
        when: () => open,
        run: (context) => void (read && context.signal),
      });
      await scheduler.tick();
      await scheduler.tick();
      expect(created).toBe(0);
      open = true;
      await scheduler.tick();
      expect(created).toBe(0);
      read = true;
      await scheduler.tick();
      expect(created).toBe(1);
    } finally {
      globalThis.AbortController = Original;
    }
  });

  it('a job with no timeout arms no timer per run', async () => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', run: stuckRun });
    await scheduler.tick();
    await scheduler.tick();
    await flush();
    expect(jest.getTimerCount()).toBe(0);
  });
});
