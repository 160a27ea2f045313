// The spread of exclusive jobs over the live replicas (docs/replicas.md, "Coordination at scale"), on fake
// timers: replicas of N jobs share one InMemoryCoordinator, each through a link that can be cut, as a replica
// that dies without releasing its leases would be. Every run is recorded with its job, slot and replica, and
// checked: no slot twice, none lost where the docs promise it, no two replicas running one job at once.
import { describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import {
  type PeriodicCoordinator,
  type PeriodicFleetSchedule,
  type PeriodicHeartbeat,
  type PeriodicLeaseHeld,
  type PeriodicScheduleWrite,
} from '../../lib/scheduler/coordinator-port.js';
import { StoreLog } from '../../lib/scheduler/store-log.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { Replica } from '../../lib/scheduler/replica.js';
import { flush, useFakeTimers } from './helpers.js';

useFakeTimers();
jest.setTimeout(60_000);

const LEASE_MS = 3000;
const INTERVAL = LEASE_MS / 3;

/** A replica's way to the shared store, counting its heartbeats; cut, it fails every call. */
class Link implements PeriodicCoordinator {
  cut = false;
  heartbeats = 0;
  readonly leaseMs = LEASE_MS;

  constructor(private readonly store: InMemoryCoordinator) {}

  acquire = (name: string, owner: string) => this.send(() => this.store.acquire(name, owner));
  renew = (name: string, owner: string) => this.send(() => this.store.renew(name, owner));
  release = (name: string, owner: string) => this.send(() => this.store.release(name, owner));
  readSchedule = (name: string) => this.send(() => this.store.readSchedule(name));
  writeSchedule = (name: string, owner: string, token: number, schedule: PeriodicFleetSchedule) =>
    this.send(() => this.store.writeSchedule(name, owner, token, schedule));
  heartbeat = (request: PeriodicHeartbeat) => {
    this.heartbeats++;
    return this.send(() => this.store.heartbeat(request));
  };
  writeSchedules = (owner: string, writes: PeriodicScheduleWrite[]) =>
    this.send(() => this.store.writeSchedules(owner, writes));
  releaseAll = (owner: string, leases: PeriodicLeaseHeld[], leave: boolean) =>
    this.send(() => this.store.releaseAll(owner, leases, leave));

  private async send<T>(command: () => Promise<T>): Promise<T> {
    if (this.cut) throw new Error('connect ECONNREFUSED');
    return command();
  }
}

interface Run {
  job: string;
  replica: string;
  slot: number;
  /** `Date.now()` when the run started and ended. */
  from: number;
  to: number;
}

/** Replicas of exclusive jobs `job-0` … every `every` ms, whose runs take `lasting` ms. */
function fleet(jobs: number, { every = 1000, lasting = 0 } = {}) {
  const store = new InMemoryCoordinator({ leaseMs: LEASE_MS });
  const runs: Run[] = [];
  /** The leaseAcquired and leaseLost events of each replica, in order. */
  const events: string[] = [];
  const replicas = new Map<string, { schedulers: PeriodicScheduler[]; link: Link }>();
  const names = (count: number, prefix = 'job') => Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  return {
    runs,
    events,
    names,
    /** Starts a replica of the jobs `only` (all `jobs` by default). */
    start(replica: string, only = names(jobs)) {
      const link = new Link(store);
      const fleetReplica = new Replica(
        new StoreLog(link, { error: () => undefined, log: () => undefined }),
        replica,
      );
      const schedulers = only.map(
        (job) =>
          new PeriodicScheduler(
            {
              name: job,
              every,
              exclusive: true,
              coordinator: link,
              run: async ({ scheduledDate }) => {
                const run = { job, replica, slot: scheduledDate.getTime(), from: Date.now(), to: Infinity };
                runs.push(run);
                if (lasting > 0) await new Promise((resolve) => setTimeout(resolve, lasting));
                run.to = Date.now();
              },
            },
            (event) => {
              if (event.type === 'leaseAcquired') events.push(`${replica} acquired ${job}`);
              if (event.type === 'leaseLost') events.push(`${replica} lost ${job}: ${event.reason}`);
            },
            { replica: fleetReplica },
          ),
      );
      for (const scheduler of schedulers) scheduler.start();
      replicas.set(replica, { schedulers, link });
    },
    /** Closes a replica as `app.close()` does: drained, its leases released. */
    async stop(replica: string) {
      await Promise.all(replicas.get(replica)!.schedulers.map((scheduler) => scheduler.stop()));
      replicas.delete(replica);
    },
    /** A replica dies: it ticks no more, and its leases expire in the store, never released. */
    kill(replica: string) {
      const { schedulers, link } = replicas.get(replica)!;
      link.cut = true;
      for (const scheduler of schedulers) void scheduler.stop();
      replicas.delete(replica);
    },
    /** How many leases each live replica holds, by replica. */
    held(): Map<string, number> {
      const counts = new Map<string, number>();
      for (const [replica, { schedulers }] of replicas) {
        counts.set(replica, schedulers.filter((scheduler) => scheduler.status().lease?.held).length);
      }
      return counts;
    },
    /** The replicas holding each job's lease now. */
    holders(): Map<string, string[]> {
      const holders = new Map<string, string[]>();
      for (const [replica, { schedulers }] of replicas) {
        for (const scheduler of schedulers) {
          if (!scheduler.status().lease?.held) continue;
          holders.set(scheduler.name, [...(holders.get(scheduler.name) ?? []), replica]);
        }
      }
      return holders;
    },
    heartbeats: (replica: string) => replicas.get(replica)!.link.heartbeats,
    /** Closes every replica, with time for the runs in flight to end. */
    async stopAll() {
      const stopped = Promise.all([...replicas.keys()].map((replica) => this.stop(replica)));
      await advance(lasting);
      await stopped;
    },
  };
}

async function advance(ms: number): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
  await flush();
}

/** Each of `counts` is within 10% + 1 of an even share of `total`. */
function expectEven(counts: Map<string, number>, total: number): void {
  const share = total / counts.size;
  for (const count of counts.values()) {
    expect(count).toBeGreaterThanOrEqual(Math.floor(share * 0.9) - 1);
    expect(count).toBeLessThanOrEqual(Math.ceil(share * 1.1) + 1);
  }
  expect([...counts.values()].reduce((sum, count) => sum + count, 0)).toBe(total);
}

/** For each job: no slot ran twice, and consecutive runs are `every` apart unless `gaps` allows more. */
function expectEverySlotOnce(
  runs: Run[],
  every: number,
  gaps: (job: string, slot: number) => boolean = () => false,
): void {
  for (const [job, ofJob] of byJob(runs)) {
    const slots = ofJob.map((run) => run.slot).sort((a, b) => a - b);
    for (let i = 1; i < slots.length; i++) {
      expect({ job, slot: slots[i], after: slots[i] - slots[i - 1] }).toEqual({
        job,
        slot: slots[i],
        after: gaps(job, slots[i]) ? expect.any(Number) : every,
      });
      expect(slots[i]).toBeGreaterThan(slots[i - 1]);
    }
  }
}

function byJob(runs: Run[]): Map<string, Run[]> {
  const jobs = new Map<string, Run[]>();
  for (const run of runs) jobs.set(run.job, [...(jobs.get(run.job) ?? []), run]);
  return jobs;
}

/** No two runs of one job overlap in time, in whatever replicas they ran. */
function expectNoOverlap(runs: Run[]): void {
  for (const ofJob of byJob(runs).values()) {
    const sorted = [...ofJob].sort((a, b) => a.from - b.from);
    for (let i = 1; i < sorted.length; i++) expect(sorted[i].from).toBeGreaterThanOrEqual(sorted[i - 1].to);
  }
}

describe('the spread of jobs over the replicas', () => {
  it('replicas that start one after another each hold N/R of the jobs within two lease periods, every slot run once', async () => {
    const jobs = fleet(200, { lasting: 300 });
    for (const replica of ['a', 'b', 'c', 'd']) {
      jobs.start(replica);
      await advance(INTERVAL);
    }
    await advance(2 * LEASE_MS);
    expectEven(jobs.held(), 200);
    expect([...jobs.holders().values()].every((holders) => holders.length === 1)).toBe(true);
    const settled = jobs.runs.length;
    await advance(10_000);
    // The runs of the last 10 s are spread as the leases are: about a quarter each.
    expectEven(
      new Map(
        ['a', 'b', 'c', 'd'].map((replica) => [
          replica,
          jobs.runs.slice(settled).filter((run) => run.replica === replica).length,
        ]),
      ),
      jobs.runs.length - settled,
    );
    await jobs.stopAll();
    // Every job ran every second from its first run: the handovers neither doubled nor dropped a slot.
    expectEverySlotOnce(jobs.runs, 1000);
    expectNoOverlap(jobs.runs);
  });

  it('a replica that joins takes its share as each job idles: no two replicas run a job at once', async () => {
    // Runs outlast the interval: a job handed over starts nothing more, and goes once its runs have ended.
    const jobs = fleet(60, { lasting: 1500 });
    jobs.start('a');
    await advance(5000);
    expect(jobs.held()).toEqual(new Map([['a', 60]]));
    jobs.start('b');
    await advance(2 * LEASE_MS);
    expectEven(jobs.held(), 60);
    await advance(5000);
    await jobs.stopAll();
    expect(jobs.runs.some((run) => run.replica === 'b')).toBe(true);
    // Each job b took, a said it no longer holds, before b took it.
    const handed = jobs.events.filter((event) => event.startsWith('b acquired'));
    expect(handed).toHaveLength(30);
    for (const event of handed) {
      const job = event.slice('b acquired '.length);
      const lost = jobs.events.indexOf(
        `a lost ${job}: handed over: the fleet's spread gives the job to another replica`,
      );
      expect(lost).toBeGreaterThanOrEqual(0);
      expect(lost).toBeLessThan(jobs.events.indexOf(event));
    }
    for (const ofJob of byJob(jobs.runs).values()) {
      // The runs of one replica may overlap (onOverlap: 'run'), those of two never.
      const a = ofJob.filter((run) => run.replica === 'a');
      for (const run of ofJob.filter((run) => run.replica === 'b')) {
        expect(a.every((other) => other.to <= run.from || run.to <= other.from)).toBe(true);
      }
      const slots = ofJob.map((run) => run.slot);
      expect(new Set(slots).size).toBe(slots.length);
    }
  });

  it('a replica that closes: the others take its jobs at their next heartbeat, and spread them evenly', async () => {
    const jobs = fleet(90, { every: 2000 });
    for (const replica of ['a', 'b', 'c']) jobs.start(replica);
    await advance(2 * LEASE_MS);
    expectEven(jobs.held(), 90);
    await jobs.stop('c');
    // Their next heartbeat finds c gone, and takes its jobs at once; the others' shares grew, which may move a
    // few jobs between them, taken at the next quick heartbeat (leaseMs / 24).
    await advance(INTERVAL + INTERVAL / 8 + 10);
    expectEven(jobs.held(), 90);
    await advance(10_000);
    await jobs.stopAll();
    // Taken within leaseMs / 3, less than a slot: none was lost.
    expectEverySlotOnce(jobs.runs, 2000);
  });

  it('a replica that dies: the others hold its jobs within leaseMs + leaseMs / 3, and no slot runs twice', async () => {
    const jobs = fleet(90);
    for (const replica of ['a', 'b', 'c']) jobs.start(replica);
    await advance(2 * LEASE_MS);
    const died = Date.now();
    jobs.kill('c');
    await advance(LEASE_MS + INTERVAL + 10);
    expectEven(jobs.held(), 90);
    await advance(5000);
    await jobs.stopAll();
    // The slots of the jobs of c that passed while its leases ran out were dropped (one run, late, and missed),
    // never run twice.
    expectEverySlotOnce(
      jobs.runs,
      1000,
      (_, slot) => slot > died && slot <= died + LEASE_MS + INTERVAL + 1000,
    );
    expectNoOverlap(jobs.runs);
  });

  it('replicas with other jobs (two versions in a rolling deploy) each spread their own: every job is held once', async () => {
    const jobs = fleet(40);
    jobs.start('old-1');
    jobs.start('old-2');
    await advance(2 * LEASE_MS);
    // The new version has ten more jobs.
    jobs.start('new-1', [...jobs.names(40), ...jobs.names(10, 'added')]);
    await advance(2 * LEASE_MS);
    const holders = jobs.holders();
    expect(holders.size).toBe(50);
    expect([...holders.values()].every((replicas) => replicas.length === 1)).toBe(true);
    for (const added of jobs.names(10, 'added')) expect(holders.get(added)).toEqual(['new-1']);
    // The old replicas go; the new one takes everything.
    await jobs.stop('old-1');
    await jobs.stop('old-2');
    await advance(INTERVAL + 10);
    expect(jobs.held()).toEqual(new Map([['new-1', 50]]));
    await jobs.stopAll();
    expectEverySlotOnce(jobs.runs, 1000);
  });

  it('the heartbeats of a replica do not grow with its number of jobs', async () => {
    const heartbeats = async (count: number) => {
      const jobs = fleet(count);
      jobs.start('a');
      jobs.start('b');
      await advance(2 * LEASE_MS);
      const before = jobs.heartbeats('a') + jobs.heartbeats('b');
      await advance(30_000);
      const after = jobs.heartbeats('a') + jobs.heartbeats('b');
      await jobs.stopAll();
      return after - before;
    };
    // One heartbeat every leaseMs / 3 per replica, whatever its jobs. (The claims of the ticks of one instant
    // share a write too, on real timers: real-timers.spec.ts.)
    expect(await heartbeats(4)).toBe(2 * 30);
    expect(await heartbeats(400)).toBe(2 * 30);
  });
});
