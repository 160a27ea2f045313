// A store that lost the fleet's records (SPEC 22): restarted without persistence, flushed or truncated. Each
// replica that finds them gone at a heartbeat logs one error naming what was lost and emits `storeReset`, once
// per loss; a paused job then runs again, said rather than silent.
import { describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import type { PeriodicCoordinator } from '../../lib/scheduler/coordinator-port.js';
import { StoreLog } from '../../lib/scheduler/store-log.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import { Replica } from '../../lib/scheduler/replica.js';
import { advance, EventLog, useFakeTimers } from './helpers.js';

useFakeTimers();

const LEASE_MS = 3000;

/** A store whose data can be lost: every step goes to the in-memory store of the moment, which `lose()` replaces. */
function losableStore(): { coordinator: PeriodicCoordinator; lose(): void } {
  let store = new InMemoryCoordinator({ leaseMs: LEASE_MS });
  const coordinator = new Proxy({} as PeriodicCoordinator, {
    get: (_, key) => {
      const value = (store as unknown as Record<string | symbol, unknown>)[key];
      return typeof value === 'function' && key !== 'constructor' ? value.bind(store) : value;
    },
  });
  return { coordinator, lose: () => (store = new InMemoryCoordinator({ leaseMs: LEASE_MS })) };
}

/** A replica of `coordinator` named `name` running the job "job" every 100 ms, with what it logs and emits. */
function replicaOf(coordinator: PeriodicCoordinator, name: string) {
  const errors: string[] = [];
  const resets: string[][] = [];
  const replica = new Replica(
    new StoreLog(coordinator, { error: (line) => errors.push(line), log: () => {} }),
    name,
  );
  replica.onStoreReset = (lost) => resets.push(lost);
  const log = new EventLog();
  const scheduler = new PeriodicScheduler(
    { name: 'job', every: 100, exclusive: true, coordinator, run: () => undefined },
    log.sink,
    { replica, history: { keep: 10, errors: 'message' } },
  );
  scheduler.start();
  return { scheduler, log, errors, resets };
}

describe('a store that lost the fleet’s records', () => {
  it('is said once by every replica that knew them, naming what was lost; a paused job runs again', async () => {
    const { coordinator, lose } = losableStore();
    const replicas = [replicaOf(coordinator, 'r1'), replicaOf(coordinator, 'r2')];
    await advance(2 * LEASE_MS);
    await replicas[0].scheduler.pause({ by: 'alice', note: 'maintenance' });
    await advance(LEASE_MS);
    const started = () => replicas.reduce((sum, { log }) => sum + log.of('started').length, 0);
    const paused = started();
    await advance(LEASE_MS);
    expect(started()).toBe(paused);
    expect(replicas.flatMap(({ errors }) => errors)).toEqual([]);

    lose();
    await advance(3 * LEASE_MS);
    for (const { errors, resets } of replicas) {
      expect(resets).toEqual([['pauses', 'audit', 'history']]);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toMatch(
        /^InMemoryCoordinator lost the fleet's records \(pauses, audit, history\): the store restarted without persistence, or was flushed or truncated\. Jobs that the fleet had paused run again/,
      );
    }
    // The pause went with the records: the job runs again, and the audit trail starts over.
    expect(started()).toBeGreaterThan(paused);
    expect(await replicas[0].scheduler.audit()).toEqual([]);

    // Said once per loss: later heartbeats read the new records' name.
    await advance(3 * LEASE_MS);
    for (const { errors, resets } of replicas) {
      expect(errors).toHaveLength(1);
      expect(resets).toHaveLength(1);
    }
    await Promise.all(replicas.map(({ scheduler }) => scheduler.stop()));
  });

  it('a replica that first met the records after the loss says nothing', async () => {
    const { coordinator, lose } = losableStore();
    lose();
    const replica = replicaOf(coordinator, 'r1');
    await advance(3 * LEASE_MS);
    expect(replica.resets).toEqual([]);
    expect(replica.errors).toEqual([]);
    await replica.scheduler.stop();
  });

  it('a job given no replica emits storeReset through its own events', async () => {
    const warnings = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    const { coordinator, lose } = losableStore();
    const log = new EventLog();
    const scheduler = new PeriodicScheduler(
      { name: 'job', every: 100, exclusive: true, coordinator, run: () => undefined },
      log.sink,
    );
    scheduler.start();
    await advance(2 * LEASE_MS);
    lose();
    await advance(2 * LEASE_MS);
    expect(log.of('storeReset')).toEqual([{ type: 'storeReset', lost: ['pauses', 'audit', 'history'] }]);
    expect(
      warnings.mock.calls.filter(([message]) => String(message).includes('lost the fleet')),
    ).toHaveLength(1);
    await scheduler.stop();
  });
});
