// The lease state machine and exclusive jobs, on fake timers, against a store that keeps leases in memory
// the way the Lua scripts keep them in Redis. Real Redis is in test/redis.
import { describe, expect, it, jest } from '@jest/globals';
import { now } from '../../lib/scheduler/deadline-timer.js';
import { PeriodicAbortError } from '../../lib/scheduler/errors.js';
import type { PeriodicSchedulerOptions } from '../../lib/scheduler/options.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import { deferred, EventLog, flush, honouringRun, useFakeTimers } from './helpers.js';

useFakeTimers();

const LEASE_MS = 3000;
/** `leaseMs / 3`: renewals, and the longest wait between two attempts to acquire. */
const INTERVAL = 1000;
/** `leaseMs / 10`: the holder stops counting the lease valid this long before Redis lets it expire. */
const MARGIN = 300;

type Op = 'acquire' | 'renew' | 'release';

/** The in-memory coordinator on the fake clock, recording every call; it can fail or hang like a store away. */
class FlakyStore extends InMemoryCoordinator {
  readonly calls: { op: Op; token: string; at: number }[] = [];
  state: 'up' | 'down' | 'hanging' = 'up';
  private readonly hung: (() => void)[] = [];

  constructor() {
    super({ leaseMs: LEASE_MS });
  }

  override acquire(name: string, token: string): Promise<number> {
    return this.answer('acquire', token, () => super.acquire(name, token));
  }

  override renew(name: string, token: string): Promise<boolean> {
    return this.answer('renew', token, () => super.renew(name, token));
  }

  override release(name: string, token: string): Promise<boolean> {
    return this.answer('release', token, () => super.release(name, token));
  }

  /** The token holding `name` now, if any. */
  override holder(name: string): string | undefined {
    return super.holder(name);
  }

  /** Another replica takes the lease, as if this one's had expired in the store. */
  steal(name: string): void {
    this.leases.set(name, { owner: 'someone-else', expiresAt: now() + 10 * LEASE_MS });
  }

  /** Commands held while hanging are carried out now. */
  resume(): void {
    this.state = 'up';
    for (const carryOut of this.hung.splice(0)) carryOut();
  }

  of(op: Op): { op: Op; token: string; at: number }[] {
    return this.calls.filter((call) => call.op === op);
  }

  private answer<T>(op: Op, token: string, command: () => Promise<T>): Promise<T> {
    this.calls.push({ op, token, at: now() });
    if (this.state === 'down') return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    if (this.state === 'hanging') {
      return new Promise((resolve) => this.hung.push(() => resolve(command())));
    }
    return command();
  }
}

type Options = Omit<PeriodicSchedulerOptions, 'name' | 'run' | 'coordinator'> &
  Partial<Pick<PeriodicSchedulerOptions, 'run'>>;

/** A started replica of the exclusive job "job". */
function replica(store: FlakyStore, options: Options) {
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
  );
  scheduler.start();
  return { scheduler, log, contexts };
}

async function advance(ms: number): Promise<void> {
  await jest.advanceTimersByTimeAsync(ms);
  await flush();
}

describe('acquiring', () => {
  it('acquires at start: leaseAcquired with a fencing token, and every run carries it', async () => {
    const store = new FlakyStore();
    const { log, contexts } = replica(store, { every: 100 });
    await flush();
    const [{ fencingToken }] = log.of('leaseAcquired');
    // At least the store's clock in microseconds, so that tokens grow even across a loss of the store's data.
    expect(fencingToken).toBeGreaterThanOrEqual(Date.now() * 1000);
    await advance(300);
    expect(contexts.map((context) => context.fencingToken)).toEqual([
      fencingToken,
      fencingToken,
      fencingToken,
    ]);
    expect(store.holder('job')).toBe(store.of('acquire')[0].token);
  });

  it('each acquisition has a fresh random token', async () => {
    const store = new FlakyStore();
    const a = replica(store, { every: 100 });
    const b = replica(store, { every: 100 });
    await flush();
    await advance(5 * INTERVAL);
    const tokens = store.of('acquire').map((call) => call.token);
    expect(new Set(tokens).size).toBe(tokens.length);
    expect(tokens[0]).toMatch(/^[0-9a-f-]{36}$/);
    await Promise.all([a.scheduler.stop(), b.scheduler.stop()]);
  });

  it('a replica without the lease starts nothing, evaluates no guard and emits only nextTick', async () => {
    const store = new FlakyStore();
    const holder = replica(store, { every: 100 });
    await flush();
    const when = jest.fn(() => true);
    const other = replica(store, { every: 100, when });
    await advance(1000);
    expect(holder.contexts).toHaveLength(10);
    expect(other.contexts).toHaveLength(0);
    expect(when).not.toHaveBeenCalled();
    expect(new Set(other.log.types())).toEqual(new Set(['nextTick']));
  });

  it('a replica without the lease emits no missed for a late tick (only nextTick)', async () => {
    const store = new FlakyStore();
    const holder = replica(store, { every: 100 });
    await flush();
    const other = replica(store, { every: 100 });
    // Both replicas' clocks jump three intervals ahead before their first tick, as after a stalled process.
    const fakeNow = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + 350);
    await advance(100);
    expect(holder.log.of('missed')).toEqual([expect.objectContaining({ count: 3 })]);
    expect(new Set(other.log.types())).toEqual(new Set(['nextTick']));
  });

  it('in shifted mode a tick without the lease arms the next one', async () => {
    const store = new FlakyStore();
    replica(store, { every: 100 });
    await flush();
    const other = replica(store, { every: 100, delayMode: 'shifted' });
    await advance(1000);
    expect(other.log.of('nextTick')).toHaveLength(11);
  });

  it('a replica without the lease tries again between 0.7 and 0.95 of leaseMs / 3 later', async () => {
    const store = new FlakyStore();
    replica(store, { every: 100 });
    await flush();
    const random = jest.spyOn(Math, 'random');
    random.mockReturnValue(0);
    const other = replica(store, { every: 100 });
    await flush();
    const start = now();
    // Each answer draws the wait before the next attempt.
    random.mockReturnValue(0.9999999);
    await advance(700);
    random.mockReturnValue(0.5);
    await advance(950);
    await advance(825);
    const attempts = store.of('acquire').slice(1);
    expect(attempts.map((call) => call.at - start)).toEqual([0, 700, 700 + 950, 700 + 950 + 825]);
    expect(other.contexts).toHaveLength(0);
  });

  it('takes over once the holder stops, and its fencing token is larger', async () => {
    const store = new FlakyStore();
    const first = replica(store, { every: 100 });
    await flush();
    const second = replica(store, { every: 100 });
    await advance(500);
    await first.scheduler.stop();
    expect(store.holder('job')).toBeUndefined();
    await advance(INTERVAL + 100);
    const [taken] = second.log.of('leaseAcquired');
    expect(taken.fencingToken).toBeGreaterThan(first.log.of('leaseAcquired')[0].fencingToken);
    expect(second.contexts.length).toBeGreaterThan(0);
    expect(second.contexts.every((context) => context.fencingToken === taken.fencingToken)).toBe(true);
  });

  it('an answer that comes after the lease would be counted valid is given back, not used', async () => {
    const store = new FlakyStore();
    store.state = 'hanging';
    const { log, contexts } = replica(store, { every: 100 });
    await advance(LEASE_MS - MARGIN);
    store.resume();
    await flush();
    expect(log.of('leaseAcquired')).toEqual([]);
    expect(store.of('release').map((call) => call.token)).toEqual([store.of('acquire')[0].token]);
    expect(store.holder('job')).toBeUndefined();
    await advance(INTERVAL);
    expect(log.of('leaseAcquired')).toEqual([
      { type: 'leaseAcquired', name: 'job', fencingToken: expect.any(Number) },
    ]);
    expect(contexts.length).toBeGreaterThan(0);
  });

  it('one command at a time: while an acquire hangs, no other is sent', async () => {
    const store = new FlakyStore();
    store.state = 'hanging';
    replica(store, { every: 100 });
    await advance(5 * INTERVAL);
    expect(store.of('acquire')).toHaveLength(1);
  });
});

describe('renewing', () => {
  it('renews every leaseMs / 3 with the token it acquired with, and keeps the lease for good', async () => {
    const store = new FlakyStore();
    const { log, contexts } = replica(store, { every: 100 });
    await flush();
    await advance(10 * INTERVAL);
    const [acquired] = store.of('acquire');
    const renewals = store.of('renew');
    expect(renewals.map((call) => call.at - acquired.at)).toEqual(
      Array.from({ length: 10 }, (_, i) => (i + 1) * INTERVAL),
    );
    expect(renewals.every((call) => call.token === acquired.token)).toBe(true);
    expect(log.of('leaseLost')).toEqual([]);
    expect(contexts).toHaveLength(100);
  });

  it('a renewal refused (stale token) loses the lease: runs stopped with leaseLost, nothing starts', async () => {
    const store = new FlakyStore();
    const { log, contexts } = replica(store, { every: 100, run: honouringRun });
    await flush();
    await advance(150);
    expect(contexts).toHaveLength(1);
    // Another replica's token now holds the key: this one's is stale.
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

  it('a renewal that errors loses the lease at once; acquiring resumes once Redis answers', async () => {
    const store = new FlakyStore();
    const { log, contexts } = replica(store, { every: 100 });
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
    expect(store.of('acquire').length).toBeGreaterThan(10);
    // The key this replica held expired by itself in the meantime.
    store.state = 'up';
    await advance(INTERVAL);
    const [first, second] = log.of('leaseAcquired').map((event) => event.fencingToken);
    expect(second).toBeGreaterThan(first);
    expect(contexts.length).toBeGreaterThan(before);
    expect(contexts.at(-1)!.fencingToken).toBe(second);
  });

  it('a renewal that hangs loses the lease at sent + leaseMs − margin, not a moment before', async () => {
    const store = new FlakyStore();
    const { log, scheduler } = replica(store, { every: 100 });
    await flush();
    const acquiredAt = store.of('acquire')[0].at;
    store.state = 'hanging';
    await advance(acquiredAt + LEASE_MS - MARGIN - 1 - now());
    expect(log.of('leaseLost')).toEqual([]);
    const started = log.of('started').length;
    await advance(1);
    expect(log.of('leaseLost')).toEqual([
      { type: 'leaseLost', name: 'job', reason: 'no renewal succeeded before the lease ran out' },
    ]);
    // Redis still holds the key for another margin: this replica stopped first.
    expect(store.holder('job')).toBe(store.of('acquire')[0].token);
    await advance(5 * INTERVAL);
    expect(log.of('started')).toHaveLength(started);
    expect(scheduler.running).toBe(0);
  });

  it('a late success of a renewal made before the lease was lost is ignored', async () => {
    const store = new FlakyStore();
    const { log } = replica(store, { every: 100 });
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
  it('renews nothing when it wakes: it gives the lease up, and another replica takes it at once', async () => {
    const store = new FlakyStore();
    const paused = replica(store, { every: 100 });
    await flush();
    const other = replica(store, { every: 100 });
    await advance(INTERVAL / 2);
    const renewals = store.of('renew').length;
    // The process is paused for 90% of the lease: on waking, its renewal and its expiry are both due, and
    // the store still has its lease for a little while.
    const fakeNow = performance.now.bind(performance);
    jest.spyOn(performance, 'now').mockImplementation(() => fakeNow() + LEASE_MS * 0.9);
    await advance(INTERVAL / 2);
    expect(store.of('renew')).toHaveLength(renewals);
    expect(paused.log.of('leaseLost')).toEqual([
      expect.objectContaining({ reason: expect.stringContaining('ran out before it could be renewed') }),
    ]);
    const pausedToken = store.of('acquire')[0].token;
    expect(store.of('release').map((call) => call.token)).toEqual([pausedToken]);
    expect(store.holder('job')).not.toBe(pausedToken);
    await advance(INTERVAL);
    expect(other.log.of('leaseAcquired')).toHaveLength(1);
  });
});

describe('releasing', () => {
  it('stop() drains the runs while renewing, then releases: the release comes after the last run ended', async () => {
    const store = new FlakyStore();
    const ending = deferred();
    const order: string[] = [];
    const { log, scheduler } = replica(store, {
      every: 100,
      run: () => ending.promise.then(() => void order.push('run ended')),
    });
    await flush();
    await advance(100);
    const stopped = scheduler.stop().then(() => order.push('stopped'));
    await advance(2 * INTERVAL);
    expect(store.of('renew')).toHaveLength(2);
    expect(store.of('release')).toHaveLength(0);
    ending.resolve();
    await stopped;
    order.push(`released: ${store.of('release').length}`);
    expect(order).toEqual(['run ended', 'stopped', 'released: 1']);
    expect(store.holder('job')).toBeUndefined();
    expect(log.of('leaseLost')).toEqual([]);
    expect(log.of('finished').map((event) => event.reason)).toEqual(['shutdown']);
  });

  it('a replica that stops stops competing: a lease acquired after stop() is given back', async () => {
    const store = new FlakyStore();
    store.state = 'hanging';
    const { log, scheduler } = replica(store, { every: 100 });
    await scheduler.stop();
    store.resume();
    await flush();
    expect(log.of('leaseAcquired')).toEqual([]);
    expect(store.holder('job')).toBeUndefined();
    await advance(5 * INTERVAL);
    expect(store.of('acquire')).toHaveLength(1);
  });

  it('stop() does not wait for a Redis that does not answer longer than leaseMs / 3', async () => {
    const store = new FlakyStore();
    const { scheduler } = replica(store, { every: 100 });
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
    const { log, scheduler, contexts } = replica(store, {
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
    const holder = replica(store, { every: 100, mode: 'manual' });
    const other = replica(store, { every: 100, mode: 'manual' });
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
    const { log, contexts, scheduler } = replica(store, {
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
    const { contexts, log } = replica(store, { every: 100, exclusive: false });
    await advance(100);
    expect(contexts).toHaveLength(1);
    expect(contexts[0].fencingToken).toBeUndefined();
    expect(store.calls).toEqual([]);
    expect(log.of('leaseAcquired')).toEqual([]);
  });
});
