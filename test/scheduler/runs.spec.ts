import { describe, expect, it, jest } from '@jest/globals';
import { PeriodicAbortError } from '../../lib/scheduler/errors.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import { deferred, flush, honouringRun, startScheduler, stuckRun, useFakeTimers } from './helpers.js';

useFakeTimers();

describe('the run context', () => {
  it('carries the name, a jobId counting from 1, an open signal, scheduledAt and startedAt', async () => {
    const contexts: PeriodicContext[] = [];
    const { scheduler } = startScheduler({
      every: 10,
      name: 'Cleanup.purge',
      mode: 'manual',
      run: (c) => contexts.push(c),
    });
    jest.advanceTimersByTime(5);
    await scheduler.tick();
    await scheduler.tick();
    await scheduler.tick();
    expect(contexts.map((context) => context.jobId)).toEqual([1, 2, 3]);
    expect(contexts[0]).toEqual({
      name: 'Cleanup.purge',
      jobId: 1,
      signal: expect.any(AbortSignal),
      scheduledAt: 5,
      startedAt: 5,
    });
    expect(contexts[0].signal.aborted).toBe(false);
    expect(contexts[0].fencingToken).toBeUndefined();
  });

  it('a run that first reads its signal after it was stopped finds it aborted, with the reason of the stop', async () => {
    const read = deferred<void>();
    const signals = new Map<number, AbortSignal>();
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'stopPrevious',
      run: async (context) => {
        await read.promise;
        signals.set(context.jobId, context.signal);
      },
    });
    await scheduler.tick();
    await scheduler.tick(); // stops run #1, which has not read its signal yet
    read.resolve();
    await flush();
    expect(signals.get(1)?.aborted).toBe(true);
    expect(signals.get(1)?.reason).toBeInstanceOf(PeriodicAbortError);
    expect(signals.get(1)?.reason).toEqual(expect.objectContaining({ reason: 'stopPrevious' }));
    expect(signals.get(2)?.aborted).toBe(false);
  });

  it('the run is called with the context as its only argument', async () => {
    const run = jest.fn();
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', run });
    await scheduler.tick();
    expect(run).toHaveBeenCalledTimes(1);
    expect(run.mock.calls[0]).toHaveLength(1);
  });
});

describe('exit reasons', () => {
  it("'normal': the run returned", async () => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', run: () => 42 });
    expect(await scheduler.syncTick()).toEqual({ ok: true, reason: 'normal', durationMs: 0 });
  });

  it("'normal': the run resolved, with its duration", async () => {
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      run: () => new Promise((resolve) => setTimeout(resolve, 25)),
    });
    const result = scheduler.syncTick();
    await jest.advanceTimersByTimeAsync(25);
    expect(await result).toEqual({ ok: true, reason: 'normal', durationMs: 25 });
  });

  it.each([
    ['an Error', new Error('boom')],
    ['a string', 'boom'],
    ['undefined', undefined],
    ['an object', { code: 42 }],
  ])("'error': the run threw %s, passed on as error", async (_, thrown) => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      run: () => {
        throw thrown;
      },
    });
    expect(await scheduler.syncTick()).toEqual({ ok: true, reason: 'error', error: thrown, durationMs: 0 });
    expect(log.of('finished')[0]).toHaveProperty('error', thrown);
  });

  it("'error': the run rejected; the scheduler survives and ticks on", async () => {
    const error = new Error('rejected');
    const { log } = startScheduler({ every: 10, run: () => Promise.reject(error) });
    await jest.advanceTimersByTimeAsync(30);
    expect(log.of('finished').map((event) => [event.reason, event.error])).toEqual([
      ['error', error],
      ['error', error],
      ['error', error],
    ]);
  });

  it("a run that returns a thenable whose then throws ends with 'error'", async () => {
    const error = new Error('bad thenable');
    const thenable = {
      then() {
        throw error;
      },
    };
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', run: () => thenable });
    expect(await scheduler.syncTick()).toMatchObject({ reason: 'error', error });
  });

  it('a finished event has no error key when the run did not fail', async () => {
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual' });
    await scheduler.syncTick();
    expect(log.of('finished')[0]).not.toHaveProperty('error');
  });
});

describe('timeout', () => {
  it('aborts the signal with a PeriodicAbortError whose reason is timeout', async () => {
    let signal: AbortSignal | undefined;
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      timeout: 100,
      run: (context) => {
        signal = context.signal;
        return honouringRun(context);
      },
    });
    const result = scheduler.syncTick();
    jest.advanceTimersByTime(99);
    expect(signal?.aborted).toBe(false);
    jest.advanceTimersByTime(1);
    expect(signal?.aborted).toBe(true);
    expect(signal?.reason).toBeInstanceOf(PeriodicAbortError);
    expect(signal?.reason).toMatchObject({
      name: 'PeriodicAbortError',
      reason: 'timeout',
      message: 'job job#1 timed out after 100ms',
    });
    expect(await result).toEqual({ ok: true, reason: 'timeout', durationMs: 100 });
  });

  it("a run that ignores its signal is abandoned after jobShutdown and still reported as 'timeout'", async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      timeout: 100,
      jobShutdown: 50,
      run: stuckRun,
    });
    const result = scheduler.syncTick();
    jest.advanceTimersByTime(149);
    expect(log.of('finished')).toHaveLength(0);
    expect(scheduler.running).toBe(1);
    jest.advanceTimersByTime(1);
    expect(await result).toEqual({ ok: true, reason: 'timeout', durationMs: 150 });
    expect(scheduler.running).toBe(0);
  });

  it("with jobShutdown 'brutalKill' a timed-out run is abandoned at once", async () => {
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      timeout: 100,
      jobShutdown: 'brutalKill',
      run: stuckRun,
    });
    const result = scheduler.syncTick();
    jest.advanceTimersByTime(100);
    expect(await result).toEqual({ ok: true, reason: 'timeout', durationMs: 100 });
  });

  it("a timed-out run that rejects in its grace is reported as 'timeout' with the rejection as error", async () => {
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      timeout: 100,
      run: ({ signal }) =>
        new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
    });
    const result = scheduler.syncTick();
    jest.advanceTimersByTime(100);
    const outcome = await result;
    expect(outcome).toMatchObject({ ok: true, reason: 'timeout', error: expect.any(PeriodicAbortError) });
  });

  it('a run that ends in time clears its timeout timer', async () => {
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      timeout: 100,
      run: () => Promise.resolve(),
    });
    expect(await scheduler.syncTick()).toMatchObject({ reason: 'normal' });
    expect(jest.getTimerCount()).toBe(0);
  });

  it('a synchronous run arms no timeout timer', async () => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', timeout: 100 });
    await scheduler.tick();
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('jobShutdown', () => {
  it("a stopped run that settles in its grace ends with 'shutdown'", async () => {
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual', run: honouringRun });
    await scheduler.tick();
    await scheduler.stop();
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'shutdown' })]);
  });

  it("the default grace is 5000 ms, then the run is abandoned as 'killed'", async () => {
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual', run: stuckRun });
    await scheduler.tick();
    let stopped = false;
    void scheduler.stop().then(() => (stopped = true));
    await jest.advanceTimersByTimeAsync(4999);
    expect(stopped).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(stopped).toBe(true);
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'killed', durationMs: 5000 })]);
  });

  it('the signal reason of a stopped run is a PeriodicAbortError with reason shutdown', async () => {
    let signal: AbortSignal | undefined;
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      run: (context) => {
        signal = context.signal;
        return honouringRun(context);
      },
    });
    await scheduler.tick();
    await scheduler.stop();
    expect(signal?.reason).toMatchObject({
      reason: 'shutdown',
      message: 'job job#1 was stopped: its scheduler is shutting down',
    });
  });

  it("'brutalKill': stop() abandons the run at once as 'killed' and resolves", async () => {
    let signal: AbortSignal | undefined;
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      jobShutdown: 'brutalKill',
      run: (context) => {
        signal = context.signal;
        return stuckRun();
      },
    });
    await scheduler.tick();
    await scheduler.stop();
    expect(signal?.aborted).toBe(true);
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'killed' })]);
    expect(jest.getTimerCount()).toBe(0);
  });

  it('Infinity: stop() waits for ever for a run that ignores its signal', async () => {
    const run = deferred();
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      jobShutdown: Infinity,
      run: () => run.promise,
    });
    await scheduler.tick();
    let stopped = false;
    void scheduler.stop().then(() => (stopped = true));
    await jest.advanceTimersByTimeAsync(10 * 365 * 24 * 3600 * 1000);
    expect(stopped).toBe(false);
    run.resolve();
    await flush();
    expect(stopped).toBe(true);
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'shutdown' })]);
  });

  it('0: a run that honours its signal at once still settles as shutdown', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      jobShutdown: 0,
      run: honouringRun,
    });
    await scheduler.tick();
    await scheduler.stop();
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'shutdown' })]);
    expect(jest.getTimerCount()).toBe(0);
  });

  it("0: a run that does not settle on the abort is abandoned on the next timer turn as 'killed'", async () => {
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual', jobShutdown: 0, run: stuckRun });
    await scheduler.tick();
    const stopped = scheduler.stop();
    await jest.advanceTimersByTimeAsync(0);
    await stopped;
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'killed' })]);
  });

  it('a run rejecting after shutdown keeps reason shutdown and passes the rejection as error', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      run: ({ signal }) =>
        new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
    });
    await scheduler.tick();
    await scheduler.stop();
    expect(log.of('finished')).toEqual([
      expect.objectContaining({ reason: 'shutdown', error: new Error('aborted') }),
    ]);
  });

  it('a run already timed out keeps its reason when the scheduler stops', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      timeout: 10,
      jobShutdown: 100,
      run: stuckRun,
    });
    await scheduler.tick();
    jest.advanceTimersByTime(10);
    const stopped = scheduler.stop();
    await jest.advanceTimersByTimeAsync(100);
    await stopped;
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'timeout' })]);
  });
});

describe('abandoned runs', () => {
  it('whatever an abandoned run does later is swallowed: no second finished, no unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const run = deferred();
      const { scheduler, log } = startScheduler({
        every: 10,
        mode: 'manual',
        jobShutdown: 'brutalKill',
        run: () => run.promise,
      });
      await scheduler.tick();
      await scheduler.stop();
      run.reject(new Error('late'));
      await flush();
      await new Promise((resolve) =>
        jest.requireActual<typeof import('node:timers')>('node:timers').setImmediate(resolve),
      );
      expect(log.of('finished')).toHaveLength(1);
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe('one finished per started', () => {
  it.each(['run', 'ignore', 'stopPrevious'] as const)(
    'onOverlap %s, with errors, timeouts and a shutdown',
    async (onOverlap) => {
      let n = 0;
      const { scheduler, log } = startScheduler({
        every: 10,
        onOverlap,
        timeout: 25,
        jobShutdown: 5,
        run: (context) => {
          n++;
          if (n % 4 === 0) throw new Error('boom');
          if (n % 4 === 1) return stuckRun();
          if (n % 4 === 2) return honouringRun(context);
          return new Promise((resolve) => setTimeout(resolve, 15));
        },
      });
      await jest.advanceTimersByTimeAsync(200);
      const stopped = scheduler.stop();
      await jest.advanceTimersByTimeAsync(10);
      await stopped;
      const started = log.of('started').map((event) => event.jobId);
      const finished = log.of('finished').map((event) => event.jobId);
      expect(started.length).toBeGreaterThan(3);
      expect([...finished].sort((a, b) => a - b)).toEqual(started);
      expect(scheduler.running).toBe(0);
    },
  );
});
