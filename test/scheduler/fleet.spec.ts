// One schedule for the whole fleet (docs/replicas.md): replicas of an exclusive job share
// one InMemoryCoordinator on Jest's fake timers, each through a link that can be cut, as a replica that dies
// without releasing its lease would be. The slots they run are checked against the grid of the first holder.
import { describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import {
  type PeriodicCoordinator,
  type PeriodicFleetSchedule,
} from '../../lib/scheduler/coordinator-port.js';
import { StoreLog } from '../../lib/scheduler/store-log.js';
import type { PeriodicSchedulerOptions } from '../../lib/scheduler/options.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { Replica } from '../../lib/scheduler/replica.js';
import { deferred, EventLog, flush, useFakeTimers } from './helpers.js';

useFakeTimers();

const LEASE_MS = 3000;
const EVERY = 10_000;

/** A replica's way to the shared store; cut, it fails every call, as a dead or partitioned replica's would. */
class Link implements PeriodicCoordinator {
  cut = false;
  /** While set, writes of the schedule wait for it, as over a slow network. */
  held: Promise<void> | undefined;
  /** How long every command takes to reach the store, in ms. */
  latency = 0;
  readonly leaseMs: number;

  constructor(private readonly store: InMemoryCoordinator) {
    this.leaseMs = store.leaseMs;
  }

  acquire(name: string, owner: string) {
    return this.send(() => this.store.acquire(name, owner));
  }
  renew(name: string, owner: string) {
    return this.send(() => this.store.renew(name, owner));
  }
  release(name: string, owner: string) {
    return this.send(() => this.store.release(name, owner));
  }
  readSchedule(name: string) {
    return this.send(() => this.store.readSchedule(name));
  }
  async writeSchedule(name: string, owner: string, token: number, schedule: PeriodicFleetSchedule) {
    await this.held;
    return this.send(() => this.store.writeSchedule(name, owner, token, schedule));
  }

  private async send<T>(command: () => Promise<T>): Promise<T> {
    if (this.latency > 0) await new Promise((resolve) => setTimeout(resolve, this.latency));
    if (this.cut) throw new Error('connect ECONNREFUSED');
    return command();
  }
}

interface Run {
  replica: string;
  /** `Date.now()` when the run started. */
  at: number;
  slot: number;
}

type Options = Omit<PeriodicSchedulerOptions, 'name' | 'run' | 'coordinator'>;

/** A fleet of replicas of the exclusive job "job", recording every run of any of them. */
function fleet(options: Options = { every: EVERY }) {
  const store = new InMemoryCoordinator({ leaseMs: LEASE_MS });
  const runs: Run[] = [];
  const replicas = new Map<string, { scheduler: PeriodicScheduler; link: Link; log: EventLog }>();
  return {
    store,
    runs,
    /** Starts a replica whose commands take `latency` ms to reach the store. */
    start(replica: string, own: Partial<Options> = {}, latency = 0) {
      const link = new Link(store);
      link.latency = latency;
      const log = new EventLog();
      const scheduler = new PeriodicScheduler(
        {
          name: 'job',
          exclusive: true,
          coordinator: link,
          ...options,
          ...own,
          run: ({ scheduledDate }) => {
            runs.push({ replica, at: Date.now(), slot: scheduledDate.getTime() });
          },
        },
        log.sink,
        // A replica cut from the store fails every call: its failures are expected, and not reported.
        { replica: new Replica(new StoreLog(link, { error: () => undefined, log: () => undefined })) },
      );
      scheduler.start();
      replicas.set(replica, { scheduler, link, log });
      return log;
    },
    /** Closes a replica as `app.close()` does: drained, its lease released. */
    stop: (replica: string) => replicas.get(replica)!.scheduler.stop(),
    /** A replica dies: it ticks no more, and its lease expires in the store, never released. */
    link: (replica: string) => replicas.get(replica)!.link,
    kill(replica: string) {
      const { scheduler, link } = replicas.get(replica)!;
      link.cut = true;
      void scheduler.stop();
    },
    async stopAll() {
      await Promise.all([...replicas.values()].map(({ scheduler }) => scheduler.stop()));
    },
  };
}

async function advance(ms: number): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
  await flush();
}

/** The slots of the runs as multiples of `every` from the first one. */
function slotIndexes(runs: Run[], every = EVERY): number[] {
  return runs.map(({ slot }) => (slot - runs[0].slot) / every);
}

describe('the fleet keeps one grid', () => {
  it('a graceful handover mid-interval: the next run is the next slot of the stored grid', async () => {
    const jobs = fleet();
    jobs.start('A');
    await advance(1234);
    jobs.start('B');
    await advance(3 * EVERY + EVERY / 2);
    await jobs.stop('A');
    await advance(4 * EVERY);
    await jobs.stopAll();

    expect(jobs.runs.map((run) => run.replica)).toEqual(['A', 'A', 'A', 'B', 'B', 'B', 'B']);
    // B started 1234 ms after A: its own grid would be off by that much. It runs A's.
    expect(slotIndexes(jobs.runs)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    for (const run of jobs.runs) expect(run.at).toBe(run.slot);
  });

  it('a holder that dies mid-interval: the next holder runs the next slot once its lease has expired', async () => {
    const jobs = fleet();
    jobs.start('A');
    jobs.start('B');
    await advance(2 * EVERY + EVERY / 2);
    jobs.kill('A');
    await advance(5 * EVERY);
    await jobs.stopAll();

    expect(jobs.runs.map((run) => run.replica)).toEqual(['A', 'A', 'B', 'B', 'B', 'B', 'B']);
    expect(slotIndexes(jobs.runs)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    for (const run of jobs.runs) expect(run.at).toBe(run.slot);
  });

  it('a holder that dies right after a slot started: the slot is not run again', async () => {
    const jobs = fleet({ every: 2000 });
    jobs.start('A');
    jobs.start('B');
    await advance(2000);
    jobs.kill('A');
    // The lease expires within LEASE_MS: B takes over after the next slot, which it runs late, once.
    await advance(4000 + LEASE_MS);
    await jobs.stopAll();

    const slots = slotIndexes(jobs.runs, 2000);
    expect(jobs.runs[0].replica).toBe('A');
    expect(new Set(slots).size).toBe(slots.length);
    expect(slots).toEqual([0, 1, 2, 3]);
    // Slot 1 passed while nobody held the lease: B ran it at once, late, when it took over.
    expect(jobs.runs[1].at).toBeGreaterThan(jobs.runs[1].slot);
  });

  it('a holder closed while it claims a slot gives the slot back: the next holder runs it', async () => {
    const jobs = fleet();
    jobs.start('A');
    jobs.start('B');
    await advance(EVERY);
    const slow = deferred();
    jobs.link('A').held = slow.promise;
    await advance(EVERY);
    const closed = jobs.stop('A');
    slow.resolve();
    await closed;
    await advance(2 * EVERY);
    await jobs.stopAll();

    expect(jobs.runs.map((run) => run.replica)).toEqual(['A', 'B', 'B', 'B']);
    expect(slotIndexes(jobs.runs)).toEqual([0, 1, 2, 3]);
    // B took the lease at its next heartbeat (within leaseMs / 3 of the release), and ran the slot A had
    // claimed at once.
    expect(jobs.runs[1].at - jobs.runs[1].slot).toBeLessThanOrEqual(LEASE_MS / 3 + 1);
  });

  it('the first holder runs a slot due at its start at once (initialDelay: 0), and the next one on its grid', async () => {
    const jobs = fleet({ every: 60_000, initialDelay: 0 });
    const started = Date.now();
    // The store answers in 2 ms: the first tick comes before the lease.
    jobs.start('A', {}, 2);
    await advance(10);
    expect(jobs.runs).toEqual([{ replica: 'A', at: expect.any(Number), slot: started }]);
    expect(jobs.runs[0].at - started).toBeLessThan(10);
    jobs.start('B');
    await advance(60_000);
    const stopped = jobs.stopAll();
    await advance(LEASE_MS);
    await stopped;
    expect(jobs.runs.map((run) => run.slot - started)).toEqual([0, 60_000]);
  });

  it('a holder whose guard is pending closes at once and releases its lease; the next holder runs the slot', async () => {
    const jobs = fleet();
    jobs.start('A', { when: () => new Promise<boolean>(() => undefined) });
    jobs.start('B');
    await advance(EVERY);
    let closed = false;
    void jobs.stop('A').then(() => (closed = true));
    await advance(0);
    expect(closed).toBe(true);
    await advance(LEASE_MS / 3 + 1);
    await jobs.stopAll();
    expect(jobs.runs.map((run) => run.replica)).toEqual(['B']);
    expect(jobs.runs[0].at - jobs.runs[0].slot).toBeLessThanOrEqual(LEASE_MS / 3 + 1);
  });

  it('a holder whose claim gets no answer still closes, within leaseMs / 3', async () => {
    const jobs = fleet();
    jobs.start('A');
    await advance(EVERY - 1);
    jobs.link('A').held = new Promise(() => undefined);
    await advance(1);
    let closed = false;
    void jobs.stop('A').then(() => (closed = true));
    await advance(LEASE_MS / 3 - 1);
    expect(closed).toBe(false);
    await advance(1);
    expect(closed).toBe(true);
    expect(jobs.runs).toEqual([]);
  });

  it('a claim that gets no answer drops its own slot only: it fails after leaseMs / 3, and later slots run', async () => {
    const jobs = fleet();
    const log = jobs.start('A');
    await advance(EVERY);
    jobs.link('A').held = new Promise(() => undefined);
    await advance(EVERY);
    jobs.link('A').held = undefined;
    await advance(2 * EVERY);
    await jobs.stopAll();

    expect(slotIndexes(jobs.runs)).toEqual([0, 2, 3]);
    expect(log.of('leaseLost')).toEqual([]);
  });

  it('after the whole fleet was down across slots: one run at once, missed reports the dropped ones, then the grid', async () => {
    const jobs = fleet();
    jobs.start('A');
    await advance(2 * EVERY);
    await jobs.stop('A');
    // Down from slot 1 + 0.1 to slot 4 + 0.6: slots 2, 3 and 4 passed with nobody up.
    await advance(3.5 * EVERY);
    const log = jobs.start('C');
    await advance(1);
    expect(log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 2 }]);
    await advance(2 * EVERY);
    await jobs.stopAll();

    expect(slotIndexes(jobs.runs)).toEqual([0, 1, 4, 5, 6]);
    const [, , late, ...onGrid] = jobs.runs;
    expect(late.at - late.slot).toBe(EVERY / 2);
    for (const run of onGrid) expect(run.at).toBe(run.slot);
  });

  it('rolling restarts faster than the interval: the job still runs once per slot', async () => {
    const jobs = fleet();
    let replicas = ['r1', 'r2', 'r3'];
    for (const replica of replicas) jobs.start(replica);
    let next = 4;
    // Every 0.4 × every one replica is closed and a new one started, in turn, for ten intervals.
    for (let restart = 0; restart < 25; restart++) {
      await advance(0.4 * EVERY);
      const [oldest, ...others] = replicas;
      await jobs.stop(oldest);
      const fresh = `r${next++}`;
      jobs.start(fresh);
      replicas = [...others, fresh];
    }
    await jobs.stopAll();

    // Per-process grids would never reach the first slot: no replica lives a whole interval.
    expect(slotIndexes(jobs.runs)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(new Set(jobs.runs.map((run) => run.replica)).size).toBeGreaterThan(3);
  });

  it('in shifted mode, the gap is measured from the end of the last run, wherever it ran', async () => {
    const jobs = fleet({ every: EVERY, delayMode: 'shifted' });
    const ends: number[] = [];
    jobs.start('A');
    jobs.start('B');
    await advance(EVERY);
    ends.push(Date.now());
    await advance(EVERY / 2);
    await jobs.stop('A');
    await advance(3 * EVERY);
    await jobs.stopAll();

    expect(jobs.runs.map((run) => run.replica)).toEqual(['A', 'B', 'B', 'B']);
    // Runs end as they start here: each starts `every` after the one before, across the handover too.
    const starts = jobs.runs.map((run) => run.at);
    expect(starts[0]).toBe(ends[0]);
    expect(starts.slice(1).map((start, i) => start - starts[i])).toEqual([EVERY, EVERY, EVERY]);
  });

  it('in shifted mode, a run whose end the store never learnt counts as ended at the takeover', async () => {
    const store = new InMemoryCoordinator({ leaseMs: LEASE_MS });
    const owner = 'gone';
    const token = await store.acquire('job', owner);
    const slot = Date.now();
    await store.writeSchedule('job', owner, token, { grid: `every ${EVERY} shifted`, last: slot, next: 0 });
    await store.release('job', owner);
    const runs: number[] = [];
    const scheduler = new PeriodicScheduler({
      name: 'job',
      every: EVERY,
      delayMode: 'shifted',
      initialDelay: 100 * EVERY,
      exclusive: true,
      coordinator: store,
      run: () => void runs.push(Date.now()),
    });
    scheduler.start();
    await advance(2 * EVERY + 1);
    await scheduler.stop();
    expect(runs.map((at) => at - slot)).toEqual([EVERY, 2 * EVERY]);
  });
});

describe('cron jobs', () => {
  it('a handover continues the pattern: the last slot that ran is stored, none runs twice', async () => {
    jest.setSystemTime(new Date('2026-01-01T00:00:00Z'));
    const jobs = fleet({ cron: '*/10 * * * * *', timezone: 'UTC' });
    jobs.start('A');
    await advance(1234);
    jobs.start('B');
    await advance(2 * EVERY);
    await jobs.stop('A');
    await advance(3 * EVERY);
    await jobs.stopAll();

    expect(jobs.runs.map((run) => run.replica)).toEqual(['A', 'A', 'B', 'B', 'B']);
    expect(jobs.runs.map((run) => new Date(run.slot).toISOString().slice(11, 19))).toEqual([
      '00:00:10',
      '00:00:20',
      '00:00:30',
      '00:00:40',
      '00:00:50',
    ]);
    for (const run of jobs.runs) expect(run.at).toBe(run.slot);
  });
});

describe('changed options during a rolling deploy', () => {
  it('each holder runs its own interval after the last run anywhere; no slot runs twice', async () => {
    const jobs = fleet();
    jobs.start('old');
    await advance(2 * EVERY + EVERY / 2);
    jobs.start('new', { every: EVERY / 2 });
    await jobs.stop('old');
    await advance(2 * EVERY);
    jobs.start('old-again');
    await jobs.stop('new');
    await advance(2 * EVERY);
    await jobs.stopAll();

    // The slots, by their wall-clock time: a takeover may run its first slot a little late (it waits for the
    // lease), never twice, and the grid goes on from the slot.
    const gaps = jobs.runs.slice(1).map((run, i) => [run.replica, run.slot - jobs.runs[i].slot]);
    expect(gaps).toEqual([
      ['old', EVERY],
      ['new', EVERY / 2],
      ['new', EVERY / 2],
      ['new', EVERY / 2],
      ['new', EVERY / 2],
      ['new', EVERY / 2],
      ['old-again', EVERY],
      ['old-again', EVERY],
    ]);
    for (const run of jobs.runs) expect(run.at - run.slot).toBeLessThan(LEASE_MS / 3);
  });

  it('a holder whose options match the stored grid continues it; the store keeps what it wrote', async () => {
    const jobs = fleet();
    jobs.start('A');
    await advance(EVERY);
    const stored = await jobs.store.readSchedule('job');
    expect(stored).toEqual({
      grid: `every ${EVERY} regular`,
      last: jobs.runs[0].slot,
      next: jobs.runs[0].slot + EVERY,
    });
    await jobs.stopAll();
  });
});

describe('the store decides', () => {
  it('a tick whose slot the store refuses starts nothing', async () => {
    const jobs = fleet();
    const log = jobs.start('A');
    await advance(1);
    // Someone else moved the fleet past the next slot (a replica with a clock ahead, say).
    const [{ fencingToken }] = log.of('leaseAcquired');
    const owner = jobs.store['leases'].get('job')!.owner;
    await jobs.store.writeSchedule('job', owner, fencingToken, {
      grid: `every ${EVERY} regular`,
      last: Date.now() + 5 * EVERY,
      next: Date.now() + 6 * EVERY,
    });
    await advance(3 * EVERY);
    expect(jobs.runs).toEqual([]);
    expect(log.of('started')).toEqual([]);
    await jobs.stopAll();
  });

  it('non-exclusive jobs keep their own grid and touch no store', async () => {
    const runs: number[] = [];
    const scheduler = new PeriodicScheduler({
      name: 'job',
      every: EVERY,
      run: () => void runs.push(Date.now()),
    });
    const started = Date.now();
    scheduler.start();
    await advance(2 * EVERY);
    await scheduler.stop();
    expect(runs).toEqual([started + EVERY, started + 2 * EVERY]);
  });
});

describe('the largest intervals', () => {
  it('a job every 2 ** 53 - 1 ms writes its next slot as the last instant a Date holds: the next holder of its replica takes every job over', async () => {
    const store = new InMemoryCoordinator({ leaseMs: LEASE_MS });
    const errors: string[] = [];
    const start = (name: string) => {
      const replica = new Replica(
        new StoreLog(store, { error: (line) => errors.push(line), log: () => {} }),
        name,
      );
      const runs: number[] = [];
      const schedulers = [
        new PeriodicScheduler(
          {
            name: 'far',
            every: 2 ** 53 - 1,
            initialDelay: 0,
            exclusive: true,
            coordinator: store,
            run: () => {},
          },
          undefined,
          { replica },
        ),
        new PeriodicScheduler(
          {
            name: 'near',
            every: 1000,
            exclusive: true,
            coordinator: store,
            run: () => void runs.push(Date.now()),
          },
          undefined,
          { replica },
        ),
      ];
      for (const scheduler of schedulers) scheduler.start();
      return { runs, stop: () => Promise.all(schedulers.map((scheduler) => scheduler.stop())) };
    };
    const first = start('r1');
    await advance(2 * LEASE_MS);
    expect(await store.readSchedule('far')).toMatchObject({ next: 8_640_000_000_000_000 });
    await first.stop();
    const second = start('r2');
    await advance(3 * LEASE_MS);
    // The schedule it read is one a store keeps exactly: taken over, not refused as a store's garbled answer.
    expect(second.runs.length).toBeGreaterThan(3);
    expect(errors).toEqual([]);
    await second.stop();
  });
});
