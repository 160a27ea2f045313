// The leases of exclusive jobs, on fake timers, against a store that keeps them in memory the way the Lua
// scripts keep them in Redis: one heartbeat per replica every leaseMs / 3 renews and takes every lease of its
// jobs. Real Redis and PostgreSQL are in test/redis and test/postgres; the spread of jobs over replicas is in
// spread.spec.ts.
import { hostname } from 'node:os';
import { describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import {
  type PeriodicHeartbeat,
  type PeriodicHeartbeatReply,
  type PeriodicLeaseHeld,
  type PeriodicScheduleWrite,
  type PeriodicScheduleWritten,
} from '../../lib/scheduler/coordinator-port.js';
import { StoreLog } from '../../lib/scheduler/store-log.js';
import { now } from '../../lib/scheduler/deadline-timer.js';
import { PeriodicAbortError } from '../../lib/scheduler/errors.js';
import type { PeriodicSchedulerOptions } from '../../lib/scheduler/options.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { Lease, Replica } from '../../lib/scheduler/replica.js';
import { CLAIM_AHEAD_MS } from '../../lib/scheduler/slot-claims.js';
import { spreadOver } from '../../lib/scheduler/spread.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import { deferred, EventLog, flush, honouringRun, useFakeTimers } from './helpers.js';

useFakeTimers();

const LEASE_MS = 3000;
/** `leaseMs / 3`: the time between two heartbeats of a replica. */
const INTERVAL = 1000;
/** `leaseMs / 10`: the holder stops counting the lease valid this long before the store lets it expire. */
const MARGIN = 300;

interface Heartbeat {
  owner: string;
  at: number;
  renew: PeriodicLeaseHeld[];
  acquire: string[];
}

/** The in-memory coordinator on the fake clock, recording its batched steps; it can fail or hang like a store away. */
class FlakyStore extends InMemoryCoordinator {
  readonly heartbeats: Heartbeat[] = [];
  readonly releases: { owner: string; leases: PeriodicLeaseHeld[]; leave: boolean }[] = [];
  state: 'up' | 'down' | 'hanging' = 'up';
  /** Only heartbeats that take a lease hang, while the state is 'hanging'. */
  hangOnlyAcquiring = false;
  private readonly hung: (() => void)[] = [];

  constructor() {
    super({ leaseMs: LEASE_MS });
  }

  /** The jobs whose data the store refuses, as a database whose encoding cannot hold their names does. */
  readonly refusing = new Set<string>();
  /** What the heartbeat answers as `refused` instead of the jobs `refusing`, to try replies of the wrong shape. */
  refusedReply: unknown;

  override heartbeat(request: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply> {
    const { member, renew, acquire } = request;
    this.heartbeats.push({ owner: member.owner, at: now(), renew: [...renew], acquire: [...acquire] });
    const hangs = !this.hangOnlyAcquiring || acquire.length > 0;
    return this.answer(() => this.refuse(request), hangs);
  }

  /** The heartbeat of the jobs not refused, and the refused ones answered as refused. */
  private async refuse({ member, renew, acquire }: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply> {
    const accepted = (name: string) => !this.refusing.has(name);
    const reply = await super.heartbeat({
      member,
      renew: renew.filter(({ name }) => accepted(name)),
      acquire: acquire.filter(accepted),
    });
    const renewed = new Map(
      renew.filter(({ name }) => accepted(name)).map(({ name }, i) => [name, reply.renewed[i]]),
    );
    const acquired = new Map(acquire.filter(accepted).map((name, i) => [name, reply.acquired[i]]));
    const refused = [...renew.map(({ name }) => name), ...acquire]
      .filter((name) => !accepted(name))
      .map((name) => ({ name, error: `value too long for "${name}"` }));
    return {
      ...reply,
      renewed: renew.map(({ name }) => renewed.get(name) ?? false),
      acquired: acquire.map((name) => acquired.get(name) ?? null),
      refused: (this.refusedReply ?? refused) as PeriodicHeartbeatReply['refused'],
    };
  }

  override writeSchedules(
    owner: string,
    writes: PeriodicScheduleWrite[],
  ): Promise<PeriodicScheduleWritten[]> {
    return this.answer(() => super.writeSchedules(owner, writes), !this.hangOnlyAcquiring);
  }

  override releaseAll(owner: string, leases: PeriodicLeaseHeld[], leave: boolean): Promise<void> {
    this.releases.push({ owner, leases: [...leases], leave });
    return this.answer(() => super.releaseAll(owner, leases, leave), !this.hangOnlyAcquiring);
  }

  /** The owner holding `name` now, if any. */
  override holder(name: string): string | undefined {
    return super.holder(name);
  }

  /** Another replica takes the lease, as if this one's had expired in the store. */
  steal(name: string): void {
    this.leases.set(name, { owner: 'someone-else', expiresAt: now() + 10 * LEASE_MS });
  }

  /** The lease of `name` expires in the store. */
  expire(name: string): void {
    this.leases.delete(name);
  }

  /** Commands held while hanging are carried out now. */
  resume(): void {
    this.state = 'up';
    for (const carryOut of this.hung.splice(0)) carryOut();
  }

  of(owner: string): Heartbeat[] {
    return this.heartbeats.filter((heartbeat) => heartbeat.owner === owner);
  }

  private answer<T>(command: () => Promise<T>, hangs: boolean): Promise<T> {
    if (this.state === 'down') return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    if (this.state === 'hanging' && hangs) {
      return new Promise((resolve) => this.hung.push(() => resolve(command())));
    }
    return command();
  }
}

type Options = Omit<PeriodicSchedulerOptions, 'name' | 'run' | 'coordinator'> &
  Partial<Pick<PeriodicSchedulerOptions, 'run' | 'name'>>;

/** A replica of the fleet of `store` whose failures are expected, and not reported. */
function replicaOf(store: FlakyStore): Replica {
  return new Replica(new StoreLog(store, { error: () => undefined, log: () => undefined }));
}

/** Two replicas of `store`: the first is the one the fleet's spread gives the job "job" while both are live. */
function pair(store: FlakyStore): [Replica, Replica] {
  const [a, b] = [replicaOf(store), replicaOf(store)];
  return spreadOver(['job'], [a.owner, b.owner]).get('job') === a.owner ? [a, b] : [b, a];
}

/** A started exclusive job, "job" unless named, in `replica` (one of its own by default). */
function job(store: FlakyStore, options: Options, replica = replicaOf(store)) {
  const log = new EventLog();
  const contexts: PeriodicContext[] = [];
  const run = options.run ?? (() => undefined);
  const scheduler = new PeriodicScheduler(
    {
      name: 'job',
      exclusive: true,
      coordinator: store,
      ...options,
      run: (context) => {
        contexts.push(context);
        return run(context);
      },
    },
    log.sink,
    { replica },
  );
  scheduler.start();
  return { scheduler, log, contexts, replica };
}

async function advance(ms: number): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
  await flush();
}

describe('acquiring', () => {
  it('takes the lease at its second heartbeat, sent as soon as the first named the fleet; every run carries its token', async () => {
    const store = new FlakyStore();
    const { log, contexts, replica } = job(store, { every: 100 });
    await flush();
    const [first, second] = store.heartbeats;
    expect(first).toEqual({ owner: replica.owner, at: first.at, renew: [], acquire: [] });
    expect(second).toEqual({ owner: replica.owner, at: first.at, renew: [], acquire: ['job'] });
    const [{ fencingToken }] = log.of('leaseAcquired');
    // At least the store's clock in microseconds, so that tokens grow even across a loss of the store's data.
    expect(fencingToken).toBeGreaterThanOrEqual(Date.now() * 1000);
    await advance(300);
    expect(contexts.map((context) => context.fencingToken)).toEqual([
      fencingToken,
      fencingToken,
      fencingToken,
    ]);
    expect(store.holder('job')).toBe(replica.owner);
  });

  it('the owner of the leases is the replica session: its name (host:pid by default), then a fresh UUID', () => {
    const store = new FlakyStore();
    const [a, b] = [replicaOf(store), replicaOf(store)];
    const session = new RegExp(`^${hostname()}:${process.pid}/[0-9a-f-]{36}$`);
    expect(a.owner).toMatch(session);
    expect(b.owner).toMatch(session);
    expect(a.owner).not.toBe(b.owner);
    expect(new Replica(new StoreLog(store), 'api-7').owner).toMatch(/^api-7\/[0-9a-f-]{36}$/);
  });

  it('a replica the spread does not give the job asks for no lease, starts nothing, evaluates no guard and emits only nextTick', async () => {
    const store = new FlakyStore();
    const [first, second] = pair(store);
    const holder = job(store, { every: 100 }, first);
    await flush();
    const when = jest.fn(() => true);
    const other = job(store, { every: 100, when }, second);
    await advance(1000);
    expect(holder.contexts).toHaveLength(10);
    expect(other.contexts).toHaveLength(0);
    expect(when).not.toHaveBeenCalled();
    expect(new Set(other.log.types())).toEqual(new Set(['nextTick']));
    expect(store.of(second.owner).flatMap((heartbeat) => heartbeat.acquire)).toEqual([]);
  });

  it('a replica without the lease emits no missed for a late tick (only nextTick)', async () => {
    const store = new FlakyStore();
    const [first, second] = pair(store);
    const holder = job(store, { every: 100 }, first);
    await flush();
    const other = job(store, { every: 100 }, second);
    // Both replicas' clocks jump three intervals ahead before their first tick, as after a stalled process.
    const fakeNow = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + 350);
    await advance(100);
    expect(holder.log.of('missed')).toEqual([expect.objectContaining({ count: 3 })]);
    expect(new Set(other.log.types())).toEqual(new Set(['nextTick']));
  });

  it('in shifted mode a tick without the lease arms the next one', async () => {
    const store = new FlakyStore();
    const [first, second] = pair(store);
    job(store, { every: 100 }, first);
    await flush();
    const other = job(store, { every: 100, delayMode: 'shifted' }, second);
    await advance(1000);
    expect(other.log.of('nextTick')).toHaveLength(11);
  });

  it('one heartbeat every leaseMs / 3, at fixed times, whatever the number of jobs: it renews them all', async () => {
    const store = new FlakyStore();
    const replica = replicaOf(store);
    const jobs = Array.from({ length: 50 }, (_, i) => job(store, { name: `job-${i}`, every: 100 }, replica));
    await flush();
    const start = now();
    await advance(10 * INTERVAL);
    const beats = store.of(replica.owner);
    // The first names the fleet, the second takes the 50 leases, then one renews them every INTERVAL.
    expect(beats.map((beat) => beat.at - start)).toEqual(
      Array.from({ length: 12 }, (_, i) => Math.max(0, i - 1) * INTERVAL),
    );
    expect(beats[1].acquire).toHaveLength(50);
    for (const beat of beats.slice(2)) {
      expect(beat.renew).toHaveLength(50);
      expect(beat.acquire).toEqual([]);
    }
    expect(jobs.every(({ contexts }) => contexts.length === 100)).toBe(true);
  });

  it('takes over once the holder closes: the holder leaves the fleet, the other takes the lease at its next heartbeat, with a larger token', async () => {
    const store = new FlakyStore();
    const [first, second] = pair(store);
    const holder = job(store, { every: 100 }, first);
    await flush();
    const other = job(store, { every: 100 }, second);
    await advance(500);
    await holder.scheduler.stop();
    expect(store.holder('job')).toBeUndefined();
    expect(store.releases.at(-1)).toEqual({
      owner: first.owner,
      leases: [{ name: 'job', fencingToken: holder.log.of('leaseAcquired')[0].fencingToken }],
      leave: true,
    });
    const closed = now();
    await advance(INTERVAL);
    const [taken] = other.log.of('leaseAcquired');
    expect(taken.fencingToken).toBeGreaterThan(holder.log.of('leaseAcquired')[0].fencingToken);
    // The heartbeat that found the holder gone took the lease right after, with a second one.
    const acquiring = store.of(second.owner).find((beat) => beat.acquire.length > 0)!;
    expect(acquiring.at - closed).toBeLessThanOrEqual(INTERVAL);
    expect(other.contexts.length).toBeGreaterThan(0);
    expect(other.contexts.every((context) => context.fencingToken === taken.fencingToken)).toBe(true);
  });

  it('an answer that comes after the lease would be counted valid is given back, not used', async () => {
    const store = new FlakyStore();
    store.state = 'hanging';
    store.hangOnlyAcquiring = true;
    const { log, contexts, replica } = job(store, { every: 100 });
    await advance(LEASE_MS - MARGIN);
    store.resume();
    await flush();
    expect(log.of('leaseAcquired')).toEqual([]);
    expect(store.releases).toEqual([
      { owner: replica.owner, leases: [{ name: 'job', fencingToken: expect.any(Number) }], leave: false },
    ]);
    expect(store.holder('job')).toBeUndefined();
    await advance(INTERVAL);
    expect(log.of('leaseAcquired')).toEqual([
      { type: 'leaseAcquired', name: 'job', fencingToken: expect.any(Number) },
    ]);
    expect(contexts.length).toBeGreaterThan(0);
  });

  it('takes thousands of leases a thousand per heartbeat, each sent as soon as the one before is answered', async () => {
    const store = new FlakyStore();
    const replica = replicaOf(store);
    const jobs = Array.from({ length: 2500 }, (_, i) =>
      job(store, { name: `job-${i}`, every: 60_000 }, replica),
    );
    await advance(0);
    const beats = store.of(replica.owner);
    expect(beats.map((beat) => beat.acquire.length)).toEqual([0, 1000, 1000, 500]);
    expect(beats.map((beat) => beat.at)).toEqual([0, 0, 0, 0]);
    expect(jobs.filter(({ scheduler }) => scheduler.status().lease?.held)).toHaveLength(2500);
    await advance(INTERVAL);
    expect(
      store
        .of(replica.owner)
        .slice(4)
        .map((beat) => [beat.renew.length, beat.acquire.length]),
    ).toEqual([[2500, 0]]);
  });

  it('one heartbeat at a time: while one hangs, no other is sent', async () => {
    const store = new FlakyStore();
    store.state = 'hanging';
    job(store, { every: 100 });
    await advance(5 * INTERVAL);
    expect(store.heartbeats).toHaveLength(1);
  });
});

describe('claiming', () => {
  /** A store whose schedule writes are recorded by job name, and held while `gate` is set. */
  class GatedStore extends FlakyStore {
    readonly steps: string[][] = [];
    gate: Promise<void> | undefined;
    /** Steps of writes fail. */
    failing = false;

    override async writeSchedules(
      owner: string,
      writes: PeriodicScheduleWrite[],
    ): Promise<PeriodicScheduleWritten[]> {
      this.steps.push(writes.map(({ name }) => name));
      if (this.failing) throw new Error('the store is away');
      await this.gate;
      return super.writeSchedules(owner, writes);
    }
  }

  /** The lease of job `name` in `replica`. */
  const leaseOf = (replica: Replica, name: string) =>
    (replica as unknown as { leases: Map<string, Lease> }).leases.get(name)!;

  it('one step of claims out at a time: those that come meanwhile go together in the next', async () => {
    const store = new GatedStore();
    const replica = replicaOf(store);
    const started: string[] = [];
    // Further apart than CLAIM_AHEAD_MS: each tick claims its own slot.
    for (const name of ['a', 'b', 'c']) {
      job(store, { name, every: 1000, run: () => void started.push(name) }, replica);
      await advance(CLAIM_AHEAD_MS + 10);
    }
    // Each job's first write, of its grid, went out when it took its lease.
    expect(store.steps).toEqual([['a'], ['b'], ['c']]);
    await advance(1000 - 3 * (CLAIM_AHEAD_MS + 10) - 10);
    const gate = deferred();
    store.gate = gate.promise;
    // a's claim goes out at 1000 and hangs; b's and c's come at 1060 and 1120.
    await advance(2 * (CLAIM_AHEAD_MS + 10) + 20);
    expect(store.steps.slice(3)).toEqual([['a']]);
    expect(started).toEqual([]);
    gate.resolve();
    await flush();
    expect(store.steps.slice(3)).toEqual([['a'], ['b', 'c']]);
    expect(started).toEqual(['a', 'b', 'c']);
  });

  it('a step of claims takes along the slots due within CLAIM_AHEAD_MS; each runs at its own time', async () => {
    const store = new GatedStore();
    const replica = replicaOf(store);
    const started: [string, number][] = [];
    for (const name of ['a', 'b', 'c']) {
      job(store, { name, every: 1000, run: () => void started.push([name, Date.now()]) }, replica);
      await advance(20);
    }
    const first = Date.now() - 60 + 1000;
    await advance(first - Date.now());
    // a's tick at 1000 claims b's slot at 1020 and c's at 1040 with its own: one round trip for three.
    expect(store.steps.slice(3)).toEqual([['a', 'b', 'c']]);
    expect(started).toEqual([['a', first]]);
    await advance(40);
    expect(started).toEqual([
      ['a', first],
      ['b', first + 20],
      ['c', first + 40],
    ]);
    // c's slot is the fleet's last one, claimed before it came, and the next is a second later.
    expect(await store.readSchedule('c')).toMatchObject({ last: first + 40, next: first + 1040 });
    // The next second goes the same way.
    await advance(1000);
    expect(store.steps.slice(3)).toEqual([
      ['a', 'b', 'c'],
      ['a', 'b', 'c'],
    ]);
  });

  /**
   * Jobs a and b of one replica, every `every` ms, b's ticks 20 ms after a's; `before` runs once b has started.
   * Resolves 5 ms after a's first tick, whose step claimed b's first slot ahead (`slot`).
   */
  async function aheadOfB(every = 1000, before?: (b: ReturnType<typeof job>) => Promise<void>) {
    const store = new GatedStore();
    const replica = replicaOf(store);
    const a = job(store, { name: 'a', every }, replica);
    await advance(20);
    const b = job(store, { name: 'b', every }, replica);
    const slot = Date.now() + every;
    await before?.(b);
    await advance(every - 20 + 5);
    expect(store.steps.at(-1)).toEqual(['a', 'b']);
    return { store, replica, a, b, slot };
  }

  it('a slot claimed ahead whose job stops before it comes goes back to the fleet, due at its time', async () => {
    const { store, a, b, slot } = await aheadOfB();
    expect(await store.readSchedule('b')).toMatchObject({ last: slot, next: slot + 1000 });
    await b.scheduler.stop();
    expect(b.contexts).toEqual([]);
    expect(await store.readSchedule('b')).toMatchObject({ last: slot, next: slot });
    await a.scheduler.stop();
  });

  it('a slot claimed ahead of a lease handed over is given back, and runs in no tick meanwhile', async () => {
    const { store, replica, b, slot } = await aheadOfB();
    // The spread gives b to another member; b is idle, and gives its slot back in a round trip, during which
    // the slot comes.
    const lease = leaseOf(replica, 'b');
    lease.phase = 'handing';
    const gate = deferred();
    store.gate = gate.promise;
    lease.idle();
    await advance(20);
    gate.resolve();
    await advance(1);
    expect(b.contexts).toEqual([]);
    // The next holder runs it.
    expect(await store.readSchedule('b')).toMatchObject({ last: slot, next: slot });
    expect(store.holder('b')).toBeUndefined();
  });

  it.each(['pause', 'resume'] as const)(
    'a %s here after a slot was claimed ahead: its tick asks the store again',
    async (action) => {
      const { store, b } = await aheadOfB(1000, async ({ scheduler }) => {
        if (action === 'resume') await scheduler.pause();
      });
      await b.scheduler[action]();
      await advance(20);
      expect(store.steps.at(-1)).toEqual(['b']);
      expect(b.contexts.length).toBe(action === 'pause' ? 0 : 1);
      expect(b.scheduler.state).toBe(action === 'pause' ? 'paused' : 'ticking');
    },
  );

  it('a claim ahead that failed, the lease lost and taken again: the slot runs, late, under the new token', async () => {
    const store = new GatedStore();
    const replica = replicaOf(store);
    job(store, { name: 'a', every: 60_000 }, replica);
    await advance(20);
    const b = job(store, { name: 'b', every: 60_000 }, replica);
    const slot = Date.now() + 60_000;
    await advance(60_000 - 30);
    store.failing = true;
    await advance(15);
    expect(store.steps.at(-1)).toEqual(['a', 'b']);
    store.failing = false;
    // A renewal fails meanwhile (as a heartbeat's failure does): the lease is lost; b's slot comes while it is not
    // held.
    (replica as unknown as { lose(lease: Lease, reason: string): void }).lose(
      leaseOf(replica, 'b'),
      'failed',
    );
    await advance(20);
    expect(b.contexts).toEqual([]);
    // The store lets the lease go; this replica takes it again, and runs the slot that came meanwhile.
    store.expire('b');
    await advance(INTERVAL);
    expect(b.contexts.map((context) => context.scheduledDate.getTime())).toEqual([slot]);
  });

  it.each([
    ['jitter', { jitter: 10 }],
    ["delivery: 'atLeastOnce'", { delivery: 'atLeastOnce' as const }],
  ])('with %s, a tick claims its own slot, never ahead', async (_, options) => {
    const store = new GatedStore();
    const replica = replicaOf(store);
    job(store, { name: 'a', every: 1000 }, replica);
    await advance(20);
    job(store, { name: 'b', every: 1000, ...options }, replica);
    await advance(1020);
    expect(store.steps.slice(2)).toEqual([['a'], ['b']]);
  });

  it("a job's second write of one turn goes in the next step, checked against the first", async () => {
    const store = new GatedStore();
    const replica = replicaOf(store);
    const acquired = deferred();
    const lease = new Lease(replica, 'job', {
      leaseAcquired: () => acquired.resolve(),
      leaseLost: () => undefined,
      busy: false,
      givingUp: async () => undefined,
      fleetPaused: () => undefined,
      heedsPause: false,
      carry: () => undefined,
    });
    lease.start();
    await advance(0);
    await acquired.promise;
    const at = (last: number) => ({ grid: 'every 1000 regular', last, next: last + 1000 });
    const answers = await Promise.all([
      lease.writeSchedule(at(5000)),
      lease.writeSchedule(at(4000)),
      lease.writeSchedule(at(6000)),
    ]);
    expect(store.steps).toEqual([['job'], ['job'], ['job']]);
    expect(answers).toEqual([true, false, true]);
    expect(await store.readSchedule('job')).toEqual(at(6000));
  });
});

describe('renewing', () => {
  it('renews every leaseMs / 3 with the token it acquired, and keeps the lease for good', async () => {
    const store = new FlakyStore();
    const { log, contexts, replica } = job(store, { every: 100 });
    await flush();
    await advance(10 * INTERVAL);
    const [, acquiring, ...renewals] = store.of(replica.owner);
    const [{ fencingToken }] = log.of('leaseAcquired');
    expect(renewals.map((beat) => beat.at - acquiring.at)).toEqual(
      Array.from({ length: 10 }, (_, i) => (i + 1) * INTERVAL),
    );
    expect(renewals.every((beat) => beat.renew[0]?.fencingToken === fencingToken)).toBe(true);
    expect(log.of('leaseLost')).toEqual([]);
    expect(contexts).toHaveLength(100);
  });

  it('a renewal refused (another holds the lease) loses the lease: runs stopped with leaseLost, nothing starts', async () => {
    const store = new FlakyStore();
    const { log, contexts } = job(store, { every: 100, run: honouringRun });
    await flush();
    await advance(150);
    expect(contexts).toHaveLength(1);
    store.steal('job');
    await advance(INTERVAL - 150);
    expect(log.of('leaseLost')).toEqual([
      {
        type: 'leaseLost',
        name: 'job',
        reason: 'the store refused the renewal: the lease had expired or another replica holds it',
      },
    ]);
    expect((contexts[0].signal.reason as PeriodicAbortError).reason).toBe('leaseLost');
    const finished = log.of('finished');
    expect(finished).toHaveLength(contexts.length);
    expect(finished.every((event) => event.reason === 'leaseLost')).toBe(true);
    const types = log.types();
    expect(types.indexOf('leaseLost')).toBeLessThan(types.indexOf('finished'));
    const started = contexts.length;
    await advance(5 * INTERVAL);
    expect(contexts).toHaveLength(started);
  });

  it('a heartbeat that errors loses the leases it renews at once; taking them resumes once the store answers', async () => {
    const store = new FlakyStore();
    const { log, contexts, replica } = job(store, { every: 100 });
    await flush();
    await advance(INTERVAL - 50);
    store.state = 'down';
    await advance(50);
    expect(log.of('leaseLost')).toEqual([
      { type: 'leaseLost', name: 'job', reason: 'the renewal failed: connect ECONNREFUSED 127.0.0.1:6379' },
    ]);
    const before = contexts.length;
    await advance(10 * LEASE_MS);
    expect(contexts).toHaveLength(before);
    // One attempt per heartbeat, no more: a store that fails is not asked faster.
    const attempts = store.of(replica.owner).filter((beat) => beat.acquire.length > 0);
    expect(attempts.length).toBeGreaterThanOrEqual(29);
    expect(attempts.length).toBeLessThanOrEqual(31);
    // The lease this replica held expired by itself in the meantime.
    store.state = 'up';
    await advance(INTERVAL + 100);
    const [first, second] = log.of('leaseAcquired').map((event) => event.fencingToken);
    expect(second).toBeGreaterThan(first);
    expect(contexts.length).toBeGreaterThan(before);
    expect(contexts.at(-1)!.fencingToken).toBe(second);
  });

  it('a heartbeat that hangs loses the lease at sent + leaseMs − margin, not a moment before', async () => {
    const store = new FlakyStore();
    const { log, scheduler, replica } = job(store, { every: 100 });
    await flush();
    const acquiredAt = store.heartbeats[1].at;
    store.state = 'hanging';
    await advance(acquiredAt + LEASE_MS - MARGIN - 1 - now());
    expect(log.of('leaseLost')).toEqual([]);
    const started = log.of('started').length;
    await advance(1);
    expect(log.of('leaseLost')).toEqual([
      { type: 'leaseLost', name: 'job', reason: 'no renewal succeeded before the lease ran out' },
    ]);
    // The store still holds the lease for another margin: this replica stopped first.
    expect(store.holder('job')).toBe(replica.owner);
    await advance(5 * INTERVAL);
    expect(log.of('started')).toHaveLength(started);
    expect(scheduler.running).toBe(0);
  });

  it('a late success of a renewal made before the lease was lost is ignored', async () => {
    const store = new FlakyStore();
    const { log } = job(store, { every: 100 });
    await flush();
    store.state = 'hanging';
    await advance(LEASE_MS);
    expect(log.of('leaseLost')).toHaveLength(1);
    store.resume();
    await flush();
    expect(log.of('leaseAcquired')).toHaveLength(1);
    expect(log.of('leaseLost')).toHaveLength(1);
  });
});

describe('a holder paused past its lease', () => {
  it('renews nothing when it wakes: it gives the lease up, and takes it anew with a larger token', async () => {
    const store = new FlakyStore();
    const paused = job(store, { every: 100 });
    await flush();
    await advance(INTERVAL / 2);
    const renewals = store.heartbeats.filter((beat) => beat.renew.length > 0).length;
    // The process is paused for 90% of the lease: on waking, its heartbeat and its expiry are both due, and
    // the store still has its lease for a little while.
    const fakeNow = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + LEASE_MS * 0.9);
    await advance(INTERVAL / 2);
    expect(store.heartbeats.filter((beat) => beat.renew.length > 0)).toHaveLength(renewals);
    expect(paused.log.of('leaseLost')).toEqual([
      expect.objectContaining({ reason: 'no renewal succeeded before the lease ran out' }),
    ]);
    const [{ fencingToken }] = paused.log.of('leaseAcquired');
    expect(store.releases[0]).toEqual({
      owner: paused.replica.owner,
      leases: [{ name: 'job', fencingToken }],
      leave: false,
    });
    await advance(INTERVAL);
    const tokens = paused.log.of('leaseAcquired').map((event) => event.fencingToken);
    expect(tokens).toHaveLength(2);
    expect(tokens[1]).toBeGreaterThan(tokens[0]);
  });
});

describe('releasing', () => {
  it('stop() drains the runs while renewing, then releases: the release comes after the last run ended', async () => {
    const store = new FlakyStore();
    const ending = deferred();
    const order: string[] = [];
    const { log, scheduler } = job(store, {
      every: 100,
      run: () => ending.promise.then(() => void order.push('run ended')),
    });
    await flush();
    await advance(100);
    const stopped = scheduler.stop().then(() => order.push('stopped'));
    await advance(2 * INTERVAL);
    expect(store.heartbeats.filter((beat) => beat.renew.length > 0)).toHaveLength(2);
    expect(store.releases).toHaveLength(0);
    ending.resolve();
    await stopped;
    order.push(`released: ${store.releases.length}`);
    expect(order).toEqual(['run ended', 'stopped', 'released: 1']);
    expect(store.holder('job')).toBeUndefined();
    expect(log.of('leaseLost')).toEqual([]);
    expect(log.of('finished').map((event) => event.reason)).toEqual(['shutdown']);
  });

  it('a replica that stops stops competing: a lease taken after stop() is given back', async () => {
    const store = new FlakyStore();
    store.state = 'hanging';
    store.hangOnlyAcquiring = true;
    const { log, scheduler } = job(store, { every: 100 });
    await flush();
    await scheduler.stop();
    store.resume();
    await flush();
    expect(log.of('leaseAcquired')).toEqual([]);
    expect(store.holder('job')).toBeUndefined();
    await advance(5 * INTERVAL);
    expect(store.heartbeats.filter((beat) => beat.acquire.length > 0)).toHaveLength(1);
  });

  it('stop() does not wait for a store that does not answer longer than leaseMs / 3', async () => {
    const store = new FlakyStore();
    const { scheduler } = job(store, { every: 100 });
    await flush();
    store.state = 'hanging';
    let stopped = false;
    void scheduler.stop().then(() => (stopped = true));
    await advance(INTERVAL - 1);
    expect(stopped).toBe(false);
    await advance(1);
    expect(stopped).toBe(true);
  });

  it('a lease lost while runs drain does not start anything, and stop() still resolves', async () => {
    const store = new FlakyStore();
    const { log, scheduler, contexts } = job(store, {
      every: 100,
      run: honouringRun,
      jobShutdown: Infinity,
    });
    await flush();
    await advance(100);
    store.state = 'down';
    await scheduler.stop();
    expect(contexts).toHaveLength(1);
    expect(log.of('finished').map((event) => event.reason)).toEqual(['shutdown']);
  });
});

describe('exclusive runs', () => {
  it('manual mode: tick() without the lease is notLeaseHolder; with it, the run has the fencing token', async () => {
    const store = new FlakyStore();
    const [first, second] = pair(store);
    const holder = job(store, { every: 100, mode: 'manual' }, first);
    const other = job(store, { every: 100, mode: 'manual' }, second);
    await flush();
    await expect(other.scheduler.tick()).resolves.toEqual({ ok: false, error: 'notLeaseHolder' });
    await expect(other.scheduler.syncTick()).resolves.toEqual({ ok: false, error: 'notLeaseHolder' });
    expect(other.contexts).toEqual([]);
    await expect(holder.scheduler.syncTick()).resolves.toMatchObject({ ok: true, reason: 'normal' });
    expect(holder.contexts[0].fencingToken).toBe(holder.log.of('leaseAcquired')[0].fencingToken);
  });

  it('a lease lost while the guard is pending starts no run', async () => {
    const store = new FlakyStore();
    const guard = deferred<boolean>();
    const { log, contexts, scheduler } = job(store, {
      every: 100,
      mode: 'manual',
      when: () => guard.promise,
    });
    await flush();
    const tick = scheduler.tick();
    store.state = 'down';
    await advance(INTERVAL);
    expect(log.of('leaseLost')).toHaveLength(1);
    guard.resolve(true);
    await expect(tick).resolves.toEqual({ ok: false, error: 'jobNotStarted' });
    expect(contexts).toHaveLength(0);
    expect(log.of('started')).toEqual([]);
  });

  it('runs of a job that is not exclusive have no fencing token, even with a coordinator', async () => {
    const store = new FlakyStore();
    const { contexts, log } = job(store, { every: 100, exclusive: false });
    await advance(100);
    expect(contexts).toHaveLength(1);
    expect(contexts[0].fencingToken).toBeUndefined();
    expect(store.heartbeats).toEqual([]);
    expect(log.of('leaseAcquired')).toEqual([]);
  });
});

describe('a job whose data the store refuses', () => {
  function loggingReplica(store: FlakyStore) {
    const errors: string[] = [];
    const replica = new Replica(
      new StoreLog(store, { error: (line) => errors.push(line), log: () => undefined }),
    );
    return { replica, errors };
  }

  it('takes no lease and runs nowhere, said once per leaseMs with its name; the job beside it runs', async () => {
    const store = new FlakyStore();
    store.refusing.add('job');
    const { replica, errors } = loggingReplica(store);
    const refused = job(store, { every: 100 }, replica);
    const other = job(store, { name: 'other', every: 100 }, replica);
    await advance(3.5 * LEASE_MS);
    expect(refused.contexts).toEqual([]);
    expect(refused.log.of('leaseAcquired')).toEqual([]);
    expect(other.contexts.length).toBeGreaterThan(20);
    expect(errors).toHaveLength(4);
    expect(new Set(errors)).toEqual(
      new Set([
        'FlakyStore refused the data of job "job": value too long for "job". The job takes no lease, and ' +
          'starts no run, until the store accepts it; the other jobs go on (docs/replicas.md, "A job the store ' +
          'refuses")',
      ]),
    );
    // Refused is not unreachable: the store answers.
    expect(refused.scheduler.status().lease).toEqual({ held: false, fencingToken: null });
    store.refusing.clear();
    await advance(INTERVAL + 10);
    expect(refused.contexts.length).toBeGreaterThan(0);
  });

  it('a holder whose renewal the store refuses loses the lease, saying why', async () => {
    const store = new FlakyStore();
    const { log } = job(store, { every: 100 });
    await advance(INTERVAL - 50);
    store.refusing.add('job');
    await advance(100);
    expect(log.of('leaseLost')).toEqual([
      {
        type: 'leaseLost',
        name: 'job',
        reason: 'the store refused the job\'s data: value too long for "job"',
      },
    ]);
  });

  it('a reply whose refused jobs are of the wrong shape is a failure of the store, not a refusal', async () => {
    const store = new FlakyStore();
    store.refusedReply = [{ name: 'job' }];
    const { replica, errors } = loggingReplica(store);
    const { contexts } = job(store, { every: 100 }, replica);
    await advance(INTERVAL);
    expect(contexts).toEqual([]);
    expect(errors).toEqual([
      expect.stringContaining(
        "heartbeat() answered refused [ { name: 'job' } ], not an array of { name, error } of strings",
      ),
    ]);
  });
});
