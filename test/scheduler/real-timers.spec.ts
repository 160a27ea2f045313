import { AsyncLocalStorage } from 'node:async_hooks';
import { describe, expect, it } from '@jest/globals';
import type { PeriodicEvent } from '../../lib/scheduler/events.js';
import type { PeriodicSchedulerOptions } from '../../lib/scheduler/options.js';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import {
  type PeriodicScheduleWrite,
  type PeriodicScheduleWritten,
} from '../../lib/scheduler/coordinator-port.js';
import { StoreLog } from '../../lib/scheduler/store-log.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { Replica } from '../../lib/scheduler/replica.js';
import { deferred, EventLog } from './helpers.js';

// Real timers. These tests assert the shape of the schedule (the grid, never early, missed slots), never how
// late a tick was: a busy machine may delay ticks or drop slots, and every assertion allows for that.

/** Starts a scheduler and resolves with its log once `done` holds for an event, then stops it. */
function runUntil(
  options: Omit<PeriodicSchedulerOptions, 'name'>,
  done: (event: PeriodicEvent, log: EventLog) => boolean,
): Promise<EventLog> {
  const log = new EventLog();
  return new Promise((resolve) => {
    const scheduler = new PeriodicScheduler({ name: 'real', ...options }, (event) => {
      log.sink(event);
      if (done(event, log)) void scheduler.stop().then(() => resolve(log));
    });
    scheduler.start();
  });
}

/** Each run's slot on the grid `first + k·every` of the first run's deadline, or NaN when it is off the grid. */
function gridSlots(started: { scheduledAt: number }[], every: number): number[] {
  return started.map(({ scheduledAt }) => {
    const k = (scheduledAt - started[0].scheduledAt) / every;
    return Math.abs(k - Math.round(k)) < 1e-6 ? Math.round(k) : NaN;
  });
}

const SECONDS = 1000;

describe('regular mode on real timers', () => {
  it(
    'ticks stay on the grid, never start early, and ticks plus missed slots account for all slots',
    async () => {
      const every = 20;
      const log = await runUntil(
        { every, run: () => undefined },
        (event, log) => event.type === 'started' && log.of('started').length === 30,
      );
      const started = log.of('started');
      const slots = gridSlots(started, every);
      expect(slots.every((slot, i) => Number.isInteger(slot) && (i === 0 || slot > slots[i - 1]))).toBe(true);
      for (const event of started) expect(event.startedAt).toBeGreaterThanOrEqual(event.scheduledAt);
      // The grid is anchored at the first run: slots missed before it (when the first tick was already
      // late, on a busy machine) lie before the anchor and are not counted.
      const first = log.events.findIndex((event) => event.type === 'started');
      const missed = log.events
        .slice(first)
        .reduce((sum, event) => sum + (event.type === 'missed' ? event.count : 0), 0);
      expect(started.length + missed).toBe(slots.at(-1)! + 1);
    },
    20 * SECONDS,
  );

  it(
    'a blocked event loop: the late tick reports the dropped slots, runs once, and the grid continues',
    async () => {
      const every = 20;
      let calls = 0;
      const log = await runUntil(
        {
          every,
          run: () => {
            // The second run blocks the event loop for 100 ms: at least 4 slots pass.
            if (++calls === 2) for (const end = performance.now() + 100; performance.now() < end;);
          },
        },
        (event, log) => event.type === 'started' && log.of('started').length === 6,
      );
      const started = log.of('started');
      const slots = gridSlots(started, every);
      expect(slots.every((slot) => Number.isInteger(slot))).toBe(true);
      expect(slots[2] - slots[1]).toBeGreaterThanOrEqual(5);
      // The tick after the stall: missed, then nextTick, then its run (a loaded machine may add misses before).
      const late = log.events.indexOf(started[2]);
      expect(log.events.slice(late - 2, late).map((event) => event.type)).toEqual(['missed', 'nextTick']);
      expect((log.events[late - 2] as { count: number }).count).toBeGreaterThanOrEqual(4);
      for (const event of started) expect(event.startedAt).toBeGreaterThanOrEqual(event.scheduledAt);
    },
    20 * SECONDS,
  );
});

describe('shifted mode on real timers', () => {
  it(
    'the gap from the end of a run to the next tick is never below every',
    async () => {
      const every = 20;
      const log = await runUntil(
        { every, delayMode: 'shifted', run: () => new Promise((resolve) => setTimeout(resolve, 15)) },
        (event, log) => event.type === 'started' && log.of('started').length === 8,
      );
      const started = log.of('started');
      const finished = log.of('finished');
      for (let i = 1; i < started.length; i++) {
        const end = started[i - 1].startedAt + finished[i - 1].durationMs;
        expect(started[i].scheduledAt - end).toBeGreaterThanOrEqual(every);
        expect(started[i].startedAt).toBeGreaterThanOrEqual(started[i].scheduledAt);
      }
    },
    20 * SECONDS,
  );
});

describe('process lifetime', () => {
  const timers = () => process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;

  it('a ticking scheduler keeps the process alive with one timer; after stop() none of its timers remains', async () => {
    const before = timers();
    const scheduler = new PeriodicScheduler({ name: 'alive', every: 60 * SECONDS, run: () => undefined });
    scheduler.start();
    expect(timers()).toBe(before + 1);
    await scheduler.stop();
    expect(timers()).toBe(before);
  });
});

describe('the async context of ticks', () => {
  it("a job started inside an AsyncLocalStorage context passes it on to no tick, neither its own nor another job's", async () => {
    const request = new AsyncLocalStorage<string>();
    const seen: Record<string, (string | undefined)[]> = { before: [], inside: [] };
    const done = deferred();
    const job = (name: string, every: number) =>
      new PeriodicScheduler({
        name,
        every,
        run: () => {
          seen[name].push(request.getStore());
          if (seen.before.length >= 5 && seen.inside.length >= 5) done.resolve();
        },
      });
    const before = job('before', 20);
    before.start();
    // Due first, so that the process's timer is armed again inside the context. As a job added while an HTTP
    // request is handled: the request's stores must not reach scheduled runs.
    const inside = job('inside', 5);
    request.run('alice', () => inside.start());
    await done.promise;
    await Promise.all([before.stop(), inside.stop()]);
    expect(new Set([...seen.before, ...seen.inside])).toEqual(new Set([undefined]));
  });
});

describe('the store traffic of exclusive jobs on real timers', () => {
  it('the jobs of a replica whose ticks fall together claim their slots in one write', async () => {
    const writes: number[] = [];
    const store = new (class extends InMemoryCoordinator {
      override writeSchedules(
        owner: string,
        batch: PeriodicScheduleWrite[],
      ): Promise<PeriodicScheduleWritten[]> {
        writes.push(batch.length);
        return super.writeSchedules(owner, batch);
      }
    })({ leaseMs: 3000 });
    const replica = new Replica(new StoreLog(store));
    const runs = { count: 0 };
    const done = deferred();
    const jobs = Array.from(
      { length: 200 },
      (_, i) =>
        new PeriodicScheduler(
          {
            name: `job-${i}`,
            every: 100,
            exclusive: true,
            coordinator: store,
            run: () => {
              if (++runs.count === 200 * 5) done.resolve();
            },
          },
          () => undefined,
          { replica },
        ),
    );
    for (const job of jobs) job.start();
    await done.promise;
    await Promise.all(jobs.map((job) => job.stop()));
    // 1,000 claims (5 ticks of 200 jobs started together) in a few writes, not one each: a busy machine may
    // split a tick instant over several fires of the timer, so the bound is wide.
    const claims = writes.reduce((sum, count) => sum + count, 0);
    expect(claims).toBeGreaterThanOrEqual(1000);
    expect(writes.length).toBeLessThan(claims / 10);
  });
});
