// Cron jobs (docs/calendar.md) on Jest's fake timers with jest.setSystemTime: the pattern features,
// daylight saving time in several zones, clocks set forward and back, manual mode, jitter, and invalid input.
// One test runs on real timers.
import { afterEach, describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import { cachedCalendars, processTimeZone } from '../../lib/scheduler/schedule.js';
import { PeriodicConfigError } from '../../lib/scheduler/errors.js';
import type { PeriodicSchedulerOptions } from '../../lib/scheduler/options.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { flush, useDatedJobs } from './helpers.js';

const HOUR = 3_600_000;
const schedulers: PeriodicScheduler[] = [];

afterEach(async () => {
  await Promise.all(schedulers.splice(0).map((scheduler) => scheduler.stop()));
  jest.restoreAllMocks();
  jest.useRealTimers();
});

/** A cron job started on fake timers at `start`, recording the slots of its runs as ISO strings. */
const cronJob = useDatedJobs();

/** The first slot a cron job started at `start` aims at, from its `nextTick` event. */
function firstSlot(start: string, cron: string, timezone = 'UTC'): string {
  const { log } = cronJob(start, { cron, timezone });
  return new Date(log.of('nextTick')[0].at!).toISOString();
}

describe('pattern features', () => {
  it('5 fields: runs at the wall-clock times the pattern names, never before', () => {
    const { slots, contexts, log } = cronJob('2026-01-01T00:00:00Z', { cron: '0 3 * * *', timezone: 'UTC' });
    expect(log.of('nextTick')[0]).toEqual({
      type: 'nextTick',
      name: 'job',
      in: 3 * HOUR,
      at: Date.parse('2026-01-01T03:00:00Z'),
    });
    jest.advanceTimersByTime(3 * HOUR - 1);
    expect(slots).toEqual([]);
    jest.advanceTimersByTime(1);
    jest.advanceTimersByTime(2 * 24 * HOUR);
    expect(slots).toEqual([
      '2026-01-01T03:00:00.000Z',
      '2026-01-02T03:00:00.000Z',
      '2026-01-03T03:00:00.000Z',
    ]);
    for (const context of contexts) expect(context.startedAt).toBeGreaterThanOrEqual(context.scheduledAt);
  });

  it('6 fields, seconds first, with a step', () => {
    const { slots } = cronJob('2026-01-01T00:00:00Z', { cron: '*/10 * * * * *', timezone: 'UTC' });
    jest.advanceTimersByTime(35_000);
    expect(slots).toEqual([
      '2026-01-01T00:00:10.000Z',
      '2026-01-01T00:00:20.000Z',
      '2026-01-01T00:00:30.000Z',
    ]);
  });

  it('ranges and lists', () => {
    const { slots } = cronJob('2026-01-01T00:00:00Z', { cron: '0 9-10,17 * * *', timezone: 'UTC' });
    jest.advanceTimersByTime(24 * HOUR);
    expect(slots).toEqual([
      '2026-01-01T09:00:00.000Z',
      '2026-01-01T10:00:00.000Z',
      '2026-01-01T17:00:00.000Z',
    ]);
  });

  it.each([
    ['names of days and months', '0 9 * JAN MON', '2026-01-01T00:00:00Z', '2026-01-05T09:00:00.000Z'],
    ['L: the last day of the month', '0 0 L * *', '2026-02-01T00:00:00Z', '2026-02-28T00:00:00.000Z'],
    [
      'W: the weekday nearest the 15th (a Sunday)',
      '0 0 15W * *',
      '2026-03-01T00:00:00Z',
      '2026-03-16T00:00:00.000Z',
    ],
    ['#: the second Monday', '0 9 * * MON#2', '2026-04-01T00:00:00Z', '2026-04-13T09:00:00.000Z'],
    ['@yearly', '@yearly', '2026-03-01T00:00:00Z', '2027-01-01T00:00:00.000Z'],
    ['@monthly', '@monthly', '2026-03-05T00:00:00Z', '2026-04-01T00:00:00.000Z'],
    ['@weekly (Sundays)', '@weekly', '2026-03-04T00:00:00Z', '2026-03-08T00:00:00.000Z'],
    ['@daily', '@daily', '2026-03-04T10:00:00Z', '2026-03-05T00:00:00.000Z'],
    ['@hourly', '@hourly', '2026-03-04T10:20:00Z', '2026-03-04T11:00:00.000Z'],
  ])('%s: %s', (_, cron, start, expected) => {
    expect(firstSlot(start, cron)).toBe(expected);
  });

  it('the zone the pattern is read in: Europe/Berlin, and the process zone by default', () => {
    expect(firstSlot('2026-01-01T00:00:00Z', '0 3 * * *', 'Europe/Berlin')).toBe('2026-01-01T02:00:00.000Z');
    const { scheduler } = cronJob('2026-01-01T00:00:00Z', { cron: '0 3 * * *' });
    expect(scheduler.options.timezone).toBe(Intl.DateTimeFormat().resolvedOptions().timeZone);
  });

  it('the process zone is read once, and again when TZ changes (how a process changes its zone)', () => {
    const before = process.env.TZ;
    const read = jest.spyOn(Intl, 'DateTimeFormat');
    try {
      process.env.TZ = 'Etc/GMT';
      const zone = processTimeZone();
      expect(processTimeZone()).toBe(zone);
      expect(read).toHaveBeenCalledTimes(1);
      process.env.TZ = 'UTC';
      processTimeZone();
      expect(read).toHaveBeenCalledTimes(2);
    } finally {
      read.mockRestore();
      if (before === undefined) delete process.env.TZ;
      else process.env.TZ = before;
    }
  });
});

/** Slots as local wall times in `zone`, e.g. '03-29 03:00'. */
function local(slots: string[], zone: string): string[] {
  const format = new Intl.DateTimeFormat('en-CA', {
    timeZone: zone,
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  });
  return slots.map((slot) => format.format(new Date(slot)).replace(',', ''));
}

describe('daylight saving time: 48 hours around each change', () => {
  // [zone, the change, start of the 48 real hours (UTC), a fixed time in the gap or the repeated hour, its runs
  // as local times, a fixed time outside the change]
  it.each([
    [
      'Europe/Berlin',
      'spring forward',
      '2026-03-28T00:00:00Z',
      '30 2 * * *',
      ['03-28 02:30', '03-29 03:00'],
      '0 4 * * *',
    ],
    [
      'Europe/Berlin',
      'fall back',
      '2026-10-24T00:00:00Z',
      '30 2 * * *',
      ['10-24 02:30', '10-25 02:30'],
      '0 4 * * *',
    ],
    [
      'America/New_York',
      'spring forward',
      '2026-03-07T06:00:00Z',
      '30 2 * * *',
      ['03-07 02:30', '03-08 03:00'],
      '0 4 * * *',
    ],
    [
      'America/New_York',
      'fall back',
      '2026-10-31T04:00:00Z',
      '30 1 * * *',
      ['10-31 01:30', '11-01 01:30'],
      '0 4 * * *',
    ],
    // A 30-minute shift: 02:00 becomes 02:30 in October, 02:00 becomes 01:30 in April.
    [
      'Australia/Lord_Howe',
      'spring forward',
      '2026-10-02T14:00:00Z',
      '15 2 * * *',
      ['10-03 02:15', '10-04 02:30'],
      '0 4 * * *',
    ],
    [
      'Australia/Lord_Howe',
      'fall back',
      '2026-04-03T14:00:00Z',
      '45 1 * * *',
      ['04-04 01:45', '04-05 01:45'],
      '0 4 * * *',
    ],
    // The change at midnight: 00:00 becomes 01:00 on 6 September, 00:00 becomes 23:00 the evening before on 5 April.
    [
      'America/Santiago',
      'spring forward',
      '2026-09-05T05:00:00Z',
      '30 0 * * *',
      ['09-06 01:00', '09-07 00:30'],
      '0 4 * * *',
    ],
    [
      'America/Santiago',
      'fall back',
      '2026-04-04T12:00:00Z',
      '30 23 * * *',
      ['04-04 23:30', '04-05 23:30'],
      '0 4 * * *',
    ],
  ])('%s, %s', (zone, _, start, inChange, expected, outside) => {
    const end = Date.parse(start) + 48 * HOUR;
    const run = (cron: string) => {
      const { slots } = cronJob(start, { cron, timezone: zone });
      jest.advanceTimersByTime(48 * HOUR);
      return slots;
    };
    // A fixed time that does not exist runs once, at the first instant after the gap; one that occurs twice
    // runs once, at its first occurrence.
    const fixed = run(inChange);
    expect(local(fixed, zone)).toEqual(expected);
    // A fixed time outside the change runs once a day, at that time.
    const daily = run(outside);
    expect(daily).toHaveLength(2);
    expect(local(daily, zone).map((slot) => slot.slice(6))).toEqual(['04:00', '04:00']);
    // A pattern every 15 minutes ticks on real time through the change: no slot doubled, none skipped.
    const quarters = run('*/15 * * * *').map((slot) => Date.parse(slot));
    expect(quarters[0] - Date.parse(start)).toBeLessThanOrEqual(15 * 60_000);
    for (let i = 1; i < quarters.length; i++) expect(quarters[i] - quarters[i - 1]).toBe(15 * 60_000);
    expect(end - quarters[quarters.length - 1]).toBeLessThan(15 * 60_000);
  });
});

describe('daylight saving time: lists and ranges of fixed times', () => {
  // Each wall time of the list is a fixed time: once at the first instant after a gap, once on a repeated hour.
  it.each([
    ['0,30 2 * * *', '2026-03-28T12:00:00Z', ['03-29 03:00', '03-30 02:00']],
    ['0 2,5 * * *', '2026-03-28T12:00:00Z', ['03-29 03:00', '03-29 05:00', '03-30 02:00']],
    ['0 2,5 * * *', '2026-10-24T12:00:00Z', ['10-25 02:00', '10-25 05:00']],
    ['0 1-3 * * *', '2026-10-24T12:00:00Z', ['10-25 01:00', '10-25 02:00', '10-25 03:00', '10-26 01:00']],
  ])('%s from %s', (cron, start, expected) => {
    const { slots } = cronJob(start, { cron, timezone: 'Europe/Berlin' });
    jest.advanceTimersByTime(36 * HOUR);
    expect(local(slots, 'Europe/Berlin')).toEqual(expected);
  });

  it('a step in the hour is an interval: */30 2 * * * ticks through both 02:00 hours on real time', () => {
    const { slots } = cronJob('2026-10-24T12:00:00Z', { cron: '*/30 2 * * *', timezone: 'Europe/Berlin' });
    jest.advanceTimersByTime(24 * HOUR);
    expect(slots.map((slot) => slot.slice(11, 16))).toEqual(['00:00', '00:30', '01:00', '01:30']);
  });
});

describe('clocks that jump', () => {
  it('a clock set forward across 3 slots: one run for the latest, missed counts the 2 dropped, then the pattern', () => {
    const { slots, log } = cronJob('2026-01-01T00:00:00Z', { cron: '0 * * * *', timezone: 'UTC' });
    jest.setSystemTime(new Date('2026-01-01T03:30:00Z'));
    jest.advanceTimersByTime(10_000);
    expect(slots).toEqual(['2026-01-01T03:00:00.000Z']);
    expect(log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 2 }]);
    jest.advanceTimersByTime(HOUR);
    expect(slots).toEqual(['2026-01-01T03:00:00.000Z', '2026-01-01T04:00:00.000Z']);
    expect(log.of('missed')).toHaveLength(1);
  });

  it('a clock set back an hour: no slot that ran runs again', () => {
    const { slots } = cronJob('2026-01-01T00:00:00Z', { cron: '0 * * * *', timezone: 'UTC' });
    jest.advanceTimersByTime(HOUR + 10 * 60_000);
    expect(slots).toEqual(['2026-01-01T01:00:00.000Z']);
    jest.setSystemTime(new Date('2026-01-01T00:10:00Z'));
    jest.advanceTimersByTime(2 * HOUR);
    expect(slots).toEqual(['2026-01-01T01:00:00.000Z', '2026-01-01T02:00:00.000Z']);
  });

  it('a machine that slept a year with an every-second pattern: one run, a lower bound of missed, no hang', () => {
    const { slots, log } = cronJob('2026-01-01T00:00:00Z', { cron: '* * * * * *', timezone: 'UTC' });
    jest.setSystemTime(new Date('2027-01-01T00:00:00.500Z'));
    jest.advanceTimersByTime(0);
    expect(slots).toEqual(['2027-01-01T00:00:00.000Z']);
    expect(log.of('missed')).toHaveLength(1);
    expect(log.of('missed')[0].count).toBeGreaterThan(1000);
    jest.advanceTimersByTime(1000);
    expect(slots).toEqual(['2027-01-01T00:00:00.000Z', '2027-01-01T00:00:01.000Z']);
  });
});

describe("Jest's timer helpers: one timer per job, aimed at its slot", () => {
  it('runOnlyPendingTimers runs an hourly job whose slot is a minute away', () => {
    const { slots } = cronJob('2026-01-01T10:59:00Z', { cron: '0 * * * *', timezone: 'UTC' });
    jest.runOnlyPendingTimers();
    expect(slots).toEqual(['2026-01-01T11:00:00.000Z']);
  });

  it('advanceTimersToNextTimer reaches the next slot, one job at a time', () => {
    const hourly = cronJob('2026-01-01T10:59:00Z', { cron: '0 * * * *', timezone: 'UTC' });
    jest.advanceTimersToNextTimer();
    expect(hourly.slots).toEqual(['2026-01-01T11:00:00.000Z']);
    jest.advanceTimersToNextTimer();
    expect(hourly.slots).toEqual(['2026-01-01T11:00:00.000Z', '2026-01-01T12:00:00.000Z']);
  });

  it('getTimerCount counts each armed cron job once', () => {
    cronJob('2026-01-01T10:59:00Z', { cron: '0 * * * *', timezone: 'UTC' });
    const daily = new PeriodicScheduler({
      name: 'daily',
      cron: '0 3 * * *',
      timezone: 'UTC',
      run: () => undefined,
    });
    daily.start();
    schedulers.push(daily);
    expect(jest.getTimerCount()).toBe(2);
  });

  it('jest.setSystemTime then advanceTimersByTime runs the slots that fall in between, once each', () => {
    const { slots, log } = cronJob('2026-01-01T00:00:00Z', { cron: '0 3 * * *', timezone: 'UTC' });
    jest.setSystemTime(new Date('2026-01-01T02:59:59Z'));
    jest.advanceTimersByTime(999);
    expect(slots).toEqual([]);
    jest.advanceTimersByTime(1);
    expect(slots).toEqual(['2026-01-01T03:00:00.000Z']);
    jest.advanceTimersByTime(24 * HOUR);
    expect(slots).toEqual(['2026-01-01T03:00:00.000Z', '2026-01-02T03:00:00.000Z']);
    expect(log.of('missed')).toEqual([]);
  });

  it('a clock set forward past a slot: the run comes with the next advance, not ten seconds later', () => {
    const { slots, log } = cronJob('2026-01-01T00:00:00Z', { cron: '0 * * * *', timezone: 'UTC' });
    jest.setSystemTime(new Date('2026-01-01T02:00:30Z'));
    jest.advanceTimersByTime(0);
    expect(slots).toEqual(['2026-01-01T02:00:00.000Z']);
    expect(log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 1 }]);
  });
});

describe('calendars are freed with their last job', () => {
  it('600 jobs of distinct patterns, started and stopped, leave no parsed pattern behind', async () => {
    jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
    const before = cachedCalendars();
    const jobs = Array.from({ length: 600 }, (_, i) => {
      const job = new PeriodicScheduler({
        name: `job${i}`,
        cron: `${i % 60} ${Math.floor(i / 60)} * * *`,
        timezone: 'UTC',
        run: () => undefined,
      });
      job.start();
      return job;
    });
    expect(cachedCalendars()).toBe(before + 600);
    await Promise.all(jobs.map((job) => job.stop()));
    expect(cachedCalendars()).toBe(before);
  });

  it('jobs of one pattern share its calendar until the last of them stops', async () => {
    jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
    const before = cachedCalendars();
    const make = (name: string) =>
      new PeriodicScheduler({ name, cron: '7 7 7 7 *', timezone: 'UTC', run: () => undefined });
    const [a, b] = [make('a'), make('b')];
    a.start();
    b.start();
    expect(cachedCalendars()).toBe(before + 1);
    await a.stop();
    expect(cachedCalendars()).toBe(before + 1);
    await b.stop();
    expect(cachedCalendars()).toBe(before);
  });

  it('a job refused after its pattern was parsed keeps nothing of it', () => {
    const before = cachedCalendars();
    expect(
      () => new PeriodicScheduler({ name: 'j', cron: '8 8 8 8 *', jitter: 10 ** 12, run: () => undefined }),
    ).toThrow(PeriodicConfigError);
    expect(cachedCalendars()).toBe(before);
  });
});

describe('manual mode', () => {
  it('tick and syncTick run at once; nextTick carries the next slot', async () => {
    const { scheduler, slots, log } = cronJob('2026-01-01T10:20:00Z', {
      cron: '0 3 * * *',
      timezone: 'UTC',
      mode: 'manual',
    });
    expect(log.of('nextTick')).toEqual([
      { type: 'nextTick', name: 'job', in: 16 * HOUR + 40 * 60_000, at: Date.parse('2026-01-02T03:00:00Z') },
    ]);
    expect(await scheduler.syncTick()).toMatchObject({ ok: true, reason: 'normal' });
    expect(slots).toEqual(['2026-01-01T10:20:00.000Z']);
    jest.advanceTimersByTime(48 * HOUR);
    expect(slots).toHaveLength(1);
  });
});

describe('jitter', () => {
  it('delays the start of each run by less than jitter, never the slot', () => {
    const { contexts } = cronJob('2026-01-01T00:00:00Z', { every: 10_000, jitter: 4000 });
    jest.spyOn(Math, 'random').mockReturnValue(0.75);
    jest.advanceTimersByTime(10_000 + 2999);
    expect(contexts).toEqual([]);
    jest.advanceTimersByTime(1);
    jest.advanceTimersByTime(10_000);
    expect(contexts.map((context) => context.startedAt - context.scheduledAt)).toEqual([3000, 3000]);
    expect(contexts.map((context) => context.scheduledDate.toISOString())).toEqual([
      '2026-01-01T00:00:10.000Z',
      '2026-01-01T00:00:20.000Z',
    ]);
  });

  it('spreads the starts of cron runs over [0, jitter)', () => {
    const { contexts } = cronJob('2026-01-01T00:00:00Z', {
      cron: '* * * * *',
      timezone: 'UTC',
      jitter: 30_000,
    });
    jest.advanceTimersByTime(60 * 60_000);
    const delays = contexts.map((context) => context.startedAt - context.scheduledAt);
    expect(delays).toHaveLength(59);
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...delays)).toBeLessThan(30_000);
    expect(new Set(delays.map((delay) => Math.floor(delay / 10_000))).size).toBe(3);
  });

  it('after a clock set forward, the run of the latest slot waits its jitter from that slot, not from the wake-up', () => {
    const { contexts, log } = cronJob('2026-01-01T00:00:00Z', {
      cron: '0 * * * *',
      timezone: 'UTC',
      jitter: 50 * 60_000,
    });
    jest.spyOn(Math, 'random').mockReturnValue(0.999);
    jest.setSystemTime(new Date('2026-01-01T05:30:00Z'));
    jest.advanceTimersByTime(20 * 60_000);
    expect(log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 4 }]);
    expect(contexts.map((context) => context.scheduledDate.toISOString())).toEqual([
      '2026-01-01T05:00:00.000Z',
    ]);
    // 05:00 + 0.999 × 50 min, on the wall clock.
    expect(new Date(Date.now() - (performance.now() - contexts[0].startedAt)).toISOString()).toBe(
      '2026-01-01T05:49:57.000Z',
    );
  });

  it('a daily pattern in a zone with DST: a jitter over 23 hours is refused whatever the day', () => {
    for (const day of ['2026-11-30T00:00:00Z', '2026-03-27T00:00:00Z']) {
      jest.useFakeTimers({ now: new Date(day) });
      const options = { name: 'job', cron: '0 4 * * *', timezone: 'Europe/Berlin', run: () => undefined };
      expect(() => new PeriodicScheduler({ ...options, jitter: 23.5 * HOUR })).toThrow(
        '"jitter" must be shorter than the shortest gap between the slots of "cron" (82800000ms), got 84600000',
      );
      expect(() => new PeriodicScheduler({ ...options, jitter: 22 * HOUR })).not.toThrow();
    }
  });

  it('a stop during the jitter wait starts nothing; manual ticks ignore jitter', async () => {
    const { scheduler, contexts } = cronJob('2026-01-01T00:00:00Z', { every: 10_000, jitter: 5000 });
    jest.spyOn(Math, 'random').mockReturnValue(0.5);
    jest.advanceTimersByTime(11_000);
    await scheduler.stop();
    jest.advanceTimersByTime(10_000);
    expect(contexts).toEqual([]);
    const manual = cronJob('2026-01-01T00:00:00Z', { every: 10_000, jitter: 5000, mode: 'manual' });
    await manual.scheduler.tick();
    expect(manual.contexts).toHaveLength(1);
  });

  it('an exclusive cron job: the holder runs it, on the pattern', async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const { slots, log } = cronJob('2026-01-01T00:00:00Z', {
      cron: '*/10 * * * * *',
      timezone: 'UTC',
      jitter: 2000,
      exclusive: true,
      coordinator,
    });
    await flush();
    await jest.advanceTimersByTimeAsync(30_000);
    expect(log.of('leaseAcquired')).toHaveLength(1);
    expect(slots).toEqual(
      ['2026-01-01T00:00:10.000Z', '2026-01-01T00:00:20.000Z', '2026-01-01T00:00:30.000Z'].slice(
        0,
        slots.length,
      ),
    );
    expect(slots.length).toBeGreaterThanOrEqual(2);
    expect(await coordinator.readSchedule('job')).toMatchObject({ grid: 'cron */10 * * * * * UTC' });
  });
});

describe('real timers', () => {
  it('an every-second pattern for 5 s: 5 runs, give or take one at the ends, none before its second', async () => {
    const runs: { slot: number; at: number }[] = [];
    const scheduler = new PeriodicScheduler({
      name: 'seconds',
      cron: '* * * * * *',
      run: (context) => void runs.push({ slot: context.scheduledDate.getTime(), at: Date.now() }),
    });
    schedulers.push(scheduler);
    scheduler.start();
    await new Promise((resolve) => setTimeout(resolve, 5000));
    await scheduler.stop();
    expect(runs.length).toBeGreaterThanOrEqual(4);
    expect(runs.length).toBeLessThanOrEqual(6);
    for (const { slot, at } of runs) {
      expect(slot % 1000).toBe(0);
      expect(at).toBeGreaterThanOrEqual(slot);
    }
  }, 15_000);
});

describe('invalid input: a PeriodicConfigError naming the job, the option, the value and the fix', () => {
  it.each<[string, Record<string, unknown>, RegExp]>([
    [
      'no every and no cron',
      {},
      /"every" must be an integer number of milliseconds ≥ 1, got undefined; or give "cron"/,
    ],
    [
      'every and cron',
      { every: 1000, cron: '* * * * *' },
      /give either "every" or "cron", not both; got every: 1000 and cron: "\* \* \* \* \*"/,
    ],
    ['cron not a string', { cron: 5 }, /"cron" must be a cron pattern such as '0 3 \* \* \*', got 5/],
    ['cron empty', { cron: '  ' }, /"cron" must be a cron pattern such as '0 3 \* \* \*', got " {2}"/],
    [
      'cron of one word',
      { cron: 'daily' },
      /"cron" must be a cron pattern of 5 fields, or 6 with seconds first.*got "daily": it has 1 field$/,
    ],
    [
      'cron of 4 fields',
      { cron: '* * * *' },
      /"cron" must be a cron pattern of 5 fields.*got "\* \* \* \*": it has 4 fields$/,
    ],
    [
      'cron of 7 fields',
      { cron: '0 0 0 * * * 2027' },
      /"cron" must be a cron pattern of 5 fields.*: it has 7 fields$/,
    ],
    [
      'cron of 60 kB',
      { cron: `${Array(30_000).fill('1').join(',')} * * * *` },
      /"cron" must be at most 1000 characters, got 60007: write a long list as a range or a step/,
    ],
    [
      'a minute of 61',
      { cron: '61 * * * *' },
      /"cron" must be a cron pattern.*got "61 \* \* \* \*": Invalid value for minute: 61/,
    ],
    [
      'an unknown day name',
      { cron: '0 9 * * FUNDAY' },
      /"cron" must be a cron pattern.*got "0 9 \* \* FUNDAY"/,
    ],
    ['a step of 0', { cron: '*/0 * * * *' }, /"cron" must be a cron pattern.*illegal stepping: 0/],
    [
      'a pattern that never matches',
      { cron: '0 0 30 2 *' },
      /"cron" never matches: no instant fits "0 0 30 2 \*"/,
    ],
    [
      'an unknown zone',
      { cron: '0 3 * * *', timezone: 'Mars/Base' },
      /"timezone" must be an IANA time zone name such as 'Europe\/Berlin' or 'UTC', got "Mars\/Base"/,
    ],
    [
      'a zone that is not a string',
      { cron: '0 3 * * *', timezone: 1 },
      /"timezone" must be an IANA time zone name.*got 1/,
    ],
    [
      'timezone without cron',
      { every: 1000, timezone: 'UTC' },
      /"timezone" applies to cron and "at" jobs only, got "UTC" with "every"; remove it/,
    ],
    [
      'initialDelay with cron',
      { cron: '* * * * *', initialDelay: 5 },
      /"initialDelay" applies to "every" jobs only, got 5 with "cron"/,
    ],
    [
      'delayMode with cron',
      { cron: '* * * * *', delayMode: 'shifted' },
      /"delayMode" applies to "every" jobs only, got "shifted" with "cron"/,
    ],
    [
      'a negative jitter',
      { every: 1000, jitter: -1 },
      /"jitter" must be an integer number of milliseconds ≥ 0, got -1/,
    ],
    [
      'a fractional jitter',
      { every: 1000, jitter: 0.5 },
      /"jitter" must be an integer number of milliseconds ≥ 0, got 0.5/,
    ],
    [
      'a jitter of every',
      { every: 1000, jitter: 1000 },
      /"jitter" must be shorter than "every" \(1000ms\), got 1000: a run would start after the next slot/,
    ],
    [
      'a jitter over a cron gap',
      { cron: '*/10 * * * * *', jitter: 10_000 },
      /"jitter" must be shorter than the shortest gap between the slots of "cron" \(10000ms\), got 10000/,
    ],
    ['a misspelt cron', { crom: '* * * * *' }, /unknown option "crom"; did you mean "cron"\?/],
  ])('%s', (_, options, message) => {
    let error: unknown;
    try {
      new PeriodicScheduler({ name: 'job', run: () => undefined, ...options } as PeriodicSchedulerOptions);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(PeriodicConfigError);
    expect((error as Error).message).toMatch(/^job "job": /);
    expect((error as Error).message).toMatch(message);
  });
});
