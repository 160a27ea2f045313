// Incidents of an exclusive job (SPEC 25) on the three stores: two replicas, Nest applications with their own
// connection each, share a job. Its failing slots open one incident for the fleet, whichever replica runs them, and
// its recovery closes it once; both replicas show it while it is open, and both audit trails have it. A holder
// that stops answering while its lease is held makes the slots late: the other replica notices, and says so once.
import { afterEach, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import type { Redis } from 'ioredis';
import pg from 'pg';
import {
  InMemoryCoordinator,
  Periodic,
  type PeriodicCoordinator,
  type PeriodicEventOf,
  PeriodicModule,
  PostgresCoordinator,
  RedisCoordinator,
} from '../../lib/index.js';
import { type TestApp, until, useApps } from '../nest/helpers.js';
import {
  DATABASE_URL,
  describeWithPostgres,
  dropTable,
  postgresPool,
  uniqueTable,
} from '../postgres/postgres.js';
import { describeWithRedis, dropKeys, redisClient, uniquePrefix } from '../redis/redis.js';

/** A store of the test: a coordinator per replica (its own connection), and what removes the test's data. */
interface Store {
  coordinator(leaseMs: number): PeriodicCoordinator;
  cleanUp(): Promise<void>;
}

function inMemoryStore(): Store {
  let shared: InMemoryCoordinator | undefined;
  return {
    coordinator: (leaseMs) => (shared ??= new InMemoryCoordinator({ leaseMs })),
    cleanUp: async () => undefined,
  };
}

function redisStore(): Store {
  const prefix = uniquePrefix();
  const clients: Redis[] = [];
  return {
    coordinator: (leaseMs) => {
      const client = redisClient({ maxRetriesPerRequest: 1 });
      clients.push(client);
      return new RedisCoordinator({ client, keyPrefix: prefix, leaseMs });
    },
    cleanUp: async () => {
      for (const client of clients) client.disconnect();
      const redis = redisClient();
      await dropKeys(redis, prefix);
      await redis.quit();
    },
  };
}

function postgresStore(): Store {
  const table = uniqueTable();
  const pools: pg.Pool[] = [];
  return {
    coordinator: (leaseMs) => {
      const pool = new pg.Pool({ connectionString: DATABASE_URL, connectionTimeoutMillis: 1000 });
      pool.on('error', () => undefined);
      pools.push(pool);
      return new PostgresCoordinator({ pool, table, leaseMs });
    },
    cleanUp: async () => {
      for (const pool of pools) await Promise.race([pool.end().catch(() => undefined), sleep(1000)]);
      const pool = postgresPool();
      await dropTable(pool, table);
      await pool.end();
    },
  };
}

/**
 * The coordinator, until `silence()`: from then on, no call it gets ever answers (a process stopped dead); while
 * `down`, every call fails (the store cannot be reached).
 */
function silenceable(coordinator: PeriodicCoordinator) {
  let silent = false;
  const wrapped = new Proxy(coordinator, {
    get(target, key, receiver) {
      const value = Reflect.get(target, key, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (silent) return new Promise(() => undefined);
        if (outage.down) return Promise.reject(new Error('connect ECONNREFUSED'));
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { coordinator: wrapped, silence: () => (silent = true) };
}

/** Whether the store is down, for every replica. */
const outage = { down: false };

const stores: [string, () => Store, (name: string, tests: () => void) => void][] = [
  ['InMemory', inMemoryStore, describe],
  ['Redis', redisStore, await describeWithRedis()],
  ['PostgreSQL', postgresStore, await describeWithPostgres()],
];

describe.each(stores)('on %s', (_, makeStore, describeStore) => {
  describeStore('two replicas share a job', () => {
    const createApp = useApps();
    let store: Store;
    afterEach(async () => {
      outage.down = false;
      await store?.cleanUp();
    });

    /** Replicas "a" and "b" of the job "feed", every 300 ms, which fails while `state.failing`. */
    async function twoReplicas(
      state: { failing: boolean },
      { leaseMs, incidents }: { leaseMs: number; incidents: object },
    ) {
      store = makeStore();
      const replicas: { name: string; app: TestApp; silence(): void }[] = [];
      for (const name of ['a', 'b']) {
        @Injectable()
        class Feed {
          @Periodic({ every: 300, exclusive: true, name: 'feed' })
          pull(): void {
            if (state.failing) throw new TypeError('the feed answered 503');
          }
        }
        const { coordinator, silence } = silenceable(store.coordinator(leaseMs));
        const app = await createApp({
          imports: [PeriodicModule.forRoot({ coordinator, replica: name, logger: false, incidents })],
          providers: [Feed],
        });
        replicas.push({ name, app, silence });
      }
      const seen = <T extends 'incident' | 'recovered'>(type: T) =>
        replicas.flatMap(({ name, app }) =>
          app.seen
            .filter((event): event is PeriodicEventOf<T> => event.type === type)
            .map((event) => ({ by: name, ...event })),
        );
      /** The events of `type` so far, once there is one (within 20 s). */
      const firstSeen = <T extends 'incident' | 'recovered'>(type: T) =>
        until(() => (seen(type).length > 0 ? seen(type) : undefined), 20_000);
      /** The replica that holds the lease (within 20 s). */
      const holder = () =>
        until(() => replicas.find(({ app }) => app.registry.status('feed').lease?.held === true), 20_000);
      /** The holder, once it has run a slot, so that the fleet's schedule is in the store. */
      const scheduledHolder = async () => {
        const held = await holder();
        await until(async () =>
          (await held.app.registry.fleetStatus('feed')).lastSlot !== null ? true : undefined,
        );
        return held;
      };
      return { replicas, seen, firstSeen, holder, scheduledHolder };
    }

    it('failing slots open one incident for the fleet, both replicas show it, and one recovery closes it', async () => {
      const state = { failing: true };
      const { replicas, seen, firstSeen } = await twoReplicas(state, {
        leaseMs: 1500,
        incidents: { failedSlots: 2 },
      });
      const [incident] = await firstSeen('incident');
      expect(incident).toMatchObject({
        name: 'feed',
        kind: 'failing',
        detail: '2 slots in a row failed after their retries; the last: TypeError: the feed answered 503',
      });
      // Both replicas show it, the one that did not open it once its heartbeat has read it.
      for (const { app } of replicas) {
        await until(async () => {
          const { incidents } = await app.registry.fleetStatus('feed');
          return incidents.length === 1 ? incidents : undefined;
        }, 10_000);
        expect((await app.registry.fleetStatus('feed')).incidents).toEqual([
          { kind: 'failing', since: incident.since, detail: incident.detail },
        ]);
      }
      // More slots fail, on whichever replica holds the lease: none opens it again.
      await sleep(1500);
      expect(seen('incident')).toHaveLength(1);

      state.failing = false;
      const [recovered] = await firstSeen('recovered');
      expect(recovered).toMatchObject({ name: 'feed', kind: 'failing', since: incident.since });
      expect(recovered.durationMs).toBeGreaterThan(0);
      await sleep(1000);
      expect(seen('recovered')).toHaveLength(1);
      for (const { app } of replicas) {
        await until(async () =>
          (await app.registry.fleetStatus('feed')).incidents.length === 0 ? true : undefined,
        );
        const audit = await app.registry.audit('feed');
        expect(audit.map(({ action, replica }) => [action, replica])).toEqual([
          ['recovered', recovered.by],
          ['incident', incident.by],
        ]);
      }
    }, 60_000);

    it("the slots that failed before a handover count on the next holder: the incident opens at the fleet's third", async () => {
      const {
        replicas,
        firstSeen,
        holder: holderOf,
      } = await twoReplicas({ failing: true }, { leaseMs: 1500, incidents: { failedSlots: 3 } });
      const holder = await holderOf();
      await until(() =>
        holder.app.seen.some((event) => event.type === 'finished' && event.reason === 'error')
          ? true
          : undefined,
      );
      // Closed, the holder records its runs and gives the lease up: the other takes it over.
      await holder.app.close();
      const other = replicas.find((replica) => replica !== holder)!;
      const [incident] = await firstSeen('incident');
      expect(incident).toMatchObject({ kind: 'failing' });
      // The fleet's history: the slots that failed, on either replica, up to the incident.
      const failedBefore = await until(async () => {
        const runs = await other.app.registry.history('feed', { limit: 50 });
        const failed = runs.filter(
          (run) => run.reason === 'error' && run.finishedAt !== null && run.finishedAt <= incident.since,
        );
        return failed.length >= 3 ? failed : undefined;
      });
      expect(failedBefore).toHaveLength(3);
      expect(new Set(failedBefore.map((run) => run.replica))).toEqual(
        new Set([holder.name, other.name].filter((name) => failedBefore.some((run) => run.replica === name))),
      );
    }, 60_000);

    it("the good slots before a handover count too: the incident closes at the fleet's recoverAfter-th good slot", async () => {
      const state = { failing: true };
      const { replicas, firstSeen } = await twoReplicas(state, {
        leaseMs: 1500,
        incidents: { failedSlots: 1, recoverAfter: 2 },
      });
      const [incident] = await firstSeen('incident');
      state.failing = false;
      // The replica that runs the first good slot (the spread may have moved the job since the incident).
      const holder = await until(() =>
        replicas.find(({ app }) =>
          app.seen.some((event) => event.type === 'finished' && event.reason === 'normal'),
        ),
      );
      // One good slot there (or two, if it closes the incident first), then the other replica goes on.
      await holder.app.close();
      const other = replicas.find((replica) => replica !== holder)!;
      const [recovered] = await firstSeen('recovered');
      // When it closed, give or take the milliseconds between a run's end as recorded and as its replica read it
      // (the next good slot ends 300 ms later).
      const closedAt = recovered.since.getTime() + recovered.durationMs + 100;
      const good = await until(async () => {
        const runs = await other.app.registry.history('feed', { limit: 50 });
        const after = runs.filter(
          (run) =>
            run.reason === 'normal' &&
            run.slot !== null &&
            run.slot.getTime() > incident.since.getTime() &&
            run.finishedAt!.getTime() <= closedAt,
        );
        return after.length >= 2 ? after : undefined;
      });
      expect(good).toHaveLength(2);
    }, 60_000);

    it('a holder that stops answering with its lease held: the other replica finds the slot late, and says so once', async () => {
      const { replicas, seen, scheduledHolder } = await twoReplicas(
        { failing: false },
        { leaseMs: 4000, incidents: { lateAfter: 600 } },
      );
      const holder = await scheduledHolder();
      holder.silence();
      const other = replicas.find((replica) => replica !== holder)!;
      const late = await until(() => {
        const found = seen('incident').filter(({ by }) => by === other.name);
        return found.length > 0 ? found : undefined;
      }, 20_000);
      expect(late).toHaveLength(1);
      expect(late[0]).toMatchObject({ name: 'feed', kind: 'late' });
      expect(late[0].detail).toMatch(
        new RegExp(
          `^the slot due at \\S+Z has not started \\d+ ms after it was due: its lease is held by ${holder.name} until \\S+Z$`,
        ),
      );
      // The lease expires, the other replica takes it and runs the slots: the incident closes, once.
      const [recovered] = await until(() => {
        const found = seen('recovered').filter(({ by }) => by === other.name);
        return found.length > 0 ? found : undefined;
      }, 20_000);
      expect(recovered).toMatchObject({ kind: 'late', since: late[0].since });
      await sleep(1000);
      expect(seen('incident').filter(({ by }) => by === other.name)).toHaveLength(1);
      expect(seen('recovered').filter(({ by }) => by === other.name)).toHaveLength(1);
    }, 60_000);

    it('the store down: the replica that held the lease says the slots are late, once; the other stays quiet', async () => {
      const { replicas, seen, firstSeen, scheduledHolder } = await twoReplicas(
        { failing: false },
        { leaseMs: 1500, incidents: { lateAfter: 600 } },
      );
      const holder = await scheduledHolder();
      outage.down = true;
      const [late] = await firstSeen('incident');
      expect(late).toMatchObject({ by: holder.name, name: 'feed', kind: 'late' });
      expect(late.detail).toMatch(
        /has not started \d+ ms after it was due: the store cannot be reached \(.*ECONNREFUSED/,
      );
      await sleep(2000);
      expect(seen('incident')).toHaveLength(1);
      // The incident is this replica's own, shown by it; once the store answers again it is written there, the
      // fleet's from then on, and the fleet's good slots close it, wherever they run.
      expect((await holder.app.registry.fleetStatus('feed')).incidents).toMatchObject([{ kind: 'late' }]);
      outage.down = false;
      const [recovered] = await firstSeen('recovered');
      expect(recovered).toMatchObject({ kind: 'late', since: late.since });
      for (const { app } of replicas) {
        await until(async () =>
          (await app.registry.fleetStatus('feed')).incidents.length === 0 ? true : undefined,
        );
      }
      await sleep(1000);
      expect([seen('incident').length, seen('recovered').length]).toEqual([1, 1]);
      const audit = await holder.app.registry.audit('feed');
      expect(audit.map(({ action, at }) => [action, action === 'incident' ? at : null])).toEqual([
        ['recovered', null],
        ['incident', late.since],
      ]);
    }, 60_000);
  });
});
