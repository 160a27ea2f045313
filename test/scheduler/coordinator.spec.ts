// How the engine calls any coordinator: failures reported at most once per lease, their end once, and replies
// of the wrong type taken as failures, never as a lease. On fake timers, with a coordinator that fails on demand.
import { runInNewContext } from 'node:vm';
import { describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import { type PeriodicCoordinator } from '../../lib/scheduler/coordinator-port.js';
import { StoreLog } from '../../lib/scheduler/store-log.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { Replica } from '../../lib/scheduler/replica.js';
import { deferred, EventLog, flush, useFakeTimers } from './helpers.js';

useFakeTimers();

/** Leases in memory, or failures like an unreachable store's, or a reply of its own choosing. */
class FlakyCoordinator extends InMemoryCoordinator {
  down = true;
  calls = 0;
  error = new Error('connect ECONNREFUSED 127.0.0.1:6379');
  reply: unknown = undefined;

  override async acquire(name: string, owner: string): Promise<number> {
    this.calls++;
    if (this.down) throw this.error;
    return this.reply === undefined ? super.acquire(name, owner) : (this.reply as number);
  }
}

/** Where the failures of each coordinator are reported, as the Nest module gives its application's jobs. */
const storeLogs = new WeakMap<PeriodicCoordinator, StoreLog>();

/** A replica of the fleet of `coordinator`, reporting where the test set (process warnings by default). */
function replicaOf(coordinator: PeriodicCoordinator): Replica {
  return new Replica(storeLogs.get(coordinator) ?? new StoreLog(coordinator));
}

function exclusiveJob(coordinator: PeriodicCoordinator): EventLog {
  const log = new EventLog();
  new PeriodicScheduler(
    { name: 'job', every: 100, exclusive: true, coordinator, run: () => undefined },
    log.sink,
    { replica: replicaOf(coordinator) },
  ).start();
  return log;
}

function logTo(coordinator: PeriodicCoordinator) {
  const log = { error: jest.fn<(message: string) => void>(), log: jest.fn<(message: string) => void>() };
  storeLogs.set(coordinator, new StoreLog(coordinator, log));
  return log;
}

describe('failures of a coordinator', () => {
  it('are reported at most once per leaseMs, counting those in between; the end of them once', async () => {
    const coordinator = new FlakyCoordinator({ leaseMs: 300 });
    const log = logTo(coordinator);
    const events = exclusiveJob(coordinator);
    await flush();
    await jest.advanceTimersByTimeAsync(3000);
    // An attempt with each heartbeat, every 100 ms for 3 s, reported every 300 ms at most.
    expect(coordinator.calls).toBeGreaterThan(30);
    expect(log.error.mock.calls.length).toBeGreaterThanOrEqual(9);
    expect(log.error.mock.calls.length).toBeLessThanOrEqual(11);
    const [first, second] = log.error.mock.calls.map(([message]) => message);
    expect(first).toBe(
      'FlakyCoordinator failed while acquiring the lease of "job": connect ECONNREFUSED 127.0.0.1:6379. ' +
        'Exclusive jobs start no run until their lease is held again; the next report comes in 300ms at the earliest',
    );
    expect(second).toMatch(
      /^FlakyCoordinator failed while acquiring the lease of "job": connect ECONNREFUSED .*\(\d more failed since the last report\)\./,
    );
    expect(events.of('started')).toEqual([]);

    coordinator.down = false;
    await jest.advanceTimersByTimeAsync(200);
    expect(log.log.mock.calls).toEqual([
      ['FlakyCoordinator answers again: exclusive jobs run again once they hold their lease'],
    ]);
    expect(events.of('leaseAcquired')).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1000);
    expect(events.of('leaseAcquired')).toHaveLength(1);
    expect(events.of('leaseLost')).toEqual([]);
    expect(events.of('started').length).toBeGreaterThan(0);
    expect(log.log).toHaveBeenCalledTimes(1);
  });

  it('a store that fails one step of many (reads of the schedule) reports its recovery at most once per leaseMs', async () => {
    class ReadsFail extends InMemoryCoordinator {
      override async readSchedule(): Promise<null> {
        throw new Error('read ECONNRESET');
      }
    }
    const coordinator = new ReadsFail({ leaseMs: 300 });
    const log = logTo(coordinator);
    const events = exclusiveJob(coordinator);
    await flush();
    await jest.advanceTimersByTimeAsync(3000);
    // Every heartbeat acquires, then fails to read, and gives the lease back: the heartbeat fails as one step.
    expect(log.error.mock.calls.length).toBeGreaterThanOrEqual(9);
    expect(log.error.mock.calls.length).toBeLessThanOrEqual(11);
    expect(log.log.mock.calls.length).toBeLessThanOrEqual(log.error.mock.calls.length);
    expect(log.error.mock.calls[0][0]).toMatch(
      /^ReadsFail failed while acquiring the lease of "job": read ECONNRESET/,
    );
    expect(events.of('leaseAcquired')).toEqual([]);
  });

  it('a plain object is named "The coordinator" in the lines', async () => {
    const store = new InMemoryCoordinator({ leaseMs: 300 });
    const coordinator: PeriodicCoordinator = {
      leaseMs: 300,
      acquire: async () => {
        throw new Error('down');
      },
      renew: (name, owner) => store.renew(name, owner),
      release: (name, owner) => store.release(name, owner),
      readSchedule: (name) => store.readSchedule(name),
      writeSchedule: (...args) => store.writeSchedule(...args),
    };
    const log = { error: jest.fn<(message: string) => void>(), log: jest.fn<(message: string) => void>() };
    const scheduler = new PeriodicScheduler(
      { name: 'job', every: 100, exclusive: true, coordinator, run: () => undefined },
      () => undefined,
      { replica: new Replica(new StoreLog(coordinator, log)) },
    );
    scheduler.start();
    await flush();
    expect(log.error.mock.calls[0][0]).toMatch(
      /^The coordinator failed while acquiring the lease of "job": down\./,
    );
    await scheduler.stop();
  });

  it('the line reads as one sentence when the error message ends with a full stop', async () => {
    const coordinator = new FlakyCoordinator({ leaseMs: 300 });
    coordinator.error = new Error('Connection is closed.');
    const log = logTo(coordinator);
    exclusiveJob(coordinator);
    await flush();
    expect(log.error.mock.calls[0][0]).toMatch(
      /^FlakyCoordinator failed while acquiring the lease of "job": Connection is closed\. Exclusive jobs/,
    );
  });

  it("read an error of another realm (Node's own errors inside Jest) as an error: its message, no stack", async () => {
    const coordinator = new FlakyCoordinator({ leaseMs: 300 });
    coordinator.error = runInNewContext("new Error('connect ECONNREFUSED 127.0.0.1:5499')") as Error;
    const log = logTo(coordinator);
    exclusiveJob(coordinator);
    await flush();
    expect(log.error.mock.calls[0][0]).toMatch(
      /^FlakyCoordinator failed while acquiring the lease of "job": connect ECONNREFUSED 127\.0\.0\.1:5499\. Exclusive/,
    );
  });

  it('are not reported once the lease is released: a command still out when the job stopped fails quietly', async () => {
    const coordinator = new FlakyCoordinator({ leaseMs: 300 });
    const answer = deferred<never>();
    const heartbeat = jest.fn(() => answer.promise);
    coordinator.heartbeat = heartbeat;
    const log = logTo(coordinator);
    const scheduler = new PeriodicScheduler(
      { name: 'job', every: 100, exclusive: true, coordinator, run: () => undefined },
      () => undefined,
      { replica: replicaOf(coordinator) },
    );
    scheduler.start();
    await flush();
    expect(heartbeat).toHaveBeenCalledTimes(1);
    await scheduler.stop();
    answer.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    await flush();
    await jest.advanceTimersByTimeAsync(1000);
    expect(log.error).not.toHaveBeenCalled();
    expect(log.log).not.toHaveBeenCalled();
  });

  it('are process warnings (code PERIODIC_COORDINATOR) when no Nest logger is set', async () => {
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    exclusiveJob(new FlakyCoordinator({ leaseMs: 300 }));
    await flush();
    expect(warn).toHaveBeenCalledWith(
      expect.stringMatching(/^FlakyCoordinator failed while acquiring the lease of "job"/),
      { code: 'PERIODIC_COORDINATOR' },
    );
  });
});

describe('replies of the wrong type', () => {
  const replies: [string, unknown][] = [
    ['a string', '1'],
    ['a fraction', 1.5],
    ['a negative number', -1],
    ['beyond 2^53', 2 ** 53],
    ['null', null],
    ['an object', { token: 1 }],
  ];

  it.each(replies)('a token that is %s is a failure, never a lease', async (_, reply) => {
    const coordinator = new FlakyCoordinator({ leaseMs: 300 });
    coordinator.down = false;
    coordinator.reply = reply;
    const log = logTo(coordinator);
    const events = exclusiveJob(coordinator);
    await flush();
    await jest.advanceTimersByTimeAsync(500);
    expect(events.of('leaseAcquired')).toEqual([]);
    expect(events.of('started')).toEqual([]);
    expect(log.error.mock.calls[0][0]).toMatch(
      /heartbeat\(\) answered acquired\[0\]\.fencingToken .*, not a fencing token \(a safe integer > 0\)/,
    );
  });

  it.each(replies)(
    'a token that is %s is a failure of acquire() for a coordinator without the batched steps',
    async (_, reply) => {
      const store = new InMemoryCoordinator({ leaseMs: 300 });
      const coordinator: PeriodicCoordinator = {
        leaseMs: 300,
        acquire: async () => reply as number,
        renew: (name, owner) => store.renew(name, owner),
        release: (name, owner) => store.release(name, owner),
        readSchedule: (name) => store.readSchedule(name),
        writeSchedule: (...args) => store.writeSchedule(...args),
      };
      const log = logTo(coordinator);
      const events = exclusiveJob(coordinator);
      await flush();
      await jest.advanceTimersByTimeAsync(500);
      expect(events.of('leaseAcquired')).toEqual([]);
      expect(log.error.mock.calls[0][0]).toMatch(
        /acquire\(\) answered .*, not a fencing token \(a safe integer ≥ 0\)/,
      );
    },
  );

  it('a reply without the entries asked for names what is missing', async () => {
    const coordinator = new FlakyCoordinator({ leaseMs: 300 });
    coordinator.down = false;
    coordinator.heartbeat = async ({ member }) => ({ members: [member], renewed: [], acquired: [] });
    const log = logTo(coordinator);
    const events = exclusiveJob(coordinator);
    await flush();
    await jest.advanceTimersByTimeAsync(500);
    expect(events.of('leaseAcquired')).toEqual([]);
    expect(log.error.mock.calls[0][0]).toMatch(
      /heartbeat\(\) answered acquired \[\], not a holding or null per lease to take \(1\)/,
    );
  });
});
