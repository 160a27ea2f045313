// One view of the fleet (SPEC 17, 18): an exclusive job's history and fleet status are read from the store, the
// same on every replica; a trigger asked of a replica without the lease runs once, on the holder; a store that
// does not answer is reported, not waited for. A job that is not exclusive keeps its history in memory.
import { describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import { advance, EventLog, flush, startScheduler, twoReplicas, useFakeTimers } from './helpers.js';
import { StoreLog } from '../../lib/scheduler/store-log.js';
import { Replica } from '../../lib/scheduler/replica.js';
import { CLAIM_AHEAD_MS } from '../../lib/scheduler/slot-claims.js';

useFakeTimers();

const LEASE_MS = 3000;

/** A store that can be made to hang: its steps then never answer. */
class Store extends InMemoryCoordinator {
  hung = false;

  constructor() {
    super({ leaseMs: LEASE_MS });
  }

  override async readFleet(...args: Parameters<InMemoryCoordinator['readFleet']>) {
    if (this.hung) await new Promise(() => undefined);
    return super.readFleet(...args);
  }
}

/** Two replicas of `store` with the job "job" every 1000 ms whose runs `run` decides, keeping 5 runs: holder first. */
function fleet(store: Store, run: (context: PeriodicContext) => unknown = () => undefined) {
  return twoReplicas(store, { every: 1000, run }, { keep: 5, errors: 'message' });
}

describe("an exclusive job's history and status are the fleet's", () => {
  it('every replica reads the same history, newest first, the latest `keep`, with what each run threw', async () => {
    let runs = 0;
    const store = new Store();
    const [holder, other] = fleet(store, () => {
      runs++;
      if (runs % 2 === 0) throw new TypeError(`run ${runs} failed: ${'x'.repeat(400)}`);
    });
    await advance(7500);
    expect(runs).toBe(7);
    const history = await other.scheduler.history();
    expect(await holder.scheduler.history()).toEqual(history);
    expect(history.map((run) => run.jobId)).toEqual([7, 6, 5, 4, 3]);
    expect(history[1]).toMatchObject({
      name: 'job',
      replica: holder.name,
      origin: 'schedule',
      attempt: 1,
      reason: 'error',
      error: { name: 'TypeError' },
    });
    expect(history[1].error!.message).toHaveLength(300);
    expect(history[1].fencingToken).toBeGreaterThan(0);
    expect(history[1].slot!.getTime() % 1000).toBe(history[0].slot!.getTime() % 1000);
    expect(history[0].finishedAt!.getTime()).toBeGreaterThanOrEqual(history[0].startedAt.getTime());
    expect(await other.scheduler.history({ limit: 2, before: history[1].startedAt })).toEqual(
      history.slice(2, 4),
    );
    // A limit above keep reads what is kept.
    expect(await other.scheduler.history({ limit: 6 })).toEqual(history);
    await expect(other.scheduler.history({ limit: 10_001 })).rejects.toThrow(/"limit".*from 1 to 10000/);
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });

  it('a run in flight is in the history, its end null, until it ends', async () => {
    const store = new Store();
    let finish = () => undefined as void;
    const [holder, other] = fleet(store, () => new Promise<void>((resolve) => (finish = resolve)));
    await advance(1100);
    const [running] = await other.scheduler.history();
    expect(running).toMatchObject({
      jobId: 1,
      finishedAt: null,
      reason: null,
      durationMs: null,
      error: null,
    });
    finish();
    await advance(100);
    const [ended] = await other.scheduler.history();
    expect(ended).toMatchObject({ jobId: 1, reason: 'normal' });
    expect(ended.durationMs).toBeGreaterThanOrEqual(0);
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });

  it('fleet status is the same on every replica: holder, pause, slots, last run, failures across the fleet', async () => {
    let fail = true;
    const store = new Store();
    const [holder, other] = fleet(store, () => {
      if (fail) throw new Error('down');
    });
    await advance(3500);
    await other.scheduler.pause({ by: 'alice', note: 'the API is down' });
    const seen = await other.scheduler.fleetStatus();
    expect(await holder.scheduler.fleetStatus()).toEqual(seen);
    expect(seen).toMatchObject({
      name: 'job',
      holder: { replica: holder.name },
      paused: { by: 'alice', note: 'the API is down' },
      consecutiveFailures: 3,
      lastSucceededAt: null,
      lastRun: { jobId: 3, reason: 'error', replica: holder.name },
      store: { reachable: true, lastError: null },
    });
    expect(seen.holder!.fencingToken).toBe(holder.scheduler.status().lease!.fencingToken);
    expect(seen.holder!.until.getTime()).toBeGreaterThan(Date.now());
    expect(seen.lastSlot!.getTime()).toBe(seen.lastRun!.slot!.getTime());
    expect(seen.nextSlot!.getTime()).toBe(seen.lastSlot!.getTime() + 1000);
    fail = false;
    await other.scheduler.resume();
    await advance(1000);
    const resumed = await other.scheduler.fleetStatus();
    expect(resumed).toMatchObject({ paused: null, consecutiveFailures: 0 });
    expect(resumed.lastSucceededAt!.getTime()).toBe(resumed.lastRun!.finishedAt!.getTime());
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });

  it('a store that does not answer: fleet status resolves within leaseMs / 3 with what this replica knows', async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(1500);
    store.hung = true;
    const asked = Date.now();
    const reading = holder.scheduler.fleetStatus();
    await advance(LEASE_MS / 3);
    const status = await reading;
    expect(Date.now() - asked).toBeLessThanOrEqual(LEASE_MS / 3 + 10);
    expect(status).toMatchObject({
      holder: { replica: holder.name },
      lastSlot: null,
      nextSlot: null,
      // Its own last run: the second, at 1000 ms.
      lastRun: { jobId: 2, reason: 'normal', replica: holder.name },
      store: { reachable: false, lastError: expect.stringMatching(/no answer/) },
    });
    expect(holder.scheduler.status().lease).toEqual({
      held: true,
      fencingToken: expect.any(Number),
      unreachable: { since: expect.any(Date), lastError: expect.stringMatching(/no answer/) },
    });
    store.hung = false;
    await advance(LEASE_MS / 3);
    expect((await other.scheduler.fleetStatus()).store.reachable).toBe(true);
    expect(holder.scheduler.status().lease).toEqual({ held: true, fencingToken: expect.any(Number) });
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });
});

/** A store whose records take `delay` ms to be answered. */
class Slow extends Store {
  delay = 0;

  override async recordRuns(...args: Parameters<InMemoryCoordinator['recordRuns']>) {
    if (this.delay > 0) await new Promise((resolve) => setTimeout(resolve, this.delay));
    return super.recordRuns(...args);
  }
}

/** A store that notes when each step of records and of claims reaches it, on the fake clock. */
class Steps extends Store {
  readonly steps: [step: 'records' | 'claims', at: number, names: string[]][] = [];
  readonly began = Date.now();

  override async recordRuns(...args: Parameters<InMemoryCoordinator['recordRuns']>) {
    this.steps.push([
      'records',
      Date.now() - this.began,
      args[0].map((run) => `${run.name} ${run.reason ?? 'started'}`),
    ]);
    return super.recordRuns(...args);
  }

  override async writeSchedules(...args: Parameters<InMemoryCoordinator['writeSchedules']>) {
    this.steps.push(['claims', Date.now() - this.began, args[1].map((write) => write.name)]);
    return super.writeSchedules(...args);
  }
}

describe('the records of runs on their way to the store', () => {
  /**
   * Jobs a, b and c of one replica, each every 1000 ms, `apart` ms apart: the steps that reached the store in the
   * second round of their ticks (from 2000 ms).
   */
  async function secondRound(apart: number, delivery?: 'atLeastOnce') {
    const store = new Steps();
    const replica = new Replica(new StoreLog(store, { error: () => undefined, log: () => undefined }), 'r1');
    ['a', 'b', 'c'].forEach((name, i) => {
      const options = {
        name,
        every: 1000,
        initialDelay: 1000 + i * apart,
        exclusive: true,
        coordinator: store,
      };
      const scheduler = new PeriodicScheduler({ ...options, delivery, run: () => undefined }, undefined, {
        replica,
      });
      scheduler.start();
    });
    await advance(2700);
    const since = store.steps.findIndex(([step, at]) => step === 'claims' && at >= 2000);
    return store.steps.slice(since, since + 6);
  }

  it('the runs of the slots a step claimed ahead go together, once the last of those slots has come', async () => {
    expect(await secondRound(10)).toEqual([
      ['claims', 2000, ['a', 'b', 'c']],
      ['records', 2021, ['a normal', 'b normal', 'c normal']],
    ]);
  });

  it('wait for the next step of claims due within leaseMs / 20, for that long at most', async () => {
    expect(await secondRound(CLAIM_AHEAD_MS + 10)).toEqual([
      // b's tick claims its slot 60 ms after a's: a's record goes with it, b's with c's claim.
      ['claims', 2000, ['a']],
      ['records', 2060, ['a normal']],
      ['claims', 2060, ['b']],
      ['records', 2120, ['b normal']],
      ['claims', 2120, ['c']],
      // No claim is due within leaseMs / 20 after c's, but those came less than that apart: c's waits that long.
      ['records', 2120 + LEASE_MS / 20, ['c normal']],
    ]);
  });

  it('of jobs that keep different numbers of runs go in one step, each job keeping its own number', async () => {
    const calls: [keep: number, names: string[]][] = [];
    const store = new (class extends Store {
      override async recordRuns(...args: Parameters<InMemoryCoordinator['recordRuns']>) {
        calls.push([args[1], args[0].map((run) => run.name)]);
        return super.recordRuns(...args);
      }
    })();
    const replica = new Replica(new StoreLog(store, { error: () => undefined, log: () => undefined }), 'r1');
    const schedulers = [2, 5].map((keep) => {
      const options = { name: `keeps ${keep}`, every: 1000, exclusive: true, coordinator: store };
      const history = { keep, errors: 'message' as const };
      return new PeriodicScheduler({ ...options, run: () => undefined }, undefined, { replica, history });
    });
    for (const scheduler of schedulers) scheduler.start();
    await advance(7500);
    const [two, five] = await Promise.all(schedulers.map((scheduler) => scheduler.history()));
    expect(two.map((run) => run.jobId)).toEqual([7, 6]);
    expect(five.map((run) => run.jobId)).toEqual([7, 6, 5, 4, 3]);
    // Records of both waiting together go in one step: one call per number kept.
    calls.length = 0;
    const run = { ...(await store.readHistory('keeps 2', 1, null))[0], id: 'both' };
    replica.records.record({ ...run, name: 'keeps 2' }, 2, false);
    replica.records.record({ ...run, name: 'keeps 5' }, 5, false);
    await replica.records.flush();
    expect(calls).toEqual([
      [2, ['keeps 2']],
      [5, ['keeps 5']],
    ]);
    await Promise.all(schedulers.map((scheduler) => scheduler.stop()));
  });

  it("with delivery: 'atLeastOnce', go at once: the next holder must know that a run started", async () => {
    expect(await secondRound(10, 'atLeastOnce')).toEqual([
      ['claims', 2000, ['a']],
      ['records', 2000, ['a normal']],
      ['claims', 2010, ['b']],
      ['records', 2010, ['b normal']],
      ['claims', 2020, ['c']],
      ['records', 2020, ['c normal']],
    ]);
  });
});

/** A slow store that notes when the records of runs were answered and when leases were given up. */
class Ordered extends Slow {
  readonly steps: string[] = [];

  override async recordRuns(...args: Parameters<InMemoryCoordinator['recordRuns']>) {
    await super.recordRuns(...args);
    this.steps.push(`recorded ${args[0].map((run) => run.reason ?? 'started').join(', ')}`);
  }

  override async releaseAll(...args: Parameters<InMemoryCoordinator['releaseAll']>) {
    this.steps.push(`released ${args[1].map((lease) => lease.name).join(', ')}`);
    return super.releaseAll(...args);
  }
}

describe('a replica that stops', () => {
  it('gives a lease up once the store has the end of its last run: the next holder hands over whole histories', async () => {
    const store = new Ordered();
    store.delay = 100;
    const replica = new Replica(new StoreLog(store, { error: () => undefined, log: () => undefined }), 'r1');
    const scheduler = new PeriodicScheduler(
      {
        name: 'job',
        every: 1000,
        exclusive: true,
        coordinator: store,
        run: () => new Promise((resolve) => setTimeout(resolve, 300)),
      },
      undefined,
      { replica },
    );
    scheduler.start();
    await advance(1100);
    const stopped = scheduler.stop();
    await advance(1000);
    await stopped;
    // The run in flight is stopped, and its end recorded, before the lease goes.
    expect(store.steps).toEqual(['recorded started', 'recorded shutdown', 'released job']);
    expect((await store.readHistory('job', 1, null))[0].reason).toBe('shutdown');
  });
});

describe('a store too slow to keep the history', () => {
  it('records no run for a lease period, and says so once, so that claims keep its time', async () => {
    const store = new Slow();
    const lines: string[] = [];
    const replica = new Replica(
      new StoreLog(store, { error: () => undefined, log: (line) => lines.push(line) }),
      'r1',
    );
    const log = new EventLog();
    const scheduler = new PeriodicScheduler(
      { name: 'job', every: 100, exclusive: true, coordinator: store, run: () => undefined },
      log.sink,
      { replica },
    );
    scheduler.start();
    await advance(1000);
    const before = (await store.readHistory('job', 100, null)).length;
    expect(before).toBeGreaterThan(5);
    // More than leaseMs / 10 to record a step of runs: the history pauses for a lease period.
    store.delay = LEASE_MS / 10 + 50;
    await advance(2000);
    store.delay = 0;
    const during = (await store.readHistory('job', 100, null)).length;
    expect(during - before).toBeLessThanOrEqual(2);
    expect(lines).toEqual([
      expect.stringMatching(/^Slow took \d+ms to record 1 runs: no run is recorded for the next 3000ms/),
    ]);
    expect(log.of('started').length).toBeGreaterThan(25);
    await advance(2000);
    // Recorded again once the lease period is over (the slow step ended at about 1,450 ms).
    expect((await store.readHistory('job', 100, null)).length).toBeGreaterThan(during + 2);
    await scheduler.stop();
  });
});

describe('a store too slow to keep the history, with a run in flight', () => {
  it('still records the end of a run whose start it took: no run reads as running for ever', async () => {
    const store = new Slow();
    const replica = new Replica(new StoreLog(store, { error: () => undefined, log: () => undefined }), 'r1');
    const finishes: (() => void)[] = [];
    const scheduler = new PeriodicScheduler(
      {
        name: 'long',
        every: 60_000,
        exclusive: true,
        coordinator: store,
        run: () => new Promise<void>((resolve) => finishes.push(resolve)),
      },
      new EventLog().sink,
      { replica },
    );
    scheduler.start();
    await advance(60_000);
    await flush();
    expect((await store.readHistory('long', 10, null)).map((run) => run.reason)).toEqual([null]);
    // The store turns slow: a step of records takes more than leaseMs / 10, and records are shed.
    store.delay = LEASE_MS / 10 + 50;
    await scheduler.trigger();
    await advance(LEASE_MS / 10 + 100);
    store.delay = 0;
    // Shedding now: the run's end is still recorded, as its start was.
    finishes.forEach((finish) => finish());
    await advance(100);
    const runs = await store.readHistory('long', 10, null);
    expect(runs.filter((run) => run.origin === 'schedule').map((run) => run.reason)).toEqual(['normal']);
    await scheduler.stop();
  });
});

describe('a trigger from any replica', () => {
  it('asked of the replica without the lease, it runs once, on the holder, and resolves its jobId and replica', async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(1500);
    const triggering = other.scheduler.trigger({ by: 'alice' });
    await advance(LEASE_MS / 3 + 200);
    const result = await triggering;
    expect(result).toEqual({ ok: true, jobId: expect.any(Number), replica: holder.name });
    expect(other.log.of('started')).toEqual([]);
    const runs = await other.scheduler.history({ limit: 5 });
    expect(runs.filter((run) => run.origin === 'trigger')).toMatchObject([
      { jobId: (result as { jobId: number }).jobId, slot: null, replica: holder.name },
    ]);
    expect(await holder.scheduler.audit()).toMatchObject([
      { action: 'trigger', by: 'alice', replica: other.name },
    ]);
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });

  it("resolves the holder's answer when it starts nothing, and noHolder when no replica holds the lease", async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(1500);
    await holder.scheduler.pause();
    const paused = other.scheduler.trigger();
    await advance(LEASE_MS);
    expect(await paused).toEqual({ ok: false, error: 'paused' });
    await holder.scheduler.resume();
    await holder.scheduler.stop();
    await advance(100);
    const alone = other.scheduler.trigger();
    // The other replica takes the lease at its next heartbeat: within leaseMs, the trigger runs there.
    await advance(2 * LEASE_MS);
    expect(await alone).toMatchObject({ ok: true, replica: other.name });
    await other.scheduler.stop();
  });

  it('resolves noHolder after leaseMs when nobody takes it, and never runs it later', async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(1500);
    // Heartbeats fail: the holder loses its lease, nobody takes it, nor the trigger.
    const heartbeat = jest.spyOn(store, 'heartbeat').mockRejectedValue(new Error('connection reset'));
    const triggering = other.scheduler.trigger();
    await advance(LEASE_MS + 500);
    expect(await triggering).toEqual({ ok: false, error: 'noHolder' });
    heartbeat.mockRestore();
    const carried = [jest.spyOn(holder.scheduler, 'carry'), jest.spyOn(other.scheduler, 'carry')];
    const started = holder.log.of('started').length + other.log.of('started').length;
    await advance(3 * LEASE_MS);
    expect(carried.flatMap((spy) => spy.mock.calls)).toEqual([]);
    expect(holder.log.of('started').length + other.log.of('started').length).toBeGreaterThan(started);
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });
});

describe('a trigger while the store does not answer (SPEC 22)', () => {
  it.each([
    [
      'hangs',
      (store: Store) => jest.spyOn(store, 'requestTrigger').mockReturnValue(new Promise(() => undefined)),
    ],
    [
      'refuses',
      (store: Store) => jest.spyOn(store, 'requestTrigger').mockRejectedValue(new Error('ECONNREFUSED')),
    ],
  ])(
    'resolves storeUnreachable within leaseMs when the store %s, and runs nothing',
    async (_, breakStore) => {
      const store = new Store();
      const [holder, other] = fleet(store);
      await advance(1500);
      const started = holder.log.of('started').length;
      const request = breakStore(store);
      jest.spyOn(store, 'readTrigger').mockRejectedValue(new Error('ECONNREFUSED'));
      let result: unknown;
      void other.scheduler.trigger().then((answer) => (result = answer));
      await advance(LEASE_MS - 1);
      expect(result).toEqual({ ok: false, error: 'storeUnreachable' });
      expect(request).toHaveBeenCalledTimes(1);
      // Only the holder's own slots ran, none for the trigger.
      expect(holder.log.of('started').length - started).toBeLessThanOrEqual(Math.ceil(LEASE_MS / 1000));
      expect(other.log.of('started')).toEqual([]);
      await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
    },
  );

  it("the holder's trigger answers storeUnreachable when the fleet's pause cannot be read", async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(1500);
    jest.spyOn(store, 'readPause').mockRejectedValue(new Error('ECONNREFUSED'));
    expect(await holder.scheduler.trigger()).toEqual({ ok: false, error: 'storeUnreachable' });
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });

  it('fleetStatus().store.lastError is null once the store answers again', async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(1500);
    store.hung = true;
    const read = other.scheduler.fleetStatus();
    await advance(LEASE_MS);
    expect((await read).store).toMatchObject({
      reachable: false,
      lastError: expect.stringMatching(/no answer/),
    });
    store.hung = false;
    await advance(LEASE_MS);
    expect((await other.scheduler.fleetStatus()).store).toMatchObject({ reachable: true, lastError: null });
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });
});

describe('a replica restarted under the same name (SPEC 22)', () => {
  it('numbers its runs above those its name recorded, so that (replica, jobId) names one run', async () => {
    const store = new Store();
    const quiet = { error: () => undefined, log: () => undefined };
    const start = () => {
      const log = new EventLog();
      const scheduler = new PeriodicScheduler(
        { name: 'job', every: 1000, exclusive: true, coordinator: store, run: () => undefined },
        log.sink,
        {
          replica: new Replica(new StoreLog(store, quiet), 'pod-0'),
          history: { keep: 20, errors: 'message' },
        },
      );
      scheduler.start();
      return { scheduler, log };
    };
    const first = start();
    await advance(3500);
    await first.scheduler.stop();
    const before = (await store.readHistory('job', 20, null)).map((run) => run.jobId);
    expect(before).toEqual([3, 2, 1]);
    const second = start();
    await advance(3500);
    const ids = second.log.of('started').map((event) => event.jobId);
    expect(ids.length).toBeGreaterThanOrEqual(3);
    expect(ids).toEqual(ids.map((_, i) => 4 + i));
    const history = await second.scheduler.history();
    expect(history.map((run) => `${run.replica}#${run.jobId}`)).toEqual(
      [...ids.slice().reverse(), 3, 2, 1].map((id) => `pod-0#${id}`),
    );
    expect(second.scheduler.status().counts.started).toBe(ids.length);
    await second.scheduler.stop();
  });
});

describe('a run whose replica died before recording its end (SPEC 22)', () => {
  /**
   * A replica "dead" that took the lease of "job", recorded the start of run 7 for the slot `slot` and was never
   * heard of again; then the replica "pod-1" starts the job.
   */
  async function afterADeath(delivery: 'atMostOnce' | 'atLeastOnce') {
    const store = new Store();
    const slot = Math.floor(Date.now() / 1000) * 1000 + 1000;
    await advance(slot - Date.now() + 5);
    const token = await store.acquire('job', 'dead/1');
    await store.writeSchedule('job', 'dead/1', token, {
      grid: 'every 1000 regular',
      last: slot,
      next: slot + 1000,
    });
    const startedAt = Date.now();
    await store.recordRuns(
      [
        {
          id: 'dead-session#1',
          name: 'job',
          jobId: 7,
          replica: 'dead',
          fencingToken: token,
          slot,
          origin: 'schedule',
          attempt: 1,
          startedAt,
          finishedAt: null,
          reason: null,
          durationMs: null,
          error: null,
        },
      ],
      20,
    );
    const log = new EventLog();
    const replica = new Replica(
      new StoreLog(store, { error: () => undefined, log: () => undefined }),
      'pod-1',
    );
    const scheduler = new PeriodicScheduler(
      { name: 'job', every: 1000, exclusive: true, coordinator: store, delivery, run: () => undefined },
      log.sink,
      { replica, history: { keep: 20, errors: 'message' } },
    );
    scheduler.start();
    await advance(LEASE_MS + 2000);
    const [acquired] = log.of('leaseAcquired');
    expect(acquired).toBeDefined();
    return { scheduler, log, slot, startedAt, token };
  }

  it('is closed by the next holder: leaseLost, PeriodicReplicaLost, finished when the lease was found expired', async () => {
    const { scheduler, startedAt } = await afterADeath('atMostOnce');
    const history = await scheduler.history();
    const lost = history.find((run) => run.replica === 'dead')!;
    expect(lost).toMatchObject({
      jobId: 7,
      reason: 'leaseLost',
      error: { name: 'PeriodicReplicaLost', message: 'replica dead stopped renewing its lease' },
    });
    // Found expired at a heartbeat of pod-1 after the dead lease's leaseMs, and before the next holding's first run.
    const finishedAt = lost.finishedAt!.getTime();
    expect(finishedAt - startedAt).toBeGreaterThanOrEqual(LEASE_MS);
    expect(finishedAt - startedAt).toBeLessThanOrEqual(LEASE_MS + LEASE_MS / 3 + 100);
    expect(lost.durationMs).toBe(finishedAt - startedAt);
    const firstOfPod1 = history.filter((run) => run.replica === 'pod-1').at(-1)!;
    expect(firstOfPod1.startedAt.getTime()).toBeGreaterThanOrEqual(finishedAt);
    expect(history.every((run) => run.finishedAt !== null)).toBe(true);
    const status = await scheduler.fleetStatus();
    expect(status.lastRun).toMatchObject({ replica: 'pod-1', reason: 'normal' });
    await scheduler.stop();
  });

  it("with 'atLeastOnce', the recovery of its slot follows the record of its end", async () => {
    const { scheduler, slot } = await afterADeath('atLeastOnce');
    const history = await scheduler.history();
    const lost = history.find((run) => run.replica === 'dead')!;
    expect(lost).toMatchObject({ reason: 'leaseLost', error: { name: 'PeriodicReplicaLost' } });
    const recovery = history.find((run) => run.origin === 'recovery')!;
    expect(recovery).toMatchObject({ replica: 'pod-1', attempt: 2, reason: 'normal' });
    expect(recovery.slot!.getTime()).toBe(slot);
    expect(recovery.startedAt.getTime()).toBeGreaterThanOrEqual(lost.finishedAt!.getTime());
    await scheduler.stop();
  });
});

describe('a job that is not the fleet’s', () => {
  it('keeps 100 characters of an error’s class name and 300 of its message, whatever the run threw', async () => {
    const error = Object.assign(new Error('m'.repeat(10_000)), { name: 'N'.repeat(10_000) });
    const { scheduler } = startScheduler({
      every: 100,
      run: () => {
        throw error;
      },
    });
    await advance(150);
    const [run] = await scheduler.history();
    expect(run.error).toEqual({ name: 'N'.repeat(100), message: 'm'.repeat(300) });
    await scheduler.stop();
  });

  it('keeps its history in memory: the latest `keep`, a run in flight included; none with history: false', async () => {
    const { scheduler } = startScheduler({ every: 100 });
    await jest.advanceTimersByTimeAsync(12_050);
    const history = await scheduler.history({ limit: 100 });
    expect(history).toHaveLength(100);
    expect(history[0]).toMatchObject({
      jobId: 120,
      origin: 'schedule',
      attempt: 1,
      reason: 'normal',
      fencingToken: null,
    });
    expect(history.at(-1)!.jobId).toBe(21);
    expect(await scheduler.history({ limit: 101 })).toEqual(history);
    const status = await scheduler.fleetStatus();
    expect(status).toMatchObject({ holder: null, lastRun: { jobId: 120 }, store: { reachable: true } });
    await scheduler.stop();

    const quiet = new PeriodicScheduler({ name: 'quiet', every: 100, run: () => undefined }, undefined, {
      history: false,
    });
    quiet.start();
    await jest.advanceTimersByTimeAsync(1050);
    expect(await quiet.history()).toEqual([]);
    await quiet.stop();
  });
});
