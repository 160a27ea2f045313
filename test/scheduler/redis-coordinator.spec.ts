// How RedisCoordinator reports Redis failures, on fake timers with a client that fails on demand.
import { describe, expect, it, jest } from '@jest/globals';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { type RedisClient, RedisCoordinator } from '../../lib/scheduler/redis-coordinator.js';
import { EventLog, flush, useFakeTimers } from './helpers.js';

useFakeTimers();

/** Answers every script as Redis would for a lease no one else wants, or fails like an unreachable server. */
class FlakyClient implements RedisClient {
  down = true;
  calls = 0;
  private fencing = 0;

  eval(script: string, keys: number): Promise<unknown> {
    return this.evalsha(script, keys);
  }

  /** Acquire, the one script with two keys, gets the next fencing token; renew and release succeed. */
  evalsha(_sha1: string, keys: number): Promise<unknown> {
    this.calls++;
    if (this.down) return Promise.reject(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    return Promise.resolve(keys === 2 ? ++this.fencing : 1);
  }
}

function exclusiveJob(coordinator: RedisCoordinator): EventLog {
  const log = new EventLog();
  new PeriodicScheduler(
    { name: 'job', every: 100, exclusive: true, coordinator, run: () => undefined },
    log.sink,
  ).start();
  return log;
}

describe('failures of Redis', () => {
  it('the line reads as one sentence when the error message ends with a full stop', async () => {
    const client = new FlakyClient();
    client.evalsha = () => Promise.reject(new Error('Connection is closed.'));
    const coordinator = new RedisCoordinator({ client, leaseMs: 300 });
    const log = { error: jest.fn(), log: jest.fn() };
    coordinator.log = log;
    exclusiveJob(coordinator);
    await flush();
    expect(log.error.mock.calls[0][0]).toMatch(
      /^Redis failed while acquiring the lease of "job": Connection is closed\. Exclusive jobs/,
    );
  });

  it('are reported at most once per leaseMs, counting those in between; the end of them once', async () => {
    const client = new FlakyClient();
    const coordinator = new RedisCoordinator({ client, leaseMs: 300 });
    const log = { error: jest.fn(), log: jest.fn() };
    coordinator.log = log;
    const events = exclusiveJob(coordinator);
    await flush();
    await jest.advanceTimersByTimeAsync(3000);
    // An attempt every 70 to 95 ms for 3 s, reported every 300 ms at most.
    expect(client.calls).toBeGreaterThan(30);
    expect(log.error.mock.calls.length).toBeGreaterThanOrEqual(9);
    expect(log.error.mock.calls.length).toBeLessThanOrEqual(11);
    const [first, second] = log.error.mock.calls.map(([message]) => message);
    expect(first).toBe(
      'Redis failed while acquiring the lease of "job": connect ECONNREFUSED 127.0.0.1:6379. Exclusive jobs ' +
        'start no run until their lease is held again; the next report comes in 300ms at the earliest',
    );
    expect(second).toMatch(
      /^Redis failed while acquiring the lease of "job": connect ECONNREFUSED .*\(\d more failed since the last report\)\./,
    );
    expect(events.of('started')).toEqual([]);

    client.down = false;
    await jest.advanceTimersByTimeAsync(200);
    expect(log.log.mock.calls).toEqual([
      ['Redis answers again: exclusive jobs run again once they hold their lease'],
    ]);
    expect(events.of('leaseAcquired')).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1000);
    expect(events.of('leaseAcquired')).toHaveLength(1);
    expect(events.of('leaseLost')).toEqual([]);
    expect(events.of('started').length).toBeGreaterThan(0);
    expect(log.log).toHaveBeenCalledTimes(1);
  });

  it('are process warnings (code PERIODIC_COORDINATOR) when no Nest logger is set', async () => {
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    exclusiveJob(new RedisCoordinator({ client: new FlakyClient(), leaseMs: 300 }));
    await flush();
    expect(warn).toHaveBeenCalledWith(
      expect.stringMatching(/^Redis failed while acquiring the lease of "job"/),
      { code: 'PERIODIC_COORDINATOR' },
    );
  });
});
