import { beforeEach, describe, expect, it, jest } from '@jest/globals';
import { armedDeadlines, DeadlineTimer, MAX_TIMER_DELAY } from '../../lib/scheduler/deadline-timer.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import { deferred, flush, startScheduler, useFakeTimers, runsInTurn } from './helpers.js';

useFakeTimers();

/** Makes `performance.now()` read `by` ms ahead of the fake clock, as after a stalled event loop. */
function stallClock(by: number): void {
  const fakeNow = performance.now.bind(performance);
  jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + by);
}

describe('fake timers', () => {
  it('jest.advanceTimersByTime(every) is exactly one tick', () => {
    const { log } = startScheduler({ every: 1000 });
    for (let tick = 1; tick <= 5; tick++) {
      jest.advanceTimersByTime(999);
      expect(log.of('started')).toHaveLength(tick - 1);
      jest.advanceTimersByTime(1);
      expect(log.of('started')).toHaveLength(tick);
    }
  });

  it('the first tick comes after initialDelay, then every `every`', () => {
    const { log } = startScheduler({ every: 100, initialDelay: 30 });
    jest.advanceTimersByTime(29);
    expect(log.of('started')).toHaveLength(0);
    jest.advanceTimersByTime(1);
    expect(log.of('started')).toHaveLength(1);
    jest.advanceTimersByTime(100);
    expect(log.of('started')).toHaveLength(2);
  });

  it('initialDelay 0 ticks on the next timer turn', () => {
    const { log } = startScheduler({ every: 100, initialDelay: 0 });
    expect(log.of('started')).toHaveLength(0);
    jest.advanceTimersByTime(0);
    expect(log.of('started')).toHaveLength(1);
  });

  it('the helpers see one timer per armed job, as with one setTimeout per job', () => {
    const often = startScheduler({ every: 1000 });
    const seldom = startScheduler({
      every: 5000,
      timeout: 100,
      jobShutdown: 'brutalKill',
      run: () => new Promise(() => undefined),
    });
    expect(jest.getTimerCount()).toBe(2);
    jest.runOnlyPendingTimers(); // up to 5000, the last pending: the first job ticks at each second on the way
    expect([often.log.of('started').length, seldom.log.of('started').length]).toEqual([5, 1]);
    // Both next ticks, the timeout of the run still running, and the process's one watch of the runs in flight
    // for a hung one (docs/alerts.md), armed while a run is in flight.
    expect(jest.getTimerCount()).toBe(4);
    jest.advanceTimersToNextTimer(); // 5100: the timeout
    expect(seldom.log.of('finished')).toEqual([expect.objectContaining({ reason: 'timeout' })]);
    jest.advanceTimersToNextTimer(); // 6000: the first job's next tick
    expect([often.log.of('started').length, seldom.log.of('started').length]).toEqual([6, 1]);
  });
});

describe('regular mode', () => {
  it('deadlines form a grid anchored at start: start + initialDelay + k·every', () => {
    const start = performance.now();
    const { log } = startScheduler({ every: 50, initialDelay: 20 });
    jest.advanceTimersByTime(20 + 50 * 9);
    expect(log.of('started').map((event) => event.scheduledAt - start)).toEqual(
      Array.from({ length: 10 }, (_, k) => 20 + 50 * k),
    );
  });

  it('every is start-to-start: a run longer than every does not delay the next tick', async () => {
    const { log } = startScheduler({
      every: 100,
      run: () => new Promise((resolve) => setTimeout(resolve, 150)),
    });
    jest.advanceTimersByTime(300);
    await flush();
    expect(log.of('started').map((event) => event.startedAt)).toEqual([100, 200, 300]);
  });

  it('the next tick is computed from the deadline, so late handling never adds up', () => {
    const start = performance.now();
    let lag = 0;
    const fakeNow = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + lag);
    // The clock jumps 7 ms during every run, as if the process had been busy that long.
    const { log } = startScheduler({ every: 100, run: () => void (lag += 7) });
    jest.advanceTimersByTime(100 * 10);
    const started = log.of('started');
    expect(started.map((event) => event.scheduledAt - start)).toEqual(
      Array.from({ length: 10 }, (_, k) => 100 * (k + 1)),
    );
    // Each tick is armed before its run, while the clock (not the fake timers) loses 7 ms in every run: each
    // later tick starts 7 ms after its slot, and the lateness does not add up.
    expect(started.map((event) => event.startedAt - event.scheduledAt)).toEqual([0, ...Array(9).fill(7)]);
    expect(log.of('missed')).toHaveLength(0);
  });

  it('nextTick reports initialDelay first, then every, with the next tick armed before the run starts', () => {
    const { log } = startScheduler({ every: 100, initialDelay: 10 });
    jest.advanceTimersByTime(110);
    expect(log.events.filter((event) => event.type !== 'finished')).toEqual([
      { type: 'nextTick', name: 'job', in: 10 },
      { type: 'nextTick', name: 'job', in: 100 },
      expect.objectContaining({ type: 'started', jobId: 1 }),
      { type: 'nextTick', name: 'job', in: 100 },
      expect.objectContaining({ type: 'started', jobId: 2 }),
    ]);
  });
});

describe('scheduledDate', () => {
  it('is the wall-clock time of the slot: start + initialDelay + k·every, also when the tick is late', () => {
    const dates: number[] = [];
    const started = Date.now();
    startScheduler({
      every: 1000,
      initialDelay: 300,
      run: (ctx) => void dates.push(ctx.scheduledDate.getTime()),
    });
    jest.advanceTimersByTime(2300);
    stallClock(2500); // the event loop stalled: the tick due at 3300 is handled at 5800
    jest.advanceTimersByTime(1000);
    // Slots 3300, 4300 and 5300 passed; the tick runs for the latest.
    expect(dates.map((date) => date - started)).toEqual([300, 1300, 2300, 5300]);
  });

  it('shifted mode: `every` after the end of the run before; a manual tick: the moment it was asked for', async () => {
    const dates: number[] = [];
    const started = Date.now();
    const run = (ctx: PeriodicContext) => void dates.push(ctx.scheduledDate.getTime());
    startScheduler({ every: 1000, delayMode: 'shifted', run });
    jest.advanceTimersByTime(2000);
    expect(dates.map((date) => date - started)).toEqual([1000, 2000]);
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual', name: 'manual', run });
    jest.advanceTimersByTime(123);
    await scheduler.tick();
    expect(dates[2] - started).toBe(2123);
  });
});

describe('late ticks (Deviation: missed slots are dropped, not replayed)', () => {
  it('a tick handled whole intervals late runs once for the latest passed slot and reports the rest as missed', () => {
    const start = performance.now();
    const { log } = startScheduler({ every: 100 });
    jest.advanceTimersByTime(100);
    log.clear();
    stallClock(350); // the event loop stalled: the tick due at 200 is handled at 550
    jest.advanceTimersByTime(100);
    expect(log.types()).toEqual(['missed', 'nextTick', 'started', 'finished']);
    expect(log.of('missed')[0]).toEqual({ type: 'missed', name: 'job', count: 3 });
    expect(log.of('started')[0].scheduledAt - start).toBe(500);
  });

  it('after a stall the grid continues at the next slot in the future', () => {
    const start = performance.now();
    const { log } = startScheduler({ every: 100 });
    jest.advanceTimersByTime(100);
    stallClock(250); // fake clock 200 reads 450: slot 400 runs, next slot is 500
    jest.advanceTimersByTime(100);
    jest.advanceTimersByTime(49); // fake 249 reads 499: nothing yet
    expect(log.of('started')).toHaveLength(2);
    jest.advanceTimersByTime(1); // fake 250 reads 500
    expect(log.of('started').map((event) => event.scheduledAt - start)).toEqual([100, 400, 500]);
    expect(log.of('missed').map((event) => event.count)).toEqual([2]);
  });

  it('a tick less than one interval late is not a miss', () => {
    const { log } = startScheduler({ every: 100 });
    stallClock(99);
    jest.advanceTimersByTime(100);
    expect(log.of('missed')).toHaveLength(0);
    expect(log.of('started')).toHaveLength(1);
  });

  it('ticks plus missed slots account for every elapsed slot', () => {
    const { log } = startScheduler({ every: 10 });
    let stall = 0;
    for (let i = 0; i < 20; i++) {
      stall += (i * 7) % 25;
      jest.restoreAllMocks();
      stallClock(stall);
      jest.advanceTimersByTime(10);
    }
    const last = log.of('started').at(-1)!.scheduledAt;
    const missed = log.of('missed').reduce((sum, event) => sum + event.count, 0);
    expect(log.of('started').length + missed).toBe(last / 10);
  });
});

describe('shifted mode', () => {
  it('the next tick comes `every` ms after the run ends', async () => {
    const { log } = startScheduler({
      every: 100,
      delayMode: 'shifted',
      run: () => new Promise((resolve) => setTimeout(resolve, 30)),
    });
    jest.advanceTimersByTime(100); // run 1 starts at 100, ends at 130
    expect(log.of('started')).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(30);
    expect(log.of('finished')).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(99);
    expect(log.of('started')).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(log.of('started').map((event) => event.scheduledAt)).toEqual([100, 230]);
  });

  it('emits nextTick before finished when a run ends', () => {
    const { log } = startScheduler({ every: 100, delayMode: 'shifted' });
    jest.advanceTimersByTime(100);
    expect(log.types()).toEqual(['nextTick', 'started', 'nextTick', 'finished']);
  });

  it('Deviation: a tick whose guard is false arms the next tick `every` ms later instead of stopping for good', () => {
    let open = false;
    const { log } = startScheduler({ every: 100, delayMode: 'shifted', when: () => open });
    jest.advanceTimersByTime(300);
    expect(log.of('nextTick')).toHaveLength(4);
    open = true;
    jest.advanceTimersByTime(100);
    expect(log.of('started')).toHaveLength(1);
  });

  it('Deviation: a tick skipped by onOverlap ignore arms the next tick (manual ticks can overlap)', async () => {
    const first = deferred();
    const { scheduler, log } = startScheduler({
      every: 100,
      delayMode: 'shifted',
      mode: 'manual',
      onOverlap: 'ignore',
      run: () => first.promise,
    });
    await scheduler.tick();
    log.clear();
    await scheduler.tick();
    expect(log.types()).toEqual(['skipped', 'nextTick']);
  });

  it('a tick whose guard throws arms the next tick', () => {
    const { log } = startScheduler({
      every: 100,
      delayMode: 'shifted',
      when: () => {
        throw new Error('db down');
      },
    });
    jest.advanceTimersByTime(300);
    expect(log.of('guardFailed')).toHaveLength(3);
  });

  it('never misses slots: lateness only delays the next tick', () => {
    const { log } = startScheduler({ every: 100, delayMode: 'shifted' });
    jest.advanceTimersByTime(100);
    stallClock(1000);
    jest.advanceTimersByTime(100);
    expect(log.of('missed')).toHaveLength(0);
    expect(log.of('started')).toHaveLength(2);
  });
});

describe('long intervals', () => {
  // Jest's fake timers honour any delay, but Node fires a timer of more than MAX_TIMER_DELAY after 1 ms:
  // what matters is that no timer is ever asked for more.
  const longestTimer = (spy: { mock: { calls: unknown[][] } }) =>
    Math.max(...spy.mock.calls.map(([, delay]) => delay as number));

  it('waits longer than the Node timer limit are chunked, not turned into a 1 ms loop', () => {
    const setTimeoutSpy = jest.spyOn(globalThis, 'setTimeout');
    const every = MAX_TIMER_DELAY + 1000;
    const { log } = startScheduler({ every });
    expect(longestTimer(setTimeoutSpy)).toBe(MAX_TIMER_DELAY);
    jest.advanceTimersByTime(MAX_TIMER_DELAY);
    expect(log.of('started')).toHaveLength(0);
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(999);
    expect(log.of('started')).toHaveLength(0);
    jest.advanceTimersByTime(1);
    expect(log.of('started')).toHaveLength(1);
    expect(longestTimer(setTimeoutSpy)).toBe(MAX_TIMER_DELAY);
  });

  it('an interval of 2^53−1 ms arms a timer within the limit and never fires early', () => {
    const setTimeoutSpy = jest.spyOn(globalThis, 'setTimeout');
    const { log } = startScheduler({ every: Number.MAX_SAFE_INTEGER });
    expect(longestTimer(setTimeoutSpy)).toBe(MAX_TIMER_DELAY);
    jest.advanceTimersByTime(MAX_TIMER_DELAY * 3);
    expect(log.of('started')).toHaveLength(0);
    expect(jest.getTimerCount()).toBe(1);
    expect(longestTimer(setTimeoutSpy)).toBe(MAX_TIMER_DELAY);
  });

  it('a timeout longer than the timer limit is chunked too', async () => {
    const setTimeoutSpy = jest.spyOn(globalThis, 'setTimeout');
    const { scheduler, log } = startScheduler({
      every: 10,
      mode: 'manual',
      timeout: MAX_TIMER_DELAY + 5,
      jobShutdown: 'brutalKill',
      run: () => new Promise(() => undefined),
    });
    await scheduler.tick();
    expect(longestTimer(setTimeoutSpy)).toBe(MAX_TIMER_DELAY);
    jest.advanceTimersByTime(MAX_TIMER_DELAY + 4);
    expect(log.of('finished')).toHaveLength(0);
    jest.advanceTimersByTime(1);
    expect(log.of('finished')).toEqual([expect.objectContaining({ reason: 'timeout' })]);
  });
});

describe('never early', () => {
  it('a timer that fires before its deadline (as Node timers may, by up to 1 ms) is armed again', () => {
    const fired: number[] = [];
    const timer = new DeadlineTimer({ onDeadline: () => fired.push(performance.now()) });
    const fakeNow = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() - 0.3); // the clock lags the timer
    timer.armAt(100);
    jest.advanceTimersByTime(100); // the timer fires when performance.now() reads 99.7
    expect(fired).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(fired).toEqual([100.7]);
  });

  it('no run starts before its scheduledAt', () => {
    const { log } = startScheduler({ every: 7, initialDelay: 3 });
    jest.advanceTimersByTime(1000);
    for (const event of log.of('started')) expect(event.startedAt).toBeGreaterThanOrEqual(event.scheduledAt);
  });
});

describe('the shared timer (on real timers)', () => {
  beforeEach(() => {
    jest.useRealTimers();
  });

  /** Resolves once `count` of the timers made with `fire` have been called. */
  function firing(count: number): {
    fired: string[];
    fire: (name: string) => () => void;
    done: Promise<void>;
  } {
    const fired: string[] = [];
    let done!: () => void;
    const promise = new Promise<void>((resolve) => (done = resolve));
    const fire = (name: string) => () => {
      if (fired.push(name) === count) done();
    };
    return { fired, fire, done: promise };
  }

  it('serves every deadline, meeting them in order, and the same one in arming order', async () => {
    const { fired, fire, done } = firing(4);
    const timers = ['c', 'a', 'b', 'd'].map((name) => new DeadlineTimer({ onDeadline: fire(name) }));
    const start = performance.now();
    timers[0].armAt(start + 30);
    timers[1].armAt(start + 10);
    timers[2].armAt(start + 20);
    timers[3].armAt(start + 30);
    expect(armedDeadlines()).toBe(4);
    await done;
    expect(fired).toEqual(['a', 'b', 'c', 'd']);
    expect(armedDeadlines()).toBe(0);
  });

  it('meets many deadlines armed out of order, some of them equal, in order and never early', async () => {
    // Waits of 5 to 40 ms in quarter milliseconds: many timers share a deadline, and they are armed out of
    // deadline order; some are cancelled, some armed again, before any is due.
    let seed = 7;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    const start = performance.now();
    const called: { deadline: number; order: number; at: number }[] = [];
    const timers = Array.from({ length: 300 }, (_, order) => {
      const timer: DeadlineTimer = new DeadlineTimer({
        onDeadline: () => called.push({ deadline: timer.deadline, order, at: performance.now() }),
      });
      timer.armAt(start + 5 + Math.floor(random() * 140) / 4);
      return timer;
    });
    const cancelled = timers.filter((_, i) => i % 7 === 0);
    for (const timer of cancelled) timer.cancel();
    for (const timer of timers.filter((_, i) => i % 11 === 1 && i % 7 !== 0))
      timer.armAt(start + 5 + random() * 35);
    const expected = timers
      .map((timer, order) => ({ timer, order }))
      .filter(({ timer }) => !cancelled.includes(timer))
      .sort((a, b) => a.timer.deadline - b.timer.deadline || a.timer.sequence - b.timer.sequence)
      .map(({ order }) => order);
    expect(armedDeadlines()).toBe(expected.length);
    await new Promise<void>(function wait(resolve) {
      if (armedDeadlines() === 0 && called.length === expected.length) resolve();
      else setTimeout(() => wait(resolve), 20);
    });
    expect(called.map(({ order }) => order)).toEqual(expected);
    for (const { deadline, at } of called) expect(at).toBeGreaterThanOrEqual(deadline);
  });

  it('a due timer cancelled or armed again by an earlier callback of the same turn is not called', async () => {
    const { fired, fire, done } = firing(2);
    const start = performance.now();
    const later = new DeadlineTimer({ onDeadline: fire('later') });
    const cancelled = new DeadlineTimer({ onDeadline: fire('cancelled') });
    const first = new DeadlineTimer({
      onDeadline: () => {
        fire('first')();
        cancelled.cancel();
        later.armAt(start + 50);
        expect(armedDeadlines()).toBe(1);
      },
    });
    // One deadline, so that the three are due in the same turn whatever the machine's load.
    first.armAt(start + 10);
    cancelled.armAt(start + 10);
    later.armAt(start + 10);
    await done;
    expect(fired).toEqual(['first', 'later']);
    expect(performance.now()).toBeGreaterThanOrEqual(start + 50);
  });

  it('a timer armed by a callback for a deadline already passed waits for the next turn', async () => {
    const { fired, fire, done } = firing(2);
    const again = new DeadlineTimer({ onDeadline: fire('again') });
    const first = new DeadlineTimer({
      onDeadline: () => {
        fire('first')();
        again.armAt(performance.now());
        expect(fired).toEqual(['first']);
      },
    });
    first.armAt(performance.now() + 10);
    await done;
    expect(fired).toEqual(['first', 'again']);
  });
});

describe('one pending tick', () => {
  it('a scheduler keeps at most one tick timer', () => {
    startScheduler({ every: 10, delayMode: 'regular' });
    for (let i = 0; i < 10; i++) {
      jest.advanceTimersByTime(10);
      expect(jest.getTimerCount()).toBe(1);
    }
  });

  it('in shifted mode, runs ending one after another re-arm the one pending tick', async () => {
    const { runs, run } = runsInTurn(2);
    const { scheduler, log } = startScheduler({
      every: 100,
      delayMode: 'shifted',
      mode: 'manual',
      run,
    });
    await scheduler.tick();
    await scheduler.tick();
    runs[0].resolve();
    runs[1].resolve();
    await flush();
    expect(log.of('nextTick')).toHaveLength(3);
    expect(jest.getTimerCount()).toBe(0);
  });
});

describe('stop', () => {
  it('after stop() no timer of the scheduler remains', async () => {
    const { scheduler } = startScheduler({
      every: 10,
      timeout: 1000,
      run: () => new Promise(() => undefined),
    });
    jest.advanceTimersByTime(30);
    expect(jest.getTimerCount()).toBe(4); // the next tick and the timeouts of three runs
    const stopped = scheduler.stop();
    await jest.advanceTimersByTimeAsync(5000);
    await stopped;
    expect(jest.getTimerCount()).toBe(0);
  });

  it('stop() with no run pending resolves without advancing any timer', async () => {
    const { scheduler, log } = startScheduler({ every: 10 });
    jest.advanceTimersByTime(10);
    await scheduler.stop();
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(100);
    expect(log.of('started')).toHaveLength(1);
  });
});
