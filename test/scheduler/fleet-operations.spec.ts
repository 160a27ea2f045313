// Operating an exclusive job for the whole fleet (SPEC 17, 18): a pause kept in the coordinator's store and
// obeyed by the holder at its next claim, whichever replica asked; the audit trail of pauses, resumes and
// triggers, read by any replica; and the same operations on a job that is not the fleet's, in memory.
import { describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import { PeriodicConfigError } from '../../lib/scheduler/errors.js';
import { advance, flush, startScheduler, twoReplicas, useFakeTimers } from './helpers.js';

useFakeTimers();

const LEASE_MS = 3000;

/** A store that can be taken down. */
class Store extends InMemoryCoordinator {
  down = false;

  constructor() {
    super({ leaseMs: LEASE_MS });
  }

  override async operate(...args: Parameters<InMemoryCoordinator['operate']>): Promise<void> {
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
    return super.operate(...args);
  }
}

/** Two replicas of `store` with the job "job" every 100 ms: the holder first. */
function fleet(store: Store) {
  return twoReplicas(store, { every: 100 });
}

describe("an exclusive job's pause is the fleet's", () => {
  it('a pause asked of the replica without the lease stops the holder at its next slot; a resume from the holder ends it', async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(1000);
    expect(holder.log.of('started').length).toBeGreaterThan(0);
    expect(other.log.of('started')).toEqual([]);

    await other.scheduler.pause({ by: 'alice', note: 'the API is down' });
    expect(await store.readPause('job')).toMatchObject({ action: 'pause', by: 'alice', replica: other.name });
    expect(other.scheduler.state).toBe('paused');
    const before = holder.log.of('started').length;
    await advance(1000);
    // The claim in flight when the pause landed may have started its run; none after it.
    expect(holder.log.of('started').length).toBeLessThanOrEqual(before + 1);
    expect(holder.scheduler.state).toBe('paused');
    const paused = holder.log.of('started').length;
    await advance(1000);
    expect(holder.log.of('started')).toHaveLength(paused);
    expect(holder.log.of('missed')).toEqual([]);
    // A trigger on the holder reads the pause, and starts nothing.
    expect(await holder.scheduler.trigger({ by: 'carol' })).toEqual({ ok: false, error: 'paused' });

    await holder.scheduler.resume({ by: 'bob' });
    expect(holder.scheduler.state).toBe('ticking');
    expect(await store.readPause('job')).toBeNull();
    await advance(1000);
    expect(holder.log.of('started').length).toBeGreaterThan(paused + 5);
    // The replica that paused the job, without the lease, learns of the resume at its next heartbeat.
    await advance(LEASE_MS / 3);
    expect(other.scheduler.state).toBe('ticking');
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });

  it('the audit trail is the fleet’s: every replica reads the same, newest first, and each operation is emitted as operated', async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(500);
    jest.setSystemTime(1_700_000_000_000);
    await other.scheduler.pause({ by: 'alice', note: 'maintenance' });
    await holder.scheduler.resume();
    await holder.scheduler.trigger({ by: 'bob' });
    await flush();
    const expected = [
      { name: 'job', action: 'trigger', by: 'bob', note: null, replica: holder.name },
      { name: 'job', action: 'resume', by: null, note: null, replica: holder.name },
      { name: 'job', action: 'pause', by: 'alice', note: 'maintenance', replica: other.name },
    ];
    for (const replica of [holder, other]) {
      const audit = await replica.scheduler.audit();
      expect(audit).toMatchObject(expected);
      expect(audit.every((entry) => entry.at.getTime() === 1_700_000_000_000)).toBe(true);
    }
    expect(await other.scheduler.audit({ limit: 1 })).toMatchObject([expected[0]]);
    expect(other.log.of('operated')).toEqual([
      { type: 'operated', ...expected[2], at: new Date(1_700_000_000_000) },
    ]);
    expect(holder.log.of('operated').map((event) => event.action)).toEqual(['resume', 'trigger']);
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });

  it('every replica says the job is paused within a heartbeat, whichever replica paused it, and resumed alike', async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(500);
    await holder.scheduler.pause();
    expect(other.scheduler.state).toBe('ticking');
    await advance(LEASE_MS / 3);
    expect(other.scheduler.state).toBe('paused');
    expect(other.log.of('started')).toEqual([]);
    // The replica that only heard of the pause hears of the resume too.
    await holder.scheduler.resume();
    await advance(LEASE_MS / 3);
    expect(other.scheduler.state).toBe('ticking');
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });

  it('a pause the store does not take rejects with what failed, and changes nothing', async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(500);
    store.down = true;
    await expect(other.scheduler.pause({ by: 'alice' })).rejects.toThrow(
      /^pause\(\) of job "job" failed: the coordinator's store did not take it \(connect ECONNREFUSED.*\); nothing changed/,
    );
    expect(other.scheduler.state).toBe('ticking');
    const before = holder.log.of('started').length;
    await advance(500);
    expect(holder.log.of('started').length).toBeGreaterThan(before);
    expect(other.log.of('operated')).toEqual([]);
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
  });

  it('a pause outlives every replica: one that starts later obeys it', async () => {
    const store = new Store();
    const [holder, other] = fleet(store);
    await advance(500);
    await holder.scheduler.pause();
    await Promise.all([holder.scheduler.stop(), other.scheduler.stop()]);
    const [next] = fleet(store);
    await advance(2000);
    expect(next.log.of('leaseAcquired')).toHaveLength(1);
    expect(next.log.of('started')).toEqual([]);
    expect(next.scheduler.state).toBe('paused');
    await next.scheduler.resume();
    await advance(500);
    expect(next.log.of('started').length).toBeGreaterThan(0);
    await next.scheduler.stop();
  });
});

describe('a job that is not the fleet’s', () => {
  it('pauses at once in this process; the audit trail is in memory, the latest 100; a trigger that starts nothing is not in it', async () => {
    const { scheduler, log } = startScheduler({ every: 100 });
    const pausing = scheduler.pause({ by: 'alice', note: 'deploy' });
    expect(scheduler.state).toBe('paused');
    await pausing;
    expect(await scheduler.trigger({ by: 'eve' })).toEqual({ ok: false, error: 'paused' });
    await scheduler.resume();
    for (let i = 0; i < 110; i++) await scheduler.trigger({ by: `user ${i}` });
    const audit = await scheduler.audit({ limit: 100 });
    expect(audit).toHaveLength(100);
    expect(audit[0]).toMatchObject({ action: 'trigger', by: 'user 109' });
    expect(audit.at(-1)).toMatchObject({ action: 'trigger', by: 'user 10' });
    expect(audit.some((entry) => entry.by === 'eve')).toBe(false);
    // A limit above the entries kept reads what is kept.
    expect(await scheduler.audit({ limit: 10_000 })).toEqual(audit);
    expect(log.of('operated')).toHaveLength(112);
    await scheduler.stop();
  });

  it('refuses options it does not know, or of the wrong type, naming the job, the option and the value', async () => {
    const { scheduler } = startScheduler({ every: 100 });
    await expect(scheduler.pause({ by: 42 } as never)).rejects.toThrow(PeriodicConfigError);
    await expect(scheduler.pause({ by: 42 } as never)).rejects.toThrow(/pause\(\) of job "job".*"by".*42/);
    await expect(scheduler.resume({ who: 'x' } as never)).rejects.toThrow(/unknown option "who"/);
    await expect(scheduler.trigger({ why: 'x' } as never)).rejects.toThrow(
      /unknown option "why".*The options are: by, note\./,
    );
    await expect(scheduler.audit({ limit: 0 })).rejects.toThrow(/"limit".*an integer from 1 to 10000,/);
    await expect(scheduler.pause({ note: 'a\u0000b' })).rejects.toThrow(/"note".*without U\+0000/);
    expect(scheduler.state).toBe('ticking');
    await scheduler.stop();
  });
});
