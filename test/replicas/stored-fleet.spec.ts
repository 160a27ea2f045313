// Stored schedules (SPEC 23) on real stores: replicas of an application, each with its own connection, create,
// edit and remove schedules; every replica applies each change within leaseMs (a notification of the store
// wakes it), each slot runs once for the fleet, the schedules outlive every replica, and a replica without the
// handler never takes the lease.
import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { type PeriodicContext, PeriodicHandler, PeriodicModule } from '../../lib/index.js';
import { type TestApp, until, useApps } from '../nest/helpers.js';
import { describeWithPostgres } from '../postgres/postgres.js';
import { describeWithRedis } from '../redis/redis.js';
import { type ConnectedStore, postgresStore, redisStore } from './connections.js';

const LEASE_MS = 1500;
/**
 * How long a test waits for a change to reach another replica: it comes within leaseMs (a notification, or the
 * count its heartbeat reads every leaseMs / 3), and a loaded machine's pauses come on top.
 */
const SEEN_WITHIN = 4 * LEASE_MS;

const stores: [string, (leaseMs: number) => ConnectedStore, (name: string, tests: () => void) => void][] = [
  ['Redis', redisStore, await describeWithRedis()],
  ['PostgreSQL', postgresStore, await describeWithPostgres()],
];

interface Ran {
  replica: string;
  name: string;
  slot: number;
  data: unknown;
}

describe.each(stores)('stored schedules on %s', (_, makeStore, describeStore) => {
  describeStore('replicas of one application', () => {
    const createApp = useApps();
    let store: ConnectedStore;
    let ran: Ran[];
    afterEach(async () => {
      await store?.cleanUp();
    });

    async function replica(name: string, handler = 'tenant-report'): Promise<TestApp> {
      const runs = ran;
      @Injectable()
      class Reports {
        @PeriodicHandler(handler)
        send(ctx: PeriodicContext): void {
          runs.push({ replica: name, name: ctx.name, slot: ctx.scheduledDate.getTime(), data: ctx.data });
        }
      }
      return createApp({
        imports: [PeriodicModule.forRoot({ coordinator: store.coordinator(), replica: name, logger: false })],
        providers: [Reports],
      });
    }

    it('a change on one replica reaches the other within leaseMs; each slot runs once, with the latest data', async () => {
      store = makeStore(LEASE_MS);
      ran = [];
      const [a, b] = [await replica('a'), await replica('b')];
      const written = performance.now();
      await a.registry.schedules.upsert(
        { name: 'report:acme', handler: 'tenant-report', every: 500, data: { n: 1 } },
        { by: 'alice' },
      );
      await until(() => (b.registry.has('report:acme') ? true : undefined), SEEN_WITHIN);
      const seenIn = performance.now() - written;
      await until(
        () => (ran.filter((run) => run.name === 'report:acme').length >= 4 ? true : undefined),
        20_000,
      );
      const updated = await b.registry.schedules.upsert(
        { name: 'report:acme', handler: 'tenant-report', every: 500, data: { n: 2 } },
        { ifVersion: 1 },
      );
      expect(updated).toMatchObject({ version: 2, data: { n: 2 }, updatedBy: null });
      await until(() => (ran.some((run) => (run.data as { n: number }).n === 2) ? true : undefined), 20_000);
      // Each slot once for the fleet, whichever replica ran it.
      const slots = ran.filter((run) => run.name === 'report:acme').map((run) => run.slot);
      expect(new Set(slots).size).toBe(slots.length);
      expect((await a.registry.audit('report:acme')).map((entry) => [entry.action, entry.by])).toEqual([
        ['update', null],
        ['create', 'alice'],
      ]);
      expect(await b.registry.schedules.remove('report:acme', { ifVersion: 2 })).toBe(true);
      await until(() => (a.registry.has('report:acme') ? undefined : true), SEEN_WITHIN);
      console.log(
        `${_}: a new schedule was seen by the other replica in ${Math.round(seenIn)} ms (leaseMs ${LEASE_MS})`,
      );
    }, 60_000);

    it('schedules outlive every replica; a replica without the handler never takes the lease', async () => {
      store = makeStore(LEASE_MS);
      ran = [];
      const a = await replica('a');
      await a.registry.schedules.upsertMany(
        Array.from({ length: 20 }, (_, i) => ({
          name: `report:t${i}`,
          handler: 'tenant-report',
          every: 400,
          data: { tenant: i },
        })),
      );
      await a.close();
      // An older replica, without the handler: it has the jobs, and runs none.
      const old = await replica('old', 'sync');
      await until(() => (old.registry.has('report:t19') ? true : undefined), SEEN_WITHIN);
      const missing = await until(async () => {
        const status = await old.registry.fleetStatus('report:t0');
        return status.handlerMissing;
      }, LEASE_MS * 3);
      expect(missing).toEqual(['old']);
      const b = await replica('b');
      await until(
        () =>
          new Set(ran.filter((run) => run.replica === 'b').map((run) => run.name)).size === 20
            ? true
            : undefined,
        20_000,
      );
      expect(ran.filter((run) => run.replica === 'old')).toEqual([]);
      expect((await b.registry.fleetStatus('report:t0')).handlerMissing).toBeUndefined();
      expect(old.registry.status('report:t0').lease).toMatchObject({ held: false });
    }, 60_000);
  });
});
