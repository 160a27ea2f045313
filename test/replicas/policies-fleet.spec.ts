// Schedule policies (SPEC 24) of exclusive jobs on the three stores, with two replicas of an application, each on
// a connection of its own: maxRuns counted for the fleet across a handover, and catchUp 'all' after the whole
// fleet was down, where the next holder runs every slot that passed, in order, once.
import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Periodic,
  type PeriodicContext,
  PeriodicHandler,
  PeriodicModule,
  type PeriodicOptions,
} from '../../lib/index.js';
import { type TestApp, until, useApps } from '../nest/helpers.js';
import { describeWithPostgres } from '../postgres/postgres.js';
import { describeWithRedis } from '../redis/redis.js';
import { type ConnectedStore, inMemoryStore, postgresStore, redisStore } from './connections.js';

const LEASE_MS = 1500;
const EVERY = 300;

const stores: [string, (leaseMs: number) => ConnectedStore, (name: string, tests: () => void) => void][] = [
  ['InMemoryCoordinator', inMemoryStore, describe],
  ['Redis', redisStore, await describeWithRedis()],
  ['PostgreSQL', postgresStore, await describeWithPostgres()],
];

interface Ran {
  replica: string;
  slot: number;
}

describe.each(stores)('schedule policies on %s', (_, makeStore, describeStore) => {
  describeStore('two replicas of one application', () => {
    const createApp = useApps();
    let store: ConnectedStore | undefined;
    afterEach(async () => {
      await store?.cleanUp();
      store = undefined;
    });

    async function replica(name: string, options: PeriodicOptions, ran: Ran[], runMs = 0): Promise<TestApp> {
      @Injectable()
      class Reports {
        @Periodic({ name: 'report', exclusive: true, ...options })
        async send(ctx: PeriodicContext): Promise<void> {
          ran.push({ replica: name, slot: ctx.scheduledDate.getTime() });
          if (runMs > 0) await sleep(runMs);
        }

        @PeriodicHandler('stored')
        stored(ctx: PeriodicContext): void {
          ran.push({ replica: name, slot: ctx.scheduledDate.getTime() });
        }
      }
      return createApp({
        imports: [
          PeriodicModule.forRoot({ coordinator: store!.coordinator(), replica: name, logger: false }),
        ],
        providers: [Reports],
      });
    }

    /** The replica of `apps` that holds the job's lease, once one does. */
    const holderOf = (apps: Map<string, TestApp>) =>
      until(() => [...apps].find(([, app]) => app.registry.status('report').lease?.held)?.[0]);

    it('maxRuns counts the slots of the fleet: a handover goes on from the count, and the job completes', async () => {
      store = makeStore(LEASE_MS);
      const ran: Ran[] = [];
      const options = { every: EVERY, maxRuns: 6 };
      const apps = new Map([
        ['a', await replica('a', options, ran)],
        ['b', await replica('b', options, ran)],
      ]);
      await until(() => (ran.length >= 3 ? true : undefined));
      const holder = await holderOf(apps);
      await apps.get(holder)!.close();
      apps.delete(holder);
      const [[other, next]] = [...apps];
      await until(() => (next.registry.status('report').state === 'completed' ? true : undefined), 20_000);
      await sleep(3 * EVERY);
      const slots = ran.map((run) => run.slot);
      expect(ran).toHaveLength(6);
      expect(new Set(slots).size).toBe(6);
      expect(new Set(ran.map((run) => run.replica))).toEqual(new Set(['a', 'b']));
      expect(ran.at(-1)!.replica).toBe(other);
      expect(next.registry.status('report')).toMatchObject({ state: 'completed', nextTickAt: null });
      // The fleet's schedule says no slot is due.
      await until(async () =>
        (await next.registry.fleetStatus('report')).nextSlot === null ? true : undefined,
      );
      // A replica that never held it says so too, once a slot of its own has come.
      const late = await replica('c', options, ran);
      await until(() => (late.registry.status('report').state === 'completed' ? true : undefined), 20_000);
      expect(ran).toHaveLength(6);
    }, 40_000);

    it("catchUp 'all' after the whole fleet was down: the next holder runs each slot that passed, in order, once", async () => {
      store = makeStore(LEASE_MS);
      const ran: Ran[] = [];
      const options = { every: EVERY, catchUp: { window: 60_000, runs: 'all' as const } };
      const a = await replica('a', options, ran);
      await until(() => (ran.length >= 2 ? true : undefined));
      await a.close();
      const down = ran.length;
      // At least four slots pass with no replica up.
      await sleep(5 * EVERY);
      const b = await replica('b', options, ran);
      await until(() => (ran.length >= down + 8 ? true : undefined), 20_000);
      const slots = ran.map((run) => run.slot);
      // Every slot of the grid from the first run on, each once, in order: none dropped while the fleet was down.
      expect(slots.map((slot) => (slot - slots[0]) / EVERY)).toEqual(slots.map((_, i) => i));
      expect(ran.slice(down).every((run) => run.replica === 'b')).toBe(true);
      expect(b.registry.status('report').counts.missed).toBe(0);
    }, 40_000);

    it("a stored schedule's one slot of at runs once, across handovers; then it is completed", async () => {
      store = makeStore(LEASE_MS);
      const ran: Ran[] = [];
      // The decorated job never comes: only the stored schedule runs.
      const options = { every: 3_600_000 };
      const apps = new Map([
        ['a', await replica('a', options, ran)],
        ['b', await replica('b', options, ran)],
      ]);
      const at = new Date(Date.now() + 1000);
      await apps
        .get('a')!
        .registry.schedules.upsert({ name: 'once', handler: 'stored', at: at.toISOString() });
      await until(() => (ran.length >= 1 ? true : undefined), 20_000);
      // Whoever holds it now goes; the other takes the lease, and finds the slot run.
      const holder = await until(
        () =>
          [...apps].find(
            ([, app]) => app.registry.has('once') && app.registry.status('once').lease?.held,
          )?.[0],
      );
      await apps.get(holder)!.close();
      apps.delete(holder);
      const [[, other]] = [...apps];
      const holds = () => other.registry.has('once') && other.registry.status('once').lease?.held;
      await until(() => (holds() ? true : undefined), 20_000);
      await until(() => (other.registry.status('once').state === 'completed' ? true : undefined));
      await sleep(1000);
      expect(ran).toEqual([{ replica: expect.any(String), slot: at.getTime() }]);
    }, 40_000);

    it('a backfill asked of any replica runs on the holder, and the next holder goes on where a handover left it', async () => {
      store = makeStore(LEASE_MS);
      const ran: Ran[] = [];
      // No slot of the grid comes during the test: every run is the backfill's.
      const options = { every: 3_600_000 };
      const apps = new Map([
        ['a', await replica('a', options, ran, 100)],
        ['b', await replica('b', options, ran, 100)],
      ]);
      const holder = await holderOf(apps);
      const [[, asked]] = [...apps].filter(([name]) => name !== holder);
      const to = Date.now();
      const { slots } = await asked.registry.backfill('report', {
        from: new Date(to - 20 * 60_000 * 60),
        to: new Date(to),
        by: 'alice',
        note: 'the outage of Monday',
      });
      expect(slots).toBe(20);
      await until(() => (ran.length >= 5 ? true : undefined), 20_000);
      // The replica that runs the backfill now (the spread may have moved the job since it was asked) goes.
      await apps.get(ran.at(-1)!.replica)!.close();
      await until(() => (ran.length >= 20 ? true : undefined), 30_000);
      await sleep(500);
      const times = ran.map((run) => run.slot);
      expect(ran).toHaveLength(20);
      expect(new Set(times).size).toBe(20);
      expect(times).toEqual([...times].sort((x, y) => x - y));
      expect(times.every((slot) => slot < to && slot >= to - 20 * 3_600_000)).toBe(true);
      expect(new Set(ran.map((run) => run.replica))).toEqual(new Set(['a', 'b']));
      expect((await asked.registry.audit('report'))[0]).toMatchObject({
        action: 'backfill',
        by: 'alice',
        note: 'the outage of Monday',
      });
      const history = await asked.registry.history('report', { limit: 20 });
      expect(history.every((run) => run.origin === 'backfill')).toBe(true);
    }, 60_000);
  });
});
