import { describe, expect, it, jest } from '@jest/globals';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import { deferred, flush, startScheduler, stuckRun, useFakeTimers, runsInTurn } from './helpers.js';

useFakeTimers();

describe("onOverlap: 'run' (default)", () => {
  it('a tick while a run is running starts another run; they overlap', async () => {
    const { scheduler, log } = startScheduler({ every: 10, mode: 'manual', run: stuckRun });
    await scheduler.tick();
    await scheduler.tick();
    expect(scheduler.running).toBe(2);
    expect(log.types()).toEqual(['nextTick', 'nextTick', 'started', 'nextTick', 'started']);
  });
});

describe("onOverlap: 'ignore'", () => {
  it('a tick while a run is running emits skipped with its jobId and starts nothing', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'ignore',
      run: stuckRun,
    });
    expect(await scheduler.tick()).toEqual({ ok: true, jobId: 1 });
    log.clear();
    expect(await scheduler.tick()).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(log.events).toEqual([
      { type: 'nextTick', name: 'job', in: 10 },
      { type: 'skipped', name: 'job', stillRunning: 1 },
    ]);
    expect(scheduler.running).toBe(1);
  });

  it('a run in its timeout grace still counts as running', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'ignore',
      timeout: 5,
      jobShutdown: 100,
      run: stuckRun,
    });
    await scheduler.tick();
    jest.advanceTimersByTime(50);
    expect(await scheduler.tick()).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(log.of('skipped')).toHaveLength(1);
  });

  it('once the run has ended the next tick starts a new one', async () => {
    const run = deferred();
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'ignore',
      run: () => run.promise,
    });
    await scheduler.tick();
    run.resolve();
    await flush();
    expect(await scheduler.tick()).toEqual({ ok: true, jobId: 2 });
  });

  it('auto mode: runs longer than every are skipped, not stacked', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      onOverlap: 'ignore',
      run: () => new Promise((resolve) => setTimeout(resolve, 25)),
    });
    await jest.advanceTimersByTimeAsync(100);
    const stopped = scheduler.stop();
    await jest.advanceTimersByTimeAsync(25);
    await stopped;
    expect(log.of('skipped').length).toBeGreaterThan(0);
    const runs = log.events.filter((event) => event.type === 'started' || event.type === 'finished');
    for (let i = 0; i < runs.length; i += 2) {
      expect([runs[i].type, runs[i + 1]?.type]).toEqual(['started', 'finished']);
    }
  });
});

describe("onOverlap: 'stopPrevious'", () => {
  it('aborts and abandons the running run at once: finished (killed), then stoppedPrevious, then started', async () => {
    const contexts: PeriodicContext[] = [];
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'stopPrevious',
      run: (context) => {
        contexts.push(context);
        return stuckRun();
      },
    });
    await scheduler.tick();
    log.clear();
    expect(await scheduler.tick()).toEqual({ ok: true, jobId: 2 });
    expect(log.events).toEqual([
      { type: 'nextTick', name: 'job', in: 10 },
      { type: 'finished', name: 'job', jobId: 1, reason: 'killed', durationMs: 0 },
      { type: 'stoppedPrevious', name: 'job', jobId: 1 },
      expect.objectContaining({ type: 'started', jobId: 2 }),
    ]);
    expect(contexts[0].signal.reason).toMatchObject({ name: 'PeriodicAbortError', reason: 'stopPrevious' });
    expect(contexts[1].signal.aborted).toBe(false);
    expect(scheduler.running).toBe(1);
  });

  it('gives no grace, whatever jobShutdown says', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'stopPrevious',
      jobShutdown: Infinity,
      run: stuckRun,
    });
    await scheduler.tick();
    await scheduler.tick();
    expect(log.of('finished')).toEqual([expect.objectContaining({ jobId: 1, reason: 'killed' })]);
  });

  it('Deviation: the syncTick waiter of a stopped run is answered with killed', async () => {
    const { scheduler } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'stopPrevious',
      run: stuckRun,
    });
    const first = scheduler.syncTick();
    await flush();
    await scheduler.tick();
    expect(await first).toEqual({ ok: true, reason: 'killed', durationMs: 0 });
  });

  it('a stopped run that settles later changes nothing', async () => {
    const { runs, run } = runsInTurn(2);
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'stopPrevious',
      run,
    });
    await scheduler.tick();
    await scheduler.tick();
    runs[0].reject(new Error('late'));
    await flush();
    expect(log.of('finished')).toHaveLength(1);
    expect(scheduler.running).toBe(1);
  });

  it('a run already timed out and in its grace keeps its reason when replaced', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'stopPrevious',
      timeout: 5,
      jobShutdown: 1000,
      run: stuckRun,
    });
    await scheduler.tick();
    jest.advanceTimersByTime(5);
    await scheduler.tick();
    expect(log.of('finished')).toEqual([expect.objectContaining({ jobId: 1, reason: 'timeout' })]);
    expect(log.of('stoppedPrevious')).toEqual([{ type: 'stoppedPrevious', name: 'job', jobId: 1 }]);
  });

  it('an abort listener that stops the scheduler prevents the new run', async () => {
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      onOverlap: 'stopPrevious',
      run: ({ signal }) => {
        signal.addEventListener('abort', () => void scheduler.stop());
        return stuckRun();
      },
    });
    await scheduler.tick();
    expect(await scheduler.tick()).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(log.of('started')).toHaveLength(1);
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'killed' })]);
    await scheduler.stop();
  });

  it('shifted mode: the replaced run does not arm a tick; the new run arms it when it ends', async () => {
    const { runs, run } = runsInTurn(2);
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      delayMode: 'shifted',
      onOverlap: 'stopPrevious',
      run,
    });
    await scheduler.tick();
    log.clear();
    await scheduler.tick();
    expect(log.types()).toEqual(['finished', 'stoppedPrevious', 'started']);
    runs[1].resolve();
    await flush();
    expect(log.types().slice(3)).toEqual(['nextTick', 'finished']);
  });
});
