// Operating a job at run time (docs/operations.md): status(), trigger(), pause() and resume(), on
// Jest's fake timers, where Date.now() and performance.now() advance together.
import { describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import {
  deferred,
  EventLog,
  flush,
  honouringRun,
  runsInTurn,
  startScheduler,
  stuckRun,
  useFakeTimers,
} from './helpers.js';

useFakeTimers();

const at = (ms: number): Date => new Date(ms);

describe('status()', () => {
  it('before start: idle, nothing done yet, no next tick; the schedule and mode as given', () => {
    const scheduler = new PeriodicScheduler({ name: 'job', every: 1000, run: () => undefined });
    expect(scheduler.status()).toEqual({
      name: 'job',
      state: 'idle',
      mode: 'auto',
      schedule: { every: 1000 },
      running: 0,
      nextTickAt: null,
      lastStartedAt: null,
      lastFinished: null,
      lastSucceededAt: null,
      consecutiveFailures: 0,
      counts: {
        started: 0,
        skipped: 0,
        missed: 0,
        guardFailed: 0,
        normal: 0,
        error: 0,
        timeout: 0,
        killed: 0,
        shutdown: 0,
        leaseLost: 0,
      },
      lease: null,
    });
  });

  it('a run that ends normally: its start, its end, its duration, and the next tick on the grid', async () => {
    const run = deferred();
    const t0 = Date.now();
    const { scheduler } = startScheduler({ every: 1000, run: () => run.promise });
    expect(scheduler.status()).toMatchObject({ state: 'ticking', nextTickAt: at(t0 + 1000) });
    jest.advanceTimersByTime(1000);
    expect(scheduler.status()).toMatchObject({
      running: 1,
      lastStartedAt: at(t0 + 1000),
      lastFinished: null,
      nextTickAt: at(t0 + 2000),
      counts: { started: 1, normal: 0 },
    });
    jest.advanceTimersByTime(250);
    run.resolve();
    await flush();
    const status = scheduler.status();
    expect(status).toMatchObject({
      running: 0,
      lastFinished: { reason: 'normal', at: at(t0 + 1250), durationMs: 250 },
      lastSucceededAt: at(t0 + 1250),
      consecutiveFailures: 0,
      counts: { started: 1, normal: 1 },
    });
    expect(status.lastFinished).not.toHaveProperty('error');
  });

  it("every kind of ending is counted; failures ('error', 'timeout', 'killed') add up until a 'normal' one", async () => {
    const runs = [
      () => Promise.reject(new Error('disk full')),
      stuckRun, // times out
      honouringRun, // stopped by the next tick's stopPrevious: killed
      () => undefined,
      honouringRun, // shut down
    ];
    let next = 0;
    const { scheduler } = startScheduler({
      every: 1000,
      mode: 'manual',
      timeout: 500,
      jobShutdown: 1000,
      onOverlap: 'stopPrevious',
      run: (context) => runs[next++](context),
    });
    const failures = () => scheduler.status().consecutiveFailures;
    await scheduler.syncTick();
    expect(failures()).toBe(1);
    await scheduler.tick();
    await jest.advanceTimersByTimeAsync(1500);
    expect(failures()).toBe(2);
    await scheduler.tick();
    await scheduler.tick();
    expect(scheduler.status().lastFinished?.reason).toBe('normal');
    expect(failures()).toBe(0);
    await scheduler.tick();
    await scheduler.stop();
    expect(scheduler.status()).toMatchObject({
      state: 'stopped',
      nextTickAt: null,
      lastFinished: { reason: 'shutdown' },
      consecutiveFailures: 0,
      counts: { started: 5, normal: 1, error: 1, timeout: 1, killed: 1, shutdown: 1, leaseLost: 0 },
    });
  });

  it("a stop does not end a run of failures: 'shutdown' counts neither way", async () => {
    const runs = [() => Promise.reject(new Error('disk full')), honouringRun];
    let next = 0;
    const { scheduler } = startScheduler({
      every: 1000,
      mode: 'manual',
      run: (context) => runs[next++](context),
    });
    await scheduler.syncTick();
    await scheduler.tick();
    await scheduler.stop();
    expect(scheduler.status()).toMatchObject({
      lastFinished: { reason: 'shutdown' },
      lastSucceededAt: null,
      consecutiveFailures: 1,
    });
  });

  it("a failed run's error is kept in lastFinished, and the failures are counted", async () => {
    const failure = new Error('disk full');
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual', run: () => Promise.reject(failure) });
    await scheduler.syncTick();
    await scheduler.syncTick();
    expect(scheduler.status()).toMatchObject({
      lastFinished: { reason: 'error', error: failure },
      lastSucceededAt: null,
      consecutiveFailures: 2,
      counts: { error: 2 },
    });
  });

  it('skipped ticks, missed slots and failed guards are counted', async () => {
    let guard: () => boolean = () => true;
    const { scheduler } = startScheduler({
      every: 100,
      onOverlap: 'ignore',
      run: stuckRun,
      when: () => guard(),
    });
    jest.advanceTimersByTime(300); // a run, then two skipped ticks
    guard = () => {
      throw new Error('no config');
    };
    jest.advanceTimersByTime(100);
    // The event loop stalled: the tick due at 500 is handled at 950, for slot 900; four slots missed.
    const fakeNow = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + 450);
    jest.advanceTimersByTime(100);
    expect(scheduler.status().counts).toMatchObject({
      started: 1,
      skipped: 2,
      missed: 4,
      guardFailed: 2,
    });
  });

  it('shifted mode: no next tick while the run is in flight; then `every` after its end', async () => {
    const run = deferred();
    const t0 = Date.now();
    const { scheduler } = startScheduler({ every: 1000, delayMode: 'shifted', run: () => run.promise });
    jest.advanceTimersByTime(1000);
    expect(scheduler.status().nextTickAt).toBeNull();
    jest.advanceTimersByTime(300);
    run.resolve();
    await flush();
    expect(scheduler.status().nextTickAt).toEqual(at(t0 + 2300));
  });

  it('cron: the next slot of the pattern, in its zone', () => {
    jest.setSystemTime(new Date('2026-03-01T10:00:30Z'));
    const { scheduler } = startScheduler({ cron: '0 12 * * *', timezone: 'Europe/Berlin' });
    expect(scheduler.status()).toMatchObject({
      schedule: { cron: '0 12 * * *', timezone: 'Europe/Berlin' },
      nextTickAt: new Date('2026-03-01T11:00:00Z'),
    });
    jest.advanceTimersByTime(3_600_000);
    expect(scheduler.status()).toMatchObject({
      nextTickAt: new Date('2026-03-02T11:00:00Z'),
      lastStartedAt: new Date('2026-03-01T11:00:00Z'),
    });
  });

  it('a cron job without a zone is read in the process zone, which its status names', () => {
    const { scheduler } = startScheduler({ cron: '0 3 * * *' });
    expect(scheduler.status().schedule).toEqual({
      cron: '0 3 * * *',
      timezone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    });
  });

  it('an interval whose next tick lies past the range of a Date has none', () => {
    const { scheduler } = startScheduler({ every: 2 ** 53 - 1 });
    expect(scheduler.status()).toMatchObject({ state: 'ticking', nextTickAt: null });
  });

  it('manual mode has no next tick', async () => {
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual' });
    await scheduler.tick();
    expect(scheduler.status()).toMatchObject({ mode: 'manual', nextTickAt: null, counts: { started: 1 } });
  });

  it('exclusive jobs: whether this replica holds the lease, and its fencing token', async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const holder = startScheduler({ every: 1000, exclusive: true, coordinator }).scheduler;
    expect(holder.status().lease).toEqual({ held: false, fencingToken: null });
    await flush();
    const other = startScheduler({ every: 1000, exclusive: true, coordinator }).scheduler;
    await flush();
    const { lease } = holder.status();
    expect(lease).toEqual({ held: true, fencingToken: expect.any(Number) });
    expect(lease!.fencingToken).toBeGreaterThan(0);
    expect(other.status().lease).toEqual({ held: false, fencingToken: null });
    await Promise.all([holder.stop(), other.stop()]);
  });

  it('leaseLost: a run stopped because the lease was lost is counted, and as a failure', async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 300 });
    const { scheduler } = startScheduler({
      every: 100,
      exclusive: true,
      coordinator,
      mode: 'manual',
      run: honouringRun,
    });
    await flush();
    await scheduler.tick();
    jest.spyOn(coordinator, 'renew').mockResolvedValue(false);
    // The next heartbeat, within 100 ms, finds the lease refused (and the store frees it only at 300 ms).
    await jest.advanceTimersByTimeAsync(150);
    expect(scheduler.status()).toMatchObject({
      lease: { held: false, fencingToken: null },
      lastFinished: { reason: 'leaseLost' },
      consecutiveFailures: 1,
      counts: { leaseLost: 1 },
    });
    await scheduler.stop();
  });

  it('dates are when things happened: a clock set forward later moves none of them', async () => {
    jest.setSystemTime(new Date('2026-01-01T10:00:00Z'));
    const { scheduler } = startScheduler({ every: 1000 });
    jest.advanceTimersByTime(1000);
    await flush();
    const before = scheduler.status();
    jest.setSystemTime(new Date('2026-01-01T10:30:00Z'));
    const after = scheduler.status();
    expect(after.lastStartedAt).toEqual(new Date('2026-01-01T10:00:01Z'));
    expect(after.lastFinished?.at).toEqual(before.lastFinished?.at);
    expect(after.lastSucceededAt).toEqual(new Date('2026-01-01T10:00:01Z'));
  });

  it('durations are rounded to the microsecond, in the status and in events', async () => {
    const { scheduler, log } = startScheduler({ every: 1000, mode: 'manual' });
    const fake = performance.now.bind(performance);
    let calls = 0;
    jest.spyOn(performance, 'now').mockImplementation(() => fake() + 0.1234567891 * ++calls);
    await scheduler.syncTick();
    const { durationMs } = scheduler.status().lastFinished!;
    expect(durationMs).toBeGreaterThan(0);
    expect(durationMs).toBe(Math.round(durationMs * 1000) / 1000);
    expect(log.of('finished')[0].durationMs).toBe(durationMs);
  });
});

describe('trigger()', () => {
  it('auto mode: a run now; the grid does not move and no nextTick is reported', async () => {
    const t0 = Date.now();
    const { scheduler, log } = startScheduler({ every: 1000 });
    jest.advanceTimersByTime(400);
    log.clear();
    expect(await scheduler.trigger()).toEqual({ ok: true, jobId: 1 });
    // The trigger is recorded in the audit trail (`operated`) once its run has started.
    expect(log.types()).toEqual(['started', 'finished', 'operated']);
    expect(scheduler.status().nextTickAt).toEqual(at(t0 + 1000));
    jest.advanceTimersByTime(600);
    expect(log.of('started').map((event) => event.jobId)).toEqual([1, 2]);
    expect(log.of('started')[1].scheduledAt).toBe(1000);
  });

  it('auto mode, shifted: the pending tick stays where it was; the triggered run arms none', async () => {
    const t0 = Date.now();
    const { scheduler, log } = startScheduler({ every: 1000, delayMode: 'shifted' });
    jest.advanceTimersByTime(400);
    await scheduler.trigger();
    expect(scheduler.status().nextTickAt).toEqual(at(t0 + 1000));
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(600);
    expect(log.of('started')).toHaveLength(2);
  });

  it('auto mode, shifted, stopPrevious: a triggered run that replaces the grid run arms the next tick for it', async () => {
    const { runs, run } = runsInTurn(3);
    const { scheduler, log } = startScheduler({
      every: 1000,
      delayMode: 'shifted',
      onOverlap: 'stopPrevious',
      jobShutdown: 'brutalKill',
      run,
    });
    jest.advanceTimersByTime(1000); // run 1, of the grid: no tick is pending while it runs
    expect(await scheduler.trigger()).toEqual({ ok: true, jobId: 2 });
    expect(scheduler.status().nextTickAt).toBeNull();
    jest.advanceTimersByTime(200);
    runs[1].resolve();
    await flush();
    expect(scheduler.status().nextTickAt).toEqual(at(Date.now() + 1000));
    jest.advanceTimersByTime(1000);
    expect(log.of('started').map((event) => event.jobId)).toEqual([1, 2, 3]);
    expect(log.of('finished').map((event) => event.reason)).toEqual(['killed', 'normal']);
  });

  it('auto mode, shifted: a triggered run that ends arms no tick, so the grid keeps its single pending tick', async () => {
    const { runs, run } = runsInTurn(3);
    const { scheduler, log } = startScheduler({ every: 1000, delayMode: 'shifted', run });
    jest.advanceTimersByTime(1000); // run 1, of the grid
    await scheduler.trigger(); // run 2, beside it (onOverlap 'run')
    runs[1].resolve();
    await flush();
    expect(scheduler.status().nextTickAt).toBeNull();
    jest.advanceTimersByTime(200);
    runs[0].resolve();
    await flush();
    expect(scheduler.status().nextTickAt).toEqual(at(Date.now() + 1000));
    expect(log.of('nextTick').map((event) => event.in)).toEqual([1000, 1000]);
  });

  it('during the jitter wait of a tick: a run now; the waiting tick then runs as its policy says', async () => {
    jest.spyOn(Math, 'random').mockReturnValue(0.9);
    const { scheduler, log } = startScheduler({
      every: 10_000,
      jitter: 5000,
      onOverlap: 'ignore',
      run: stuckRun,
    });
    jest.advanceTimersByTime(10_000);
    expect(await scheduler.trigger()).toEqual({ ok: true, jobId: 1 });
    expect(log.of('missed')).toEqual([]);
    jest.advanceTimersByTime(4500);
    expect(log.of('skipped')).toEqual([{ type: 'skipped', name: 'job', stillRunning: 1 }]);
  });

  it('while an async guard is pending: one guard at a time, so the trigger starts nothing and counts as missed', async () => {
    const verdict = deferred<boolean>();
    const { scheduler, log } = startScheduler({ every: 10_000, when: () => verdict.promise });
    jest.advanceTimersByTime(10_000);
    expect(await scheduler.trigger()).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 1 }]);
    verdict.resolve(true);
    await flush();
  });

  it('manual mode: the same as tick()', async () => {
    const { scheduler, log } = startScheduler({ every: 1000, mode: 'manual' });
    expect(await scheduler.trigger()).toEqual({ ok: true, jobId: 1 });
    expect(log.types()).toEqual(['nextTick', 'nextTick', 'started', 'finished', 'operated']);
  });

  it("with a guard: evaluated; false starts nothing ('jobNotStarted'), a throw is guardFailed", async () => {
    let verdict: () => boolean = () => false;
    const { scheduler, log } = startScheduler({ every: 1000, when: () => verdict() });
    expect(await scheduler.trigger()).toEqual({ ok: false, error: 'jobNotStarted' });
    verdict = () => {
      throw new Error('no config');
    };
    expect(await scheduler.trigger()).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(log.of('guardFailed')).toHaveLength(1);
    verdict = () => true;
    expect(await scheduler.trigger()).toEqual({ ok: true, jobId: 1 });
  });

  it('a guard that fails after its job stopped reports nothing', async () => {
    const guard = deferred<boolean>();
    const { scheduler, log } = startScheduler({ every: 1000, when: () => guard.promise });
    const triggered = scheduler.trigger();
    await scheduler.stop();
    guard.reject(new Error('too late'));
    expect(await triggered).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(log.of('guardFailed')).toEqual([]);
  });

  it('with an async guard: resolves once the guard has answered', async () => {
    const guard = deferred<boolean>();
    const { scheduler } = startScheduler({ every: 1000, when: () => guard.promise });
    const triggered = scheduler.trigger();
    guard.resolve(true);
    expect(await triggered).toEqual({ ok: true, jobId: 1 });
  });

  it.each([
    ['run', { ok: true, jobId: 2 }, ['started', 'started', 'operated']],
    ['ignore', { ok: false, error: 'jobNotStarted' }, ['started', 'skipped']],
    [
      'stopPrevious',
      { ok: true, jobId: 2 },
      ['started', 'finished', 'stoppedPrevious', 'started', 'operated'],
    ],
  ] as const)('onOverlap %s: applied as on any tick', async (onOverlap, result, types) => {
    const { scheduler, log } = startScheduler({ every: 1000, onOverlap, run: honouringRun });
    jest.advanceTimersByTime(1000);
    expect(await scheduler.trigger()).toEqual(result);
    expect(log.types().filter((type) => type !== 'nextTick')).toEqual(types);
    await scheduler.stop();
  });

  it("a paused job: 'paused'; before start() and after stop(): 'jobNotStarted'", async () => {
    const scheduler = new PeriodicScheduler({ name: 'job', every: 1000, run: () => undefined });
    expect(await scheduler.trigger()).toEqual({ ok: false, error: 'jobNotStarted' });
    scheduler.start();
    scheduler.pause();
    expect(await scheduler.trigger()).toEqual({ ok: false, error: 'paused' });
    await scheduler.stop();
    expect(await scheduler.trigger()).toEqual({ ok: false, error: 'jobNotStarted' });
  });

  it("a replica without the lease: 'notLeaseHolder' with a coordinator that carries no trigger, in both modes; the holder runs it with its token", async () => {
    for (const mode of ['auto', 'manual'] as const) {
      const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
      // A coordinator of the steps for one job and the batched ones, without those that carry triggers.
      Object.assign(coordinator, { requestTrigger: undefined });
      const contexts: PeriodicContext[] = [];
      const options = {
        every: 1000,
        exclusive: true,
        coordinator,
        mode,
        run: (c: PeriodicContext) => void contexts.push(c),
      };
      const holder = startScheduler(options);
      await flush();
      const other = startScheduler(options);
      await flush();
      expect(await other.scheduler.trigger()).toEqual({ ok: false, error: 'notLeaseHolder' });
      expect(contexts).toEqual([]);
      expect(await holder.scheduler.trigger()).toEqual({ ok: true, jobId: 1 });
      expect(contexts[0].fencingToken).toBe(holder.log.of('leaseAcquired')[0].fencingToken);
      await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
    }
  });

  it('an exclusive holder claims no slot for a triggered run: the fleet schedule stays as it was', async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const { scheduler } = startScheduler({ every: 1000, exclusive: true, coordinator });
    await flush();
    const before = await coordinator.readSchedule('job');
    const write = jest.spyOn(coordinator, 'writeSchedule');
    expect(await scheduler.trigger()).toEqual({ ok: true, jobId: 1 });
    expect(write).not.toHaveBeenCalled();
    expect(await coordinator.readSchedule('job')).toEqual(before);
    await scheduler.stop();
  });
});

describe('pause() and resume()', () => {
  it('a paused job starts nothing and evaluates no guard; the run in flight goes on and ends normally', async () => {
    const when = jest.fn(() => true);
    const run = deferred();
    const { scheduler, log } = startScheduler({ every: 100, when, run: () => run.promise });
    jest.advanceTimersByTime(100);
    scheduler.pause();
    expect(scheduler.status()).toMatchObject({ state: 'paused', running: 1, nextTickAt: null });
    expect(scheduler.state).toBe('paused');
    jest.advanceTimersByTime(1000);
    run.resolve();
    await flush();
    expect(when).toHaveBeenCalledTimes(1);
    expect(log.of('finished').map((event) => event.reason)).toEqual(['normal']);
    expect(log.of('missed')).toEqual([]);
    expect(scheduler.status().counts).toMatchObject({ started: 1, missed: 0 });
  });

  it('a late tick while paused reports no missed slots: they were dropped on purpose', () => {
    const { scheduler, log } = startScheduler({ every: 100 });
    scheduler.pause();
    const fakeNow = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + 450);
    jest.advanceTimersByTime(100);
    expect(log.of('missed')).toEqual([]);
    expect(scheduler.status().counts.missed).toBe(0);
  });

  it('a tick whose async guard is pending when the job is paused starts nothing', async () => {
    const guard = deferred<boolean>();
    const { scheduler, log } = startScheduler({ every: 100, when: () => guard.promise });
    jest.advanceTimersByTime(100);
    scheduler.pause();
    guard.resolve(true);
    await flush();
    expect(log.of('started')).toEqual([]);
  });

  it('a tick whose slot claim is pending when the job is paused starts nothing', async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const { scheduler, log } = startScheduler({ every: 1000, exclusive: true, coordinator });
    await flush();
    const claim = deferred<boolean>();
    jest.spyOn(coordinator, 'writeSchedule').mockReturnValue(claim.promise);
    jest.advanceTimersByTime(1000);
    scheduler.pause();
    claim.resolve(true);
    await flush();
    expect(log.of('started')).toEqual([]);
    await scheduler.stop();
  });

  it('resume, regular mode: the next tick is the next slot of the grid', () => {
    const { scheduler, log } = startScheduler({ every: 100 });
    jest.advanceTimersByTime(100);
    scheduler.pause();
    jest.advanceTimersByTime(250); // now 350
    scheduler.resume();
    expect(scheduler.status().nextTickAt).toEqual(at(Date.now() + 50));
    jest.advanceTimersByTime(50);
    expect(log.of('started').map((event) => event.scheduledAt)).toEqual([100, 400]);
  });

  it('resume, shifted mode: the next tick comes `every` after resume', () => {
    const { scheduler, log } = startScheduler({ every: 100, delayMode: 'shifted' });
    jest.advanceTimersByTime(100);
    scheduler.pause();
    jest.advanceTimersByTime(250); // now 350
    scheduler.resume();
    expect(scheduler.status().nextTickAt).toEqual(at(Date.now() + 100));
    jest.advanceTimersByTime(99);
    expect(log.of('started')).toHaveLength(1);
    jest.advanceTimersByTime(1);
    expect(log.of('started').map((event) => event.scheduledAt)).toEqual([100, 450]);
  });

  it('resume, shifted mode, with a run in flight: its end arms the next tick, as always', async () => {
    const run = deferred();
    const { scheduler, log } = startScheduler({ every: 100, delayMode: 'shifted', run: () => run.promise });
    jest.advanceTimersByTime(100);
    scheduler.pause();
    scheduler.resume();
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(500);
    run.resolve();
    await flush();
    jest.advanceTimersByTime(100);
    expect(log.of('started').map((event) => event.scheduledAt)).toEqual([100, 700]);
  });

  it("tick(), syncTick() and trigger() of a paused job: 'paused'; after resume they run", async () => {
    const { scheduler } = startScheduler({ every: 100, mode: 'manual' });
    scheduler.pause();
    expect(await scheduler.tick()).toEqual({ ok: false, error: 'paused' });
    expect(await scheduler.syncTick()).toEqual({ ok: false, error: 'paused' });
    expect(await scheduler.trigger()).toEqual({ ok: false, error: 'paused' });
    scheduler.resume();
    expect(await scheduler.syncTick()).toMatchObject({ ok: true, reason: 'normal' });
  });

  it('pause and resume are idempotent; a job paused before start starts paused', async () => {
    const scheduler = new PeriodicScheduler(
      { name: 'job', every: 100, run: () => undefined },
      new EventLog().sink,
    );
    scheduler.pause();
    scheduler.pause();
    expect(scheduler.state).toBe('idle');
    scheduler.start();
    expect(scheduler.state).toBe('paused');
    jest.advanceTimersByTime(300);
    expect(scheduler.status().counts.started).toBe(0);
    scheduler.resume();
    scheduler.resume();
    jest.advanceTimersByTime(100);
    expect(scheduler.status().counts.started).toBe(1);
    await scheduler.stop();
    scheduler.pause();
    expect(scheduler.state).toBe('stopped');
  });

  it("a paused holder of an exclusive job keeps its lease; its claims are answered 'paused' and start nothing", async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const { scheduler, log } = startScheduler({ every: 1000, exclusive: true, coordinator });
    await flush();
    await scheduler.pause();
    const write = jest.spyOn(coordinator, 'writeSchedule');
    await jest.advanceTimersByTimeAsync(5000);
    expect(scheduler.status().lease?.held).toBe(true);
    // Each slot is claimed, so that the fleet's schedule keeps its place, and the store answers that it is paused.
    expect(write).toHaveBeenCalledTimes(5);
    expect(log.of('started')).toEqual([]);
    expect(log.of('missed')).toEqual([]);
    await scheduler.stop();
  });
});
