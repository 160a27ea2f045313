// Schedule policies (SPEC 24) of exclusive jobs on the three stores, with two replicas of an application, each on
// a connection of its own: maxRuns counted for the fleet across a handover, and catchUp 'all' after the whole
// fleet was down, where the next holder runs every slot that passed, in order, once.
import { afterEach, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Periodic, type PeriodicContext, PeriodicModule, type PeriodicOptions } from '../../lib/index.js';
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

    async function replica(name: string, options: PeriodicOptions, ran: Ran[]): Promise<TestApp> {
      @Injectable()
      class Reports {
        @Periodic({ name: 'report', exclusive: true, ...options })
        send(ctx: PeriodicContext): void {
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
  });
});
