// Three processes of one application share an exclusive job through a real store, Redis or PostgreSQL. The
// holder is killed with SIGKILL once and the next one is closed gracefully once; the runs they record in the
// store must start in the order of their fencing tokens, and each handover must be as quick as the lease allows.
// A replica whose store does not answer still ends on SIGTERM.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { type Child, compileApp, startNode } from '../nest/child-app.js';
import {
  DATABASE_URL,
  describeWithPostgres,
  dropTable,
  postgresPool,
  uniqueTable,
} from '../postgres/postgres.js';
import { describeWithRedis, dropKeys, REDIS_URL, redisClient, uniquePrefix } from '../redis/redis.js';

// Long enough that a loaded CI machine's pauses stay within the margin (leaseMs / 10 = 150 ms).
const LEASE_MS = 1500;
const RETRY = LEASE_MS / 3;
const EVERY = 50;
/** How long each holder runs the job before the test moves on. */
const HOLDING = 1500;
/** What a loaded machine may add to a handover: well under the lease, which a handover by release must beat. */
const LOAD = 200;

type RunEntry = [replica: string, fencingToken: number, start: number, end: number];
type ClosedEntry = [closed: 'closed', replica: string, at: number];

const clock = () => performance.timeOrigin + performance.now();

/** A store the replicas share, from the test's side: the replicas' environment and what they recorded. */
interface Store {
  name: string;
  env: Record<string, string>;
  /** The same, with the store's address pointing where nothing answers. */
  unreachable: Record<string, string>;
  setUp(): Promise<void>;
  entries<T>(list: 'runs' | 'closed'): Promise<T[]>;
  tearDown(): Promise<void>;
}

function redisStore(): Store {
  let redis: Redis;
  const prefix = uniquePrefix();
  return {
    name: 'Redis',
    env: { STORE: 'redis', REDIS_URL, KEY_PREFIX: prefix },
    unreachable: { STORE: 'redis', REDIS_URL: 'redis://127.0.0.1:1', KEY_PREFIX: prefix },
    setUp: async () => {
      redis = redisClient();
    },
    entries: async <T>(list: string) =>
      (await redis.lrange(`${prefix}${list}`, 0, -1)).map((entry) => JSON.parse(entry) as T),
    tearDown: async () => {
      await dropKeys(redis, prefix);
      await redis.del(`${prefix}runs`, `${prefix}closed`);
      await redis.quit();
    },
  };
}

function postgresStore(): Store {
  let pool: pg.Pool;
  const table = uniqueTable();
  return {
    name: 'PostgreSQL',
    env: { STORE: 'postgres', DATABASE_URL, TABLE: table },
    unreachable: { STORE: 'postgres', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/test', TABLE: table },
    setUp: async () => {
      pool = postgresPool();
      await pool.query(`CREATE TABLE "${table}_log" (id serial PRIMARY KEY, list text, entry jsonb)`);
    },
    entries: async <T>(list: string) =>
      (await pool.query(`SELECT entry FROM "${table}_log" WHERE list = $1 ORDER BY id`, [list])).rows.map(
        (row: { entry: T }) => row.entry,
      ),
    tearDown: async () => {
      await dropTable(pool, `${table}_log`);
      await dropTable(pool, table);
      await pool.end();
    },
  };
}

const stores: [string, Store, (name: string, tests: () => void) => void][] = [
  ['Redis', redisStore(), await describeWithRedis()],
  ['PostgreSQL', postgresStore(), await describeWithPostgres()],
];

describe.each(stores)('on %s', (_, store, describeStore) => {
  describeStore('three replicas of one application', () => cluster(store));
});

function cluster(store: Store): void {
  const replicas = new Map<string, Child>();
  const script = () => compileApp(new URL('replica.ts', import.meta.url).pathname);

  beforeAll(() => store.setUp());
  afterAll(async () => {
    for (const child of replicas.values()) child.process.kill('SIGKILL');
    await store.tearDown();
  });

  /** The replica that prints "acquired" next, among those still running. */
  function nextHolder(): Promise<string> {
    const seen = new Map([...replicas].map(([name, child]) => [name, child.lines.length]));
    return new Promise((resolve, reject) => {
      const giveUp = setTimeout(() => {
        clearInterval(poll);
        reject(new Error(`no replica acquired the lease within 10 s: ${[...replicas.keys()].join(', ')}`));
      }, 10_000);
      const poll = setInterval(() => {
        for (const [name, child] of replicas) {
          if (child.lines.slice(seen.get(name)).some((line) => line.startsWith('acquired '))) {
            clearInterval(poll);
            clearTimeout(giveUp);
            resolve(name);
          }
        }
      }, 5);
    });
  }

  it('runs start in fencing-token order; handovers are as quick as the lease allows', async () => {
    const env = { ...store.env, LEASE_MS: String(LEASE_MS) };
    const compiled = script();
    for (const name of ['A', 'B', 'C']) replicas.set(name, startNode(compiled, { ...env, REPLICA: name }));
    const first = nextHolder();
    await Promise.all([...replicas.values()].map((child) => child.waitFor('ready')));
    const killed = await first;
    await sleep(HOLDING);

    // The holder dies without releasing: the others wait for its lease to expire.
    const next = nextHolder();
    const killedAt = clock();
    replicas.get(killed)!.process.kill('SIGKILL');
    await replicas.get(killed)!.exited;
    replicas.delete(killed);
    const closed = await next;
    await sleep(HOLDING);

    // The next holder is closed gracefully: it drains, then releases its lease.
    const last = nextHolder();
    const closing = replicas.get(closed)!;
    closing.process.kill('SIGTERM');
    expect(await closing.exited).toEqual({ code: null, signal: 'SIGTERM' });
    replicas.delete(closed);
    const survivor = await last;
    await sleep(HOLDING);
    const ending = replicas.get(survivor)!;
    ending.process.kill('SIGTERM');
    await ending.exited;
    replicas.delete(survivor);

    const runs = (await store.entries<RunEntry>('runs')).sort((a, b) => a[2] - b[2]);
    const [[, , releasedAt]] = (await store.entries<ClosedEntry>('closed')).filter(
      ([, replica]) => replica === closed,
    );

    // What the lease promises (README, "Running several replicas"): runs start in the order of their fencing
    // tokens, so no stale holder starts a run once a newer token is in use, and two runs that overlap (a
    // holder paused past its margin can still be finishing one) have different tokens, which a resource
    // that remembers the highest token it has seen uses to refuse the stale one.
    for (let i = 1; i < runs.length; i++) {
      const [previous, run] = [runs[i - 1], runs[i]];
      expect({ run, tokenNotBelowPrevious: run[1] >= previous[1] }).toEqual({
        run,
        tokenNotBelowPrevious: true,
      });
      const overlaps = runs.slice(0, i).filter((earlier) => earlier[3] > run[2]);
      for (const earlier of overlaps) {
        expect({ run, earlier, newerToken: run[1] > earlier[1] }).toEqual({ run, earlier, newerToken: true });
      }
    }
    const byReplica = (name: string) => runs.filter(([replica]) => replica === name);
    for (const name of [killed, closed, survivor]) expect(byReplica(name).length).toBeGreaterThan(10);
    // Each holder's tokens are all larger than those of the holder before it.
    const tokens = [killed, closed, survivor].map((name) => byReplica(name).map((run) => run[1]));
    expect(Math.max(...tokens[0])).toBeLessThan(Math.min(...tokens[1]));
    expect(Math.max(...tokens[1])).toBeLessThan(Math.min(...tokens[2]));

    const sigkillHandover = byReplica(closed)[0][2] - killedAt;
    const gracefulHandover = byReplica(survivor)[0][2] - releasedAt;
    console.log(
      `${store.name}: handover after SIGKILL: ${sigkillHandover.toFixed(0)} ms (bound ${LEASE_MS + RETRY + EVERY + LOAD} ms); ` +
        `after a graceful close: ${gracefulHandover.toFixed(0)} ms from the release (bound ${RETRY + EVERY + LOAD} ms)`,
    );
    expect(sigkillHandover).toBeGreaterThan(0);
    expect(sigkillHandover).toBeLessThan(LEASE_MS + RETRY + EVERY + LOAD);
    expect(gracefulHandover).toBeGreaterThan(0);
    expect(gracefulHandover).toBeLessThan(RETRY + EVERY + LOAD);
  }, 60_000);

  it('a replica whose store does not answer still ends on SIGTERM, its connection closed by the recipe', async () => {
    const child = startNode(script(), { ...store.unreachable, LEASE_MS: String(LEASE_MS), REPLICA: 'D' });
    replicas.set('D', child);
    await child.waitFor('ready');
    child.process.kill('SIGTERM');
    expect(await child.exited).toEqual({ code: null, signal: 'SIGTERM' });
    replicas.delete('D');
  }, 30_000);
}
