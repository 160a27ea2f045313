// Schedule policies (SPEC 24, docs/policies.md) on Jest's fake timers: startAt, endAt, maxRuns and at with the
// 'completed' state; exclude by days, ranges and a function, in a zone and across daylight saving days;
// catchUp 'latest', 'all' and 'none' with and without a window, on `every` and `cron` jobs; pauseAfterFailures;
// and the checks of the options.
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import { PeriodicConfigError } from '../../lib/scheduler/errors.js';
import type { PeriodicSchedulerOptions } from '../../lib/scheduler/options.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { type Deferred, deferred, flush, useDatedJobs } from './helpers.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const schedulers: PeriodicScheduler[] = [];
afterEach(() => schedulers.splice(0).forEach((scheduler) => void scheduler.stop()));

type Options = Omit<PeriodicSchedulerOptions, 'name' | 'run'> &
  Partial<Pick<PeriodicSchedulerOptions, 'run'>>;

/** A job started on fake timers at `start`, recording the slots of its runs as ISO strings. */
const job = useDatedJobs();

/** The slot's time of day, `HH:MM`, as the ISO string says it (UTC). */
const times = (slots: string[]) => slots.map((slot) => slot.slice(0, 16));

function errorOf(options: Options): string {
  try {
    schedulers.push(new PeriodicScheduler({ name: 'job', run: () => undefined, ...options }));
  } catch (error) {
    expect(error).toBeInstanceOf(PeriodicConfigError);
    return (error as Error).message;
  }
  throw new Error('the options were accepted');
}

describe('lifetime: startAt, endAt, maxRuns, at', () => {
  it('startAt: no run before it; the grid keeps its place, and nextTickAt is the first slot at or after it', () => {
    const { scheduler, slots } = job('2027-01-01T00:00:00Z', {
      every: HOUR,
      startAt: '2027-01-01T02:30:00Z',
    });
    expect(scheduler.status().nextTickAt).toEqual(new Date('2027-01-01T03:00:00Z'));
    jest.advanceTimersByTime(5 * HOUR);
    expect(times(slots)).toEqual(['2027-01-01T03:00', '2027-01-01T04:00', '2027-01-01T05:00']);
  });

  it("endAt: no run after it; the job is then 'completed', with no next tick, and starts nothing", async () => {
    const { scheduler, slots } = job('2027-01-01T00:00:00Z', {
      cron: '0 * * * *',
      timezone: 'UTC',
      endAt: new Date('2027-01-01T02:30:00Z'),
    });
    jest.advanceTimersByTime(HOUR);
    expect(scheduler.state).toBe('ticking');
    jest.advanceTimersByTime(HOUR);
    expect(times(slots)).toEqual(['2027-01-01T01:00', '2027-01-01T02:00']);
    // No slot is left, and endAt has not passed: the job still ticks, with no next tick.
    expect(scheduler.status()).toMatchObject({ state: 'ticking', nextTickAt: null });
    jest.advanceTimersByTime(30 * MINUTE);
    expect(scheduler.state).toBe('completed');
    expect(scheduler.status()).toMatchObject({ state: 'completed', nextTickAt: null });
    expect(jest.getTimerCount()).toBe(0);
    await expect(scheduler.trigger()).resolves.toEqual({ ok: false, error: 'completed' });
    jest.advanceTimersByTime(DAY);
    expect(slots).toHaveLength(2);
  });

  it("endAt on the slot itself: the slot runs, and the job is 'completed' with it", () => {
    const { scheduler, slots } = job('2027-01-01T00:00:00Z', { every: HOUR, endAt: '2027-01-01T02:00:00Z' });
    jest.advanceTimersByTime(2 * HOUR);
    expect(times(slots)).toEqual(['2027-01-01T01:00', '2027-01-01T02:00']);
    expect(scheduler.state).toBe('completed');
  });

  it("maxRuns: after that many slots the job is 'completed'; a trigger counts no slot", async () => {
    const { scheduler, slots } = job('2027-01-01T00:00:00Z', { every: MINUTE, maxRuns: 3 });
    await scheduler.trigger();
    jest.advanceTimersByTime(2 * MINUTE);
    expect(scheduler.state).toBe('ticking');
    jest.advanceTimersByTime(MINUTE);
    expect(slots).toHaveLength(4);
    expect(scheduler.state).toBe('completed');
    jest.advanceTimersByTime(HOUR);
    expect(slots).toHaveLength(4);
  });

  it("at: one run at that instant, its slot the run's scheduledDate, then 'completed'", () => {
    const { scheduler, slots, log } = job('2027-01-01T00:00:00Z', { at: '2027-01-01T09:00:00+01:00' });
    expect(scheduler.status()).toMatchObject({
      schedule: { at: new Date('2027-01-01T08:00:00Z') },
      nextTickAt: new Date('2027-01-01T08:00:00Z'),
      state: 'ticking',
    });
    expect(log.of('nextTick')[0]).toMatchObject({ in: 8 * HOUR, at: Date.parse('2027-01-01T08:00:00Z') });
    jest.advanceTimersByTime(8 * HOUR - 1);
    expect(slots).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(slots).toEqual(['2027-01-01T08:00:00.000Z']);
    expect(scheduler.state).toBe('completed');
    jest.advanceTimersByTime(7 * DAY);
    expect(slots).toHaveLength(1);
  });

  it("at, started after its instant: 'completed' at once, without a run", () => {
    const { scheduler, slots } = job('2027-01-02T00:00:00Z', { at: '2027-01-01T09:00:00Z' });
    expect(scheduler.state).toBe('completed');
    jest.advanceTimersByTime(DAY);
    expect(slots).toEqual([]);
  });

  it('at, late (the event loop stalled): its one slot still runs', () => {
    const { slots } = job('2027-01-01T00:00:00Z', { at: '2027-01-01T01:00:00Z' });
    jest.setSystemTime(new Date('2027-01-01T05:00:00Z'));
    jest.advanceTimersByTime(10_000);
    expect(slots).toEqual(['2027-01-01T01:00:00.000Z']);
  });
});

describe.each([
  ['an every job', { every: HOUR }],
  ['a cron job', { cron: '0 * * * *', timezone: 'UTC' }],
] as const)('on %s', (_, timing) => {
  it('startAt, endAt and maxRuns bound its slots', () => {
    const { scheduler, slots } = job('2027-01-01T00:00:00Z', {
      ...timing,
      startAt: '2027-01-01T02:00:00Z',
      endAt: '2027-01-01T09:00:00Z',
      maxRuns: 4,
    });
    jest.advanceTimersByTime(12 * HOUR);
    expect(times(slots)).toEqual([
      '2027-01-01T02:00',
      '2027-01-01T03:00',
      '2027-01-01T04:00',
      '2027-01-01T05:00',
    ]);
    expect(scheduler.state).toBe('completed');
  });

  it('pauseAfterFailures pauses it after that many failed slots in a row', async () => {
    const { scheduler, slots } = job('2027-01-01T00:00:00Z', {
      ...timing,
      pauseAfterFailures: 3,
      run: () => Promise.reject(new Error('down')),
    });
    await jest.advanceTimersByTimeAsync(5 * HOUR);
    expect(slots).toHaveLength(3);
    expect(scheduler.state).toBe('paused');
  });
});

describe('exclude', () => {
  it('whole days (UTC for an every job): their slots are not ticks, not runs, not missed', () => {
    const { scheduler, slots, log } = job('2026-12-24T00:00:00Z', {
      every: 6 * HOUR,
      exclude: ['2026-12-25'],
    });
    jest.advanceTimersByTime(18 * HOUR);
    expect(scheduler.status().nextTickAt).toEqual(new Date('2026-12-26T00:00:00Z'));
    jest.advanceTimersByTime(2 * DAY);
    expect(times(slots)).toEqual([
      '2026-12-24T06:00',
      '2026-12-24T12:00',
      '2026-12-24T18:00',
      '2026-12-26T00:00',
      '2026-12-26T06:00',
      '2026-12-26T12:00',
      '2026-12-26T18:00',
    ]);
    expect(log.of('missed')).toEqual([]);
    expect(scheduler.status().counts.missed).toBe(0);
  });

  it("a range includes both its days, read in the job's zone; nextTick skips it", () => {
    const { slots, log } = job('2026-12-22T12:00:00Z', {
      cron: '0 9 * * *',
      timezone: 'America/New_York',
      exclude: [{ from: '2026-12-24', to: '2026-12-26' }, '2026-12-31'],
    });
    jest.advanceTimersByTime(10 * DAY + 3 * HOUR);
    expect(times(slots)).toEqual([
      '2026-12-22T14:00',
      '2026-12-23T14:00',
      '2026-12-27T14:00',
      '2026-12-28T14:00',
      '2026-12-29T14:00',
      '2026-12-30T14:00',
      '2027-01-01T14:00',
    ]);
    const after23 = log.of('nextTick').find((event) => event.at === Date.parse('2026-12-27T14:00:00Z'));
    expect(after23).toBeDefined();
  });

  it('a day of a daylight saving change (Berlin, 29 March 2026, 23 hours long) is left out whole', () => {
    const { slots } = job('2026-03-28T20:00:00Z', {
      cron: '30 * * * *',
      timezone: 'Europe/Berlin',
      exclude: ['2026-03-29'],
    });
    jest.advanceTimersByTime(30 * HOUR);
    // 28 March 23:30 in Berlin is 22:30Z; 30 March 00:30 (summer time) is 29 March 22:30Z.
    expect(times(slots).slice(0, 3)).toEqual(['2026-03-28T20:30', '2026-03-28T21:30', '2026-03-28T22:30']);
    expect(times(slots)[3]).toBe('2026-03-29T22:30');
    expect(slots.filter((slot) => slot >= '2026-03-28T23:00' && slot < '2026-03-29T22:00')).toEqual([]);
  });

  it('the day of the autumn change (Berlin, 25 October 2026, 25 hours long) is left out whole', () => {
    const { slots } = job('2026-10-24T20:00:00Z', {
      cron: '0 * * * *',
      timezone: 'Europe/Berlin',
      exclude: ['2026-10-25'],
    });
    jest.advanceTimersByTime(30 * HOUR);
    // 24 October 23:00 in Berlin is 21:00Z; 26 October 00:00 (winter time) is 25 October 23:00Z.
    expect(times(slots).slice(0, 2)).toEqual(['2026-10-24T21:00', '2026-10-25T23:00']);
  });

  it('a function of the slot: weekends left out; nextTickAt skips them', () => {
    const weekend = (slot: Date) => slot.getUTCDay() === 0 || slot.getUTCDay() === 6;
    const { scheduler, slots } = job('2027-01-01T00:00:00Z', {
      cron: '0 12 * * *',
      timezone: 'UTC',
      exclude: weekend,
    });
    jest.advanceTimersByTime(DAY);
    // Friday 1 January 2027 ran; the next tick is Monday.
    expect(scheduler.status().nextTickAt).toEqual(new Date('2027-01-04T12:00:00Z'));
    jest.advanceTimersByTime(7 * DAY);
    expect(times(slots)).toEqual([
      '2027-01-01T12:00',
      '2027-01-04T12:00',
      '2027-01-05T12:00',
      '2027-01-06T12:00',
      '2027-01-07T12:00',
      '2027-01-08T12:00',
    ]);
  });

  it('a function that throws: the slot starts nothing, reported as guardFailed; the job goes on', () => {
    const { slots, log } = job('2027-01-01T00:00:00Z', {
      every: MINUTE,
      exclude: (slot) => {
        if (slot.getUTCMinutes() === 2) throw new Error('calendar service down');
        return false;
      },
    });
    jest.advanceTimersByTime(4 * MINUTE);
    expect(log.of('guardFailed')).toEqual([
      { type: 'guardFailed', name: 'job', error: new Error('calendar service down') },
    ]);
    expect(times(slots)).toEqual(['2027-01-01T00:01', '2027-01-01T00:03', '2027-01-01T00:04']);
  });
});

describe('catchUp', () => {
  it("'latest' (the default): one run for the latest slot; the others counted as missed", () => {
    const { slots, log } = job('2027-01-01T00:00:00Z', { cron: '0 * * * *', timezone: 'UTC', maxRuns: 100 });
    jest.setSystemTime(new Date('2027-01-01T03:30:00Z'));
    jest.advanceTimersByTime(10_000);
    expect(times(slots)).toEqual(['2027-01-01T03:00']);
    expect(log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 2 }]);
  });

  it("'all' within its window: each slot that passed, oldest first, one at a time, each with its own slot", async () => {
    const running = [deferred(), deferred(), deferred()];
    let started = 0;
    const { slots, log } = job('2027-01-01T00:00:00Z', {
      cron: '0 * * * *',
      timezone: 'UTC',
      catchUp: { window: 6 * HOUR, runs: 'all' },
      run: () => running[started++]?.promise,
    });
    jest.setSystemTime(new Date('2027-01-01T03:30:00Z'));
    jest.advanceTimersByTime(10_000);
    expect(times(slots)).toEqual(['2027-01-01T01:00']);
    for (const [i, run] of running.entries()) {
      run.resolve();
      await flush();
      expect(slots).toHaveLength(Math.min(i + 2, 3));
    }
    expect(times(slots)).toEqual(['2027-01-01T01:00', '2027-01-01T02:00', '2027-01-01T03:00']);
    expect(log.of('missed')).toEqual([]);
    expect(log.of('finished').map((event) => event.reason)).toEqual(['normal', 'normal', 'normal']);
  });

  it("'all': slots older than the window are dropped and counted as missed", async () => {
    const { slots, log } = job('2027-01-01T00:00:00Z', {
      cron: '0 * * * *',
      timezone: 'UTC',
      catchUp: { window: 2 * HOUR, runs: 'all' },
    });
    jest.setSystemTime(new Date('2027-01-01T03:30:00Z'));
    jest.advanceTimersByTime(10_000);
    await flush();
    expect(times(slots)).toEqual(['2027-01-01T02:00', '2027-01-01T03:00']);
    expect(log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 1 }]);
    jest.advanceTimersByTime(HOUR);
    expect(times(slots)).toEqual(['2027-01-01T02:00', '2027-01-01T03:00', '2027-01-01T04:00']);
  });

  it("'all' across the spring change in Berlin: the slots that were, not an hour that never was", async () => {
    const { slots } = job('2026-03-28T23:00:00Z', {
      cron: '30 * * * *',
      timezone: 'Europe/Berlin',
      catchUp: { window: 12 * HOUR, runs: 'all' },
    });
    jest.setSystemTime(new Date('2026-03-29T03:00:00Z'));
    jest.advanceTimersByTime(10_000);
    await flush();
    // 00:30, 01:30, then 03:30 summer time (01:30Z), 04:30 (02:30Z).
    expect(times(slots)).toEqual([
      '2026-03-28T23:30',
      '2026-03-29T00:30',
      '2026-03-29T01:30',
      '2026-03-29T02:30',
    ]);
  });

  it("'all' on an every job after a stalled event loop: each slot of the grid that passed, then the grid", async () => {
    const { slots, log } = job('2027-01-01T00:00:00Z', {
      every: MINUTE,
      catchUp: { window: HOUR, runs: 'all' },
    });
    const fakeNow = performance.now.bind(performance);
    jest.advanceTimersByTime(MINUTE);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + 3.5 * MINUTE);
    jest.advanceTimersByTime(MINUTE);
    await flush();
    // The tick of 00:02 came at 00:05:30 by the monotonic clock: 00:02 to 00:05 run, oldest first.
    expect(slots).toHaveLength(5);
    expect(log.of('missed')).toEqual([]);
    const late = log.of('started').slice(1);
    expect(late.map((event) => event.scheduledAt)).toEqual(
      [...late.map((event) => event.scheduledAt)].sort(),
    );
  });

  it("'none': a late tick runs nothing and counts every slot that passed as missed; the next runs", () => {
    const { slots, log } = job('2027-01-01T00:00:00Z', {
      cron: '0 * * * *',
      timezone: 'UTC',
      catchUp: { runs: 'none' },
    });
    jest.advanceTimersByTime(HOUR);
    expect(times(slots)).toEqual(['2027-01-01T01:00']);
    jest.setSystemTime(new Date('2027-01-01T04:30:00Z'));
    jest.advanceTimersByTime(10_000);
    expect(slots).toHaveLength(1);
    expect(log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 3 }]);
    jest.advanceTimersByTime(HOUR);
    expect(times(slots)).toEqual(['2027-01-01T01:00', '2027-01-01T05:00']);
  });

  it("'latest' with a window shorter than the lateness: nothing runs, the slots are missed", () => {
    const { slots, log } = job('2027-01-01T00:00:00Z', {
      cron: '0 * * * *',
      timezone: 'UTC',
      catchUp: { window: 10 * MINUTE },
    });
    jest.setSystemTime(new Date('2027-01-01T03:30:00Z'));
    jest.advanceTimersByTime(10_000);
    expect(slots).toEqual([]);
    expect(log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 3 }]);
  });

  it("excluded slots that passed are neither run nor missed by 'all'", async () => {
    const { slots, log } = job('2026-12-24T20:00:00Z', {
      every: 2 * HOUR,
      exclude: ['2026-12-25'],
      catchUp: { window: 2 * DAY, runs: 'all' },
    });
    const fakeNow = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + 28 * HOUR);
    jest.advanceTimersByTime(2 * HOUR);
    await flush();
    // Slots from 24 Dec 22:00 to 26 Dec 02:00 passed; those of 25 Dec are not slots.
    expect(times(slots)).toEqual(['2026-12-24T22:00', '2026-12-26T00:00', '2026-12-26T02:00']);
    expect(log.of('missed')).toEqual([]);
  });
});

describe('pauseAfterFailures', () => {
  it('pauses the job once n slots in a row failed after their retries, by nestjs-periodic, saying why', async () => {
    const { scheduler, slots, log } = job('2027-01-01T00:00:00Z', {
      every: MINUTE,
      pauseAfterFailures: 2,
      retry: { attempts: 1, backoff: { initial: 1000 } },
      run: () => {
        throw new Error('down');
      },
    });
    await jest.advanceTimersByTimeAsync(MINUTE + 2000);
    expect(scheduler.state).toBe('ticking');
    await jest.advanceTimersByTimeAsync(MINUTE);
    await flush();
    expect(scheduler.state).toBe('paused');
    expect(slots).toHaveLength(4);
    const [entry] = await scheduler.audit();
    expect(entry).toMatchObject({ action: 'pause', by: 'nestjs-periodic' });
    expect(entry.note).toMatch(/^2 slots in a row failed after their retries \(pauseAfterFailures: 2\)/);
    expect(log.of('operated')).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(5 * MINUTE);
    expect(slots).toHaveLength(4);
    await scheduler.resume({ by: 'alice' });
    await jest.advanceTimersByTimeAsync(2 * MINUTE + 2000);
    await flush();
    expect(scheduler.state).toBe('paused');
    expect(slots).toHaveLength(8);
  });

  it('a success in between starts the count again', async () => {
    let call = 0;
    const { scheduler } = job('2027-01-01T00:00:00Z', {
      every: MINUTE,
      pauseAfterFailures: 2,
      run: () => {
        if (++call % 2 === 1) throw new Error('down');
      },
    });
    await jest.advanceTimersByTimeAsync(10 * MINUTE);
    expect(scheduler.state).toBe('ticking');
  });
});

describe('checks', () => {
  it('names the job, the option, the value and what is accepted', () => {
    expect(errorOf({ every: 10, startAt: 'tomorrow' })).toBe(
      'job "job": "startAt" must be a Date, or an ISO 8601 text with its offset such as ' +
        "'2027-01-01T09:00:00+01:00' or '2027-01-01T08:00:00Z', got \"tomorrow\"",
    );
    expect(errorOf({ every: 10, endAt: new Date('nope') })).toMatch(
      /"endAt" must be a Date, .* got Invalid Date/,
    );
    expect(errorOf({ every: 10, maxRuns: 0 })).toMatch(/"maxRuns" must be an integer ≥ 1 .*got 0/);
    expect(errorOf({ every: 10, pauseAfterFailures: 1.5 })).toMatch(
      /"pauseAfterFailures" must be an integer ≥ 1/,
    );
    expect(errorOf({ every: 10, catchUp: { runs: 'every' } as never })).toBe(
      'job "job": "catchUp": "runs" must be \'latest\', \'all\' or \'none\', got "every"',
    );
    expect(errorOf({ every: 10, catchUp: { window: 0 } })).toMatch(/"catchUp": "window" must be an integer/);
    expect(errorOf({ every: 10, catchUp: { windw: 5 } as never })).toMatch(
      /unknown option "windw"; did you mean "window"\?/,
    );
    expect(errorOf({ every: 10, exclude: ['2026-02-30'] })).toMatch(
      /"exclude" must be .*: entry 0 is "2026-02-30", not a day 'YYYY-MM-DD' of the calendar/,
    );
    expect(errorOf({ every: 10, exclude: [{ from: '2027-01-02', to: '2027-01-01' }] })).toMatch(
      /entry 0 ends \(2027-01-01\) before it begins \(2027-01-02\); swap them/,
    );
    expect(errorOf({ every: 10, exclude: '2026-12-25' as never })).toMatch(
      /"exclude" must be a list of at most 1000/,
    );
    expect(errorOf({ every: 10, exclude: Array(1001).fill('2026-12-25') })).toMatch(/it has 1001 entries/);
    expect(errorOf({ every: 10, startAt: '2027-02-01T00:00:00Z', endAt: '2027-01-01T00:00:00Z' })).toBe(
      'job "job": "endAt" (2027-01-01T00:00:00.000Z) must not come before "startAt" (2027-02-01T00:00:00.000Z): the ' +
        'job would never run; give a later endAt',
    );
  });

  it('refuses instants that no calendar has, contradictions that would never run, and values that throw', () => {
    expect(errorOf({ every: 10, startAt: '2027-02-30T00:00:00Z' })).toMatch(/"startAt" must be a Date/);
    expect(errorOf({ every: 10, endAt: '2027-01-01T24:00:00Z' })).toMatch(/"endAt" must be a Date/);
    expect(errorOf({ at: '2027-01-01T09:00:00Z', timezone: 'Mars/Base' })).toMatch(
      /"timezone" must be an IANA time zone name .* got "Mars\/Base"/,
    );
    expect(errorOf({ at: '2027-01-01T09:00:00Z', startAt: '2027-02-01T00:00:00Z' })).toMatch(
      /"at" \(2027-01-01T09:00:00.000Z\) is before "startAt": the job would never run/,
    );
    expect(errorOf({ at: '2027-01-01T09:00:00Z', exclude: ['2027-01-01'] })).toMatch(
      /"at" \(2027-01-01T09:00:00.000Z\) falls on a day "exclude" leaves out/,
    );
    expect(errorOf({ every: 10, exclude: (async () => false) as never })).toMatch(
      /"exclude" must be .* got a function: an async function: it must answer at once/,
    );
    const throwing = {
      get from(): string {
        throw new Error('no');
      },
      to: '2027-01-01',
    };
    expect(errorOf({ every: 10, exclude: [throwing] })).toMatch(/reading option "exclude" threw: no/);
    const hostile = new Proxy(
      {},
      {
        ownKeys() {
          throw new Error('no keys');
        },
      },
    );
    expect(errorOf({ every: 10, catchUp: hostile })).toMatch(
      /"catchUp": reading the options' names threw: no keys/,
    );
  });

  it('an exclude function that answers with a promise: the slot starts nothing, reported as guardFailed', () => {
    const { slots, log } = job('2027-01-01T00:00:00Z', {
      every: MINUTE,
      exclude: (() => Promise.resolve(false)) as unknown as (slot: Date) => boolean,
    });
    jest.advanceTimersByTime(MINUTE);
    expect(slots).toEqual([]);
    expect(log.of('guardFailed')[0].error).toEqual(
      new PeriodicConfigError(
        '"exclude" returned a promise: it must answer at once, true or false (look the days up beforehand)',
      ),
    );
  });

  it('at takes no every, cron or catchUp', () => {
    for (const extra of [{ every: 10 }, { cron: '* * * * *' }, { catchUp: { runs: 'all' as const } }]) {
      const [key] = Object.keys(extra);
      expect(errorOf({ at: '2027-01-01T00:00:00Z', ...extra })).toMatch(
        new RegExp(`^job "job": "at" runs one slot and takes no "${key}"`),
      );
    }
    expect(errorOf({ at: '2027-01-01T00:00:00' })).toMatch(
      /"at" must be a Date, or an ISO 8601 text with its offset/,
    );
  });

  it('a job with neither every, cron nor at says all three', () => {
    expect(errorOf({})).toMatch(
      /or give "cron", a pattern such as '0 3 \* \* \*', or "at", an instant for one run/,
    );
  });
});

describe('backfill', () => {
  it('runs each slot of the grid in [from, to), oldest first, one at a time, as backfill runs, audited', async () => {
    const running: Deferred<void>[] = [];
    const { scheduler, slots, log } = job('2027-01-01T12:00:00Z', {
      every: HOUR,
      run: (ctx) => {
        if (ctx.scheduledDate.getTime() >= Date.parse('2027-01-01T12:00:00Z')) return undefined;
        const run = deferred();
        running.push(run);
        return run.promise;
      },
    });
    await expect(
      scheduler.backfill({
        from: '2027-01-01T08:30:00Z',
        to: new Date('2027-01-01T12:00:00Z'),
        by: 'alice',
        note: 'outage',
      }),
    ).resolves.toEqual({ slots: 3 });
    await flush();
    expect(times(slots)).toEqual(['2027-01-01T09:00']);
    expect(scheduler.backfillState).toEqual({
      next: Date.parse('2027-01-01T09:00:00.001Z'),
      to: Date.parse('2027-01-01T12:00:00Z'),
      left: 2,
    });
    running[0].resolve();
    await flush();
    expect(times(slots)).toEqual(['2027-01-01T09:00', '2027-01-01T10:00']);
    running[1].resolve();
    await flush();
    running[2].resolve();
    await flush();
    expect(times(slots)).toEqual(['2027-01-01T09:00', '2027-01-01T10:00', '2027-01-01T11:00']);
    expect(scheduler.backfillState).toBeUndefined();
    const history = await scheduler.history();
    expect(history.map((run) => [run.origin, run.slot?.toISOString().slice(11, 16)])).toEqual([
      ['backfill', '11:00'],
      ['backfill', '10:00'],
      ['backfill', '09:00'],
    ]);
    expect(await scheduler.audit()).toEqual([
      expect.objectContaining({ action: 'backfill', by: 'alice', note: 'outage' }),
    ]);
    expect(log.of('operated')).toEqual([expect.objectContaining({ action: 'backfill', by: 'alice' })]);
    // The grid goes on as before.
    await jest.advanceTimersByTimeAsync(HOUR);
    expect(times(slots).at(-1)).toBe('2027-01-01T13:00');
  });

  it("leaves out what the job's policies leave out, and waits for a pause to end", async () => {
    const { scheduler, slots } = job('2027-01-10T12:00:00Z', {
      cron: '0 6 * * *',
      timezone: 'UTC',
      exclude: ['2027-01-05', { from: '2027-01-07', to: '2027-01-08' }],
    });
    await scheduler.pause();
    await expect(scheduler.backfill({ from: '2027-01-01', to: '2027-01-10' })).resolves.toEqual({ slots: 6 });
    await flush();
    expect(slots).toEqual([]);
    await scheduler.resume();
    await flush();
    expect(slots.map((slot) => slot.slice(0, 10))).toEqual([
      '2027-01-01',
      '2027-01-02',
      '2027-01-03',
      '2027-01-04',
      '2027-01-06',
      '2027-01-09',
    ]);
  });

  it('cancelBackfill drops the slots not started, says how many, and is audited; with none under way, 0', async () => {
    const first = deferred();
    const { scheduler, slots } = job('2027-01-01T12:00:00Z', { every: MINUTE, run: () => first.promise });
    expect(await scheduler.cancelBackfill()).toBe(0);
    await scheduler.backfill({ from: '2027-01-01T11:00:00Z', to: '2027-01-01T12:00:00Z' });
    await flush();
    expect(slots).toHaveLength(1);
    expect(await scheduler.cancelBackfill({ by: 'bob' })).toBe(59);
    first.resolve();
    await flush();
    expect(slots).toHaveLength(1);
    expect((await scheduler.audit()).map((entry) => [entry.action, entry.by])).toEqual([
      ['cancelBackfill', 'bob'],
      ['backfill', null],
    ]);
  });

  it('refuses a range in the future, empty, too long, or while another is under way, saying why', async () => {
    const { scheduler } = job('2027-01-01T12:00:00Z', {
      every: 1000,
      jobShutdown: 'brutalKill',
      run: () => new Promise(() => undefined),
    });
    await expect(
      scheduler.backfill({ from: '2027-01-01T11:00:00Z', to: '2027-01-01T13:00:00Z' }),
    ).rejects.toThrow(
      /^backfill\(\) of job "job": "to" must not be in the future, got "2027-01-01T13:00:00Z"/,
    );
    await expect(
      scheduler.backfill({ from: '2027-01-01T11:00:00Z', to: '2027-01-01T11:00:00Z' }),
    ).rejects.toThrow('"to" (2027-01-01T11:00:00.000Z) must come after "from" (2027-01-01T11:00:00.000Z)');
    await expect(
      scheduler.backfill({ from: '2027-01-01T08:00:00Z', to: '2027-01-01T11:00:00Z' }),
    ).rejects.toThrow(
      'backfill() of job "job": the range [2027-01-01T08:00:00.000Z, 2027-01-01T11:00:00.000Z) has more than 10000 ' +
        "slots of the job's schedule; backfill it in parts",
    );
    await expect(
      scheduler.backfill({ from: 'yesterday', to: '2027-01-01T11:00:00Z' } as never),
    ).rejects.toThrow(PeriodicConfigError);
    await expect(scheduler.backfill({ to: '2027-01-01T11:00:00Z' } as never)).rejects.toThrow(
      /"from" must be/,
    );
    await scheduler.backfill({ from: '2027-01-01T11:00:00Z', to: '2027-01-01T11:01:00Z' });
    await expect(
      scheduler.backfill({ from: '2027-01-01T10:00:00Z', to: '2027-01-01T10:01:00Z' }),
    ).rejects.toThrow(
      'backfill() of job "job": a backfill is under way; wait for it to end, or cancel it first (cancelBackfill)',
    );
  });

  it('asks an exclude function for each slot, and refuses a range of more than 100,000 slots of the grid', async () => {
    const { scheduler, slots } = job('2027-01-02T00:00:00Z', {
      cron: '* * * * * *',
      timezone: 'UTC',
      exclude: (slot) => slot.getUTCSeconds() % 2 === 0 || slot.getUTCHours() === 5,
    });
    await expect(
      scheduler.backfill({ from: '2027-01-01T05:00:00Z', to: '2027-01-01T06:00:00Z' }),
    ).resolves.toEqual({ slots: 0 });
    await expect(
      scheduler.backfill({ from: '2027-01-01T04:00:00Z', to: '2027-01-01T04:00:20Z' }),
    ).resolves.toEqual({ slots: 10 });
    await flush();
    await jest.advanceTimersByTimeAsync(0);
    expect(slots.filter((slot) => slot < '2027-01-02')).toHaveLength(10);
    expect(slots.every((slot) => Number(slot.slice(17, 19)) % 2 === 1)).toBe(true);
    // Only the first minute of each hour: 2,880 slots in two days, among 172,800 of the grid.
    const hourly = job('2027-01-02T00:00:00Z', {
      cron: '* * * * * *',
      timezone: 'UTC',
      exclude: (slot) => slot.getUTCMinutes() !== 0,
    });
    await expect(
      hourly.scheduler.backfill({ from: '2026-12-30T00:00:00Z', to: '2027-01-01T00:00:00Z' }),
    ).rejects.toThrow(
      'backfill() of job "job": the range [2026-12-30T00:00:00.000Z, 2027-01-01T00:00:00.000Z) spans more than ' +
        "100000 slots of the job's grid, those its policies leave out included; backfill a shorter range",
    );
  });

  it('a backfill run in shifted mode does not move the next tick', async () => {
    const { scheduler, slots } = job('2027-01-01T12:00:00Z', { every: HOUR, delayMode: 'shifted' });
    await scheduler.backfill({ from: '2027-01-01T11:00:00Z', to: '2027-01-01T12:00:00Z' });
    await flush();
    expect(slots).toHaveLength(1);
    expect(scheduler.status().nextTickAt).toEqual(new Date('2027-01-01T13:00:00Z'));
  });
});

describe('at, on an exclusive job', () => {
  it('a slot that passed before the fleet started runs once, late; a replica started after it ran completes', async () => {
    const store = new InMemoryCoordinator({ leaseMs: 1000 });
    const at = new Date('2027-01-01T09:00:00Z');
    const first = job('2027-01-01T09:30:00Z', { at, exclusive: true, coordinator: store });
    await jest.advanceTimersByTimeAsync(2000);
    expect(first.slots).toEqual(['2027-01-01T09:00:00.000Z']);
    expect(first.scheduler.state).toBe('completed');
    await first.scheduler.stop();
    const again = new PeriodicScheduler({
      name: 'job',
      at,
      exclusive: true,
      coordinator: store,
      run: () => {
        throw new Error('the slot ran twice');
      },
    });
    again.start();
    await jest.advanceTimersByTimeAsync(5000);
    expect(again.state).toBe('completed');
    expect(again.status().counts.started).toBe(0);
    await again.stop();
  });
});
