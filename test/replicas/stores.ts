// The replicas' side of the cluster tests: the stores they share (Redis, PostgreSQL) as the test sees them, and
// the replica processes (replica.ts) it starts and stops.
import { afterAll, beforeAll } from '@jest/globals';
import type { Redis } from 'ioredis';
import type pg from 'pg';
import { keyOf } from '../../lib/coordinators/redis/keys.js';
import { type Child, compileApp, startNode } from '../nest/child-app.js';
import {
  DATABASE_URL,
  describeWithPostgres,
  dropTable,
  postgresPool,
  uniqueTable,
} from '../postgres/postgres.js';
import { describeWithRedis, dropKeys, REDIS_URL, redisClient, uniquePrefix } from '../redis/redis.js';

/**
 * A run as a replica records it: times in ms on the machine's clock, `slot` from ctx.scheduledDate, and the start
 * again by the wall clock (`Date.now()`), which slots are times of: the machine's clock above is the process's
 * start plus its monotonic time, and parts from the wall clock when the system sets it.
 */
export type RunEntry = [
  replica: string,
  fencingToken: number,
  start: number,
  end: number,
  slot: number,
  wallStart: number,
];
/** A run of a stored schedule: a run's entry, then the schedule's name and its ctx.data. */
export type StoredRunEntry = [...RunEntry, name: string, data: { version: number }];
export type ClosedEntry = [closed: 'closed', replica: string, at: number];

export const clock = () => performance.timeOrigin + performance.now();

/** A store the replicas share, from the test's side: the replicas' environment and what they recorded. */
export interface Store {
  name: string;
  env: Record<string, string>;
  /** The same, with the store's address pointing where nothing answers. */
  unreachable: Record<string, string>;
  setUp(): Promise<void>;
  entries<T>(list: 'runs' | 'closed'): Promise<T[]>;
  /** The owner holding the lease of `job` now (`<host>:<pid>/<session>`), if any. */
  owner(job: string): Promise<string | undefined>;
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
    owner: async (job) => (await redis.get(keyOf(prefix, 'lease', job))) ?? undefined,
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
    owner: async (job) => {
      const { rows } = await pool.query<{ owner: string }>(
        `SELECT owner FROM "${table}" WHERE name = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp()`,
        [job],
      );
      return rows[0]?.owner;
    },
    tearDown: async () => {
      await dropTable(pool, `${table}_log`);
      await dropTable(pool, table);
      await pool.end();
    },
  };
}

export const stores: [string, Store, (name: string, tests: () => void) => void][] = [
  ['Redis', redisStore(), await describeWithRedis()],
  ['PostgreSQL', postgresStore(), await describeWithPostgres()],
];

/**
 * The replica processes of one describe block, on one store: set up before its tests, and every process
 * killed and the store cleaned after them.
 */
export function useReplicas(store: Store) {
  const replicas = new Map<string, Child>();
  let compiled: string | undefined;
  beforeAll(() => store.setUp());
  afterAll(async () => {
    for (const child of replicas.values()) child.process.kill('SIGKILL');
    await store.tearDown();
  });
  return {
    replicas,
    /** Starts replica `name` with the store's environment and `env`. */
    start(name: string, env: Record<string, string>): Child {
      compiled ??= compileApp(new URL('replica.ts', import.meta.url).pathname);
      const child = startNode(compiled, { ...store.env, ...env, REPLICA: name });
      replicas.set(name, child);
      return child;
    },
    /** Ends replica `name` with `signal` and waits for its exit. */
    async end(name: string, signal: NodeJS.Signals) {
      const child = replicas.get(name)!;
      replicas.delete(name);
      child.process.kill(signal);
      return child.exited;
    },
    /** The replica holding the lease of `job` now, as the store says. */
    async holder(job: string): Promise<string | undefined> {
      const owner = await store.owner(job);
      const pid = owner?.match(/:(\d+)\//)?.[1];
      return [...replicas].find(([, child]) => String(child.process.pid) === pid)?.[0];
    },
    /** The replica that prints "acquired" next, among those running. */
    nextHolder(): Promise<string> {
      const seen = new Map([...replicas].map(([name, child]) => [name, child.lines.length]));
      return new Promise((resolve, reject) => {
        const giveUp = setTimeout(() => {
          clearInterval(poll);
          reject(new Error(`no replica acquired the lease within 30 s: ${[...replicas.keys()].join(', ')}`));
        }, 30_000);
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
    },
  };
}
