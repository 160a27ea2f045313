import { describe, expect, it, jest } from '@jest/globals';
import { PeriodicConfigError, PeriodicTimeoutError } from '../../lib/scheduler/errors.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import {
  deferred,
  EventLog,
  flush,
  honouringRun,
  startScheduler,
  stuckRun,
  useFakeTimers,
} from './helpers.js';

useFakeTimers();

describe('manual mode', () => {
  it('arms no timer: the job runs only when ticked', () => {
    const { log } = startScheduler({ every: 10, mode: 'manual' });
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(1000);
    expect(log.of('started')).toHaveLength(0);
  });

  it('still reports nextTick: initialDelay at start, every on each regular tick', async () => {
    const { scheduler, log } = startScheduler({ every: 10, initialDelay: 3, mode: 'manual' });
    await scheduler.tick();
    expect(log.of('nextTick').map((event) => event.in)).toEqual([3, 10]);
  });

  it('shifted mode reports nextTick when the run ends, not when the tick comes', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      initialDelay: 0,
      mode: 'manual',
      delayMode: 'shifted',
    });
    await scheduler.tick();
    expect(log.types()).toEqual(['nextTick', 'started', 'nextTick', 'finished']);
  });
});

describe('tick()', () => {
  it('resolves { ok: true, jobId } once the run has started, without waiting for it to end', async () => {
    const run = deferred();
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', run: () => run.promise });
    expect(await scheduler.tick()).toEqual({ ok: true, jobId: 1 });
    expect(scheduler.running).toBe(1);
  });

  it("auto mode: changes nothing and resolves { ok: false, error: 'notInManualMode' }", async () => {
    const { scheduler, log } = startScheduler({ every: 10 });
    log.clear();
    expect(await scheduler.tick()).toEqual({ ok: false, error: 'notInManualMode' });
    expect(await scheduler.syncTick()).toEqual({ ok: false, error: 'notInManualMode' });
    expect(log.events).toEqual([]);
  });

  it("before start() and after stop(): { ok: false, error: 'jobNotStarted' }", async () => {
    const scheduler = new PeriodicScheduler({ name: 'job', every: 10, mode: 'manual', run: () => undefined });
    expect(await scheduler.tick()).toEqual({ ok: false, error: 'jobNotStarted' });
    scheduler.start();
    await scheduler.stop();
    expect(await scheduler.tick()).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(await scheduler.syncTick()).toEqual({ ok: false, error: 'jobNotStarted' });
  });
});

describe('syncTick()', () => {
  it('resolves with the exit reason when the run has ended', async () => {
    const run = deferred();
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', run: () => run.promise });
    let result: unknown;
    void scheduler.syncTick().then((value) => (result = value));
    await flush();
    expect(result).toBeUndefined();
    jest.advanceTimersByTime(12);
    run.resolve();
    await flush();
    expect(result).toEqual({ ok: true, reason: 'normal', durationMs: 12 });
  });

  it("resolves { ok: false, error: 'jobNotStarted' } when the guard says no", async () => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', when: () => false });
    expect(await scheduler.syncTick()).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(jest.getTimerCount()).toBe(0);
  });

  it('rejects with a PeriodicTimeoutError after 4000 ms by default; the run goes on', async () => {
    const run = deferred();
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual', run: () => run.promise });
    const result = scheduler.syncTick();
    const settled = result.then(
      () => 'resolved',
      (error: unknown) => error,
    );
    await jest.advanceTimersByTimeAsync(3999);
    expect(scheduler.running).toBe(1);
    await jest.advanceTimersByTimeAsync(1);
    const error = await settled;
    expect(error).toBeInstanceOf(PeriodicTimeoutError);
    expect(error).toMatchObject({
      name: 'PeriodicTimeoutError',
      message:
        'syncTick() of job "job" gave up after 4000ms: run #1 is still running and goes on. ' +
        'Make the run settle sooner (does it honour ctx.signal?) or pass a larger { timeout }.',
    });
    expect(scheduler.running).toBe(1);
    run.resolve();
    await flush();
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'normal' })]);
  });

  it('takes its own timeout, and names a guard that is still pending', async () => {
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      when: () => new Promise<boolean>(() => undefined),
    });
    const result = scheduler.syncTick({ timeout: 50 });
    const assertion = expect(result).rejects.toThrow(
      'syncTick() of job "job" gave up after 50ms: its guard is still pending. Make the guard settle sooner or ' +
        'pass a larger { timeout }.',
    );
    await jest.advanceTimersByTimeAsync(50);
    await assertion;
  });

  it('timeout: Infinity waits as long as the run takes', async () => {
    const run = deferred();
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', run: () => run.promise });
    const result = scheduler.syncTick({ timeout: Infinity });
    expect(jest.getTimerCount()).toBe(0);
    await jest.advanceTimersByTimeAsync(60_000);
    run.resolve();
    expect(await result).toMatchObject({ ok: true, reason: 'normal' });
  });

  it('clears its timer when the run ends', async () => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual' });
    await scheduler.syncTick();
    expect(jest.getTimerCount()).toBe(0);
  });

  it.each([0, -1, 1.5, 'soon'])('refuses timeout %p with a PeriodicConfigError', async (timeout) => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual' });
    await expect(scheduler.syncTick({ timeout: timeout as number })).rejects.toThrow(PeriodicConfigError);
    await expect(scheduler.syncTick({ timeout: timeout as number })).rejects.toThrow(
      'syncTick() of job "job": "timeout" must be an integer number of milliseconds ≥ 1, or Infinity',
    );
  });

  it.each<[unknown, string]>([
    [{ timout: 10 }, 'unknown option "timout"; did you mean "timeout"?'],
    [100, 'the options must be an object such as { timeout: 10_000 }, got 100'],
    [null, 'the options must be an object such as { timeout: 10_000 }, got null'],
  ])('refuses options %p with a PeriodicConfigError', async (options, message) => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual' });
    await expect(scheduler.syncTick(options as never)).rejects.toThrow(PeriodicConfigError);
    await expect(scheduler.syncTick(options as never)).rejects.toThrow(`syncTick() of job "job": ${message}`);
  });

  it('resolves with shutdown when the scheduler stops the run', async () => {
    const { scheduler } = startScheduler({ every: 10, mode: 'manual', run: honouringRun });
    const result = scheduler.syncTick();
    await flush();
    await scheduler.stop();
    expect(await result).toMatchObject({ ok: true, reason: 'shutdown' });
  });
});

describe('start() and stop()', () => {
  it('start() is idempotent: one first tick, one timer', () => {
    const log = new EventLog();
    const scheduler = new PeriodicScheduler({ name: 'job', every: 10, run: () => undefined }, log.sink);
    scheduler.start();
    scheduler.start();
    expect(jest.getTimerCount()).toBe(1);
    expect(log.of('nextTick')).toHaveLength(1);
  });

  it('state is idle until start(), ticking until stop(), then stopped, as soon as stop() is called', async () => {
    const scheduler = new PeriodicScheduler({ name: 'job', every: 10, mode: 'manual', run: honouringRun });
    expect(scheduler.state).toBe('idle');
    scheduler.start();
    expect(scheduler.state).toBe('ticking');
    await scheduler.tick();
    const stopped = scheduler.stop();
    expect(scheduler.state).toBe('stopped');
    await stopped;
    expect(scheduler.state).toBe('stopped');
  });

  it('a scheduler that was never started arms no timer', () => {
    new PeriodicScheduler({ name: 'job', every: 10, run: () => undefined });
    expect(jest.getTimerCount()).toBe(0);
  });

  it('stop() is idempotent: every call returns the same promise and stops runs once', async () => {
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual', run: honouringRun });
    await scheduler.tick();
    const first = scheduler.stop();
    expect(scheduler.stop()).toBe(first);
    await first;
    expect(scheduler.stop()).toBe(first);
    expect(log.of('finished')).toHaveLength(1);
  });

  it('stop() before start() resolves', async () => {
    const scheduler = new PeriodicScheduler({ name: 'job', every: 10, run: () => undefined });
    await expect(scheduler.stop()).resolves.toBeUndefined();
  });

  it('start() after stop() is refused with an error that says what to do', async () => {
    const { scheduler } = startScheduler({ every: 10 });
    await scheduler.stop();
    expect(() => scheduler.start()).toThrow(
      'job "job" was stopped and cannot start again; create a new PeriodicScheduler instead',
    );
  });

  it('stop() resolves only when every run has ended, each after its own grace', async () => {
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual', jobShutdown: 100, run: stuckRun });
    await scheduler.tick();
    await scheduler.tick();
    let stopped = false;
    void scheduler.stop().then(() => (stopped = true));
    await jest.advanceTimersByTimeAsync(99);
    expect(stopped).toBe(false);
    await jest.advanceTimersByTimeAsync(1);
    expect(stopped).toBe(true);
    expect(log.of('finished').map((event) => event.reason)).toEqual(['killed', 'killed']);
  });

  it('a run that stops its own scheduler synchronously ends as shutdown', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      run: (context) => {
        void scheduler.stop();
        return honouringRun(context);
      },
    });
    await scheduler.tick();
    await scheduler.stop();
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'shutdown' })]);
    expect(jest.getTimerCount()).toBe(0);
  });
});
