import { describe, expect, it, jest } from '@jest/globals';
import { deferred, flush, startScheduler, useFakeTimers } from './helpers.js';

useFakeTimers();

describe('when', () => {
  it.each([true, 1, 'yes', {}])('a truthy result (%p) starts the run', async (verdict) => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', when: () => verdict as boolean });
    expect(await scheduler.tick()).toEqual({ ok: true, jobId: 1 });
  });

  it.each([false, 0, '', null, undefined])(
    'a falsy result (%p) starts nothing and emits nothing',
    async (verdict) => {
      const { scheduler, log } = startScheduler({
        every: 10,
        mode: 'manual',
        when: () => verdict as boolean,
      });
      log.clear();
      expect(await scheduler.tick()).toEqual({ ok: false, error: 'jobNotStarted' });
      expect(log.types()).toEqual(['nextTick']);
    },
  );

  it('is evaluated on every tick, after the next tick has been armed', () => {
    const order: string[] = [];
    const scheduled = startScheduler({
      every: 10,
      when: () => {
        order.push(`guard, timers: ${jest.getTimerCount()}`);
        return false;
      },
    });
    jest.advanceTimersByTime(30);
    expect(order).toEqual(['guard, timers: 1', 'guard, timers: 1', 'guard, timers: 1']);
    expect(scheduled.log.of('nextTick')).toHaveLength(4);
  });

  it('an async guard is awaited', async () => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', when: async () => true });
    expect(await scheduler.tick()).toEqual({ ok: true, jobId: 1 });
    const denied = startScheduler({ every: 10, mode: 'manual', when: async () => false });
    expect(await denied.scheduler.tick()).toEqual({ ok: false, error: 'jobNotStarted' });
  });

  it('a synchronous guard keeps the tick synchronous: the run starts inside advanceTimersByTime', () => {
    const { log } = startScheduler({ every: 10, when: () => true });
    jest.advanceTimersByTime(10);
    expect(log.of('started')).toHaveLength(1);
  });
});

describe('a failing guard (Deviation: the scheduler survives and keeps its schedule)', () => {
  it('a throwing guard emits guardFailed with the error and starts nothing', async () => {
    const error = new Error('db down');
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      when: () => {
        throw error;
      },
    });
    log.clear();
    expect(await scheduler.tick()).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(log.events).toEqual([
      { type: 'nextTick', name: 'job', in: 10 },
      { type: 'guardFailed', name: 'job', error },
    ]);
  });

  it('a rejecting guard emits guardFailed', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      when: () => Promise.reject('nope'),
    });
    await scheduler.tick();
    expect(log.of('guardFailed')).toEqual([{ type: 'guardFailed', name: 'job', error: 'nope' }]);
  });

  it('the schedule goes on after a throwing guard', () => {
    let calls = 0;
    const { log } = startScheduler({
      every: 10,
      when: () => {
        if (++calls === 1) throw new Error('once');
        return true;
      },
    });
    jest.advanceTimersByTime(30);
    expect(log.of('guardFailed')).toHaveLength(1);
    expect(log.of('started')).toHaveLength(2);
  });
});

describe('at most one pending guard', () => {
  it('a tick while an async guard is pending starts nothing and is counted in a missed event', async () => {
    const verdicts = [deferred<boolean>(), deferred<boolean>()];
    let calls = 0;
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      when: () => verdicts[calls++].promise,
    });
    const first = scheduler.tick();
    await flush();
    log.clear();
    expect(await scheduler.tick()).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(log.events).toEqual([
      { type: 'nextTick', name: 'job', in: 10 },
      { type: 'missed', name: 'job', count: 1 },
    ]);
    expect(calls).toBe(1);
    verdicts[0].resolve(true);
    expect(await first).toEqual({ ok: true, jobId: 1 });
  });

  it('auto mode: ticks keep their schedule while a slow guard is pending', async () => {
    const verdict = deferred<boolean>();
    const { log } = startScheduler({ every: 10, when: () => verdict.promise });
    jest.advanceTimersByTime(40);
    expect(log.of('missed').map((event) => event.count)).toEqual([1, 1, 1]);
    verdict.resolve(true);
    await flush();
    expect(log.of('started')).toEqual([expect.objectContaining({ jobId: 1, scheduledAt: 10 })]);
  });

  it('with jitter: a tick while an async guard is pending starts nothing and is counted in a missed event', async () => {
    const verdict = deferred<boolean>();
    let calls = 0;
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    const { log } = startScheduler({
      every: 1000,
      jitter: 100,
      when: () => {
        calls++;
        return verdict.promise;
      },
    });
    jest.advanceTimersByTime(1050);
    expect(calls).toBe(1);
    jest.advanceTimersByTime(2000);
    expect(calls).toBe(1);
    expect(log.of('missed').map((event) => event.count)).toEqual([1, 1]);
    verdict.resolve(true);
    await flush();
    expect(log.of('started')).toEqual([expect.objectContaining({ jobId: 1, scheduledAt: 1000 })]);
    jest.advanceTimersByTime(1000);
    expect(calls).toBe(2);
  });

  it('a guard that settles after stop() starts nothing', async () => {
    const verdict = deferred<boolean>();
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual', when: () => verdict.promise });
    const tick = scheduler.tick();
    await scheduler.stop();
    verdict.resolve(true);
    expect(await tick).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(log.of('started')).toHaveLength(0);
  });
});
