import { createHash } from 'node:crypto';
import type { PeriodicCoordinator, PeriodicFleetSchedule } from '../scheduler/coordinator-port.js';
import { describeValue, isError } from '../scheduler/errors.js';
import { checkedOptions, type OptionRule } from '../scheduler/rules.js';
import { integerReply, LEASE_MS } from './replies.js';

/** What the coordinator needs of its client; an ioredis `Redis` or `Cluster` has it. */
export interface RedisClient {
  eval(script: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  evalsha(sha1: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
}

/** Options of {@link RedisCoordinator}. */
export interface RedisCoordinatorOptions {
  /** The connection, e.g. `new Redis(process.env.REDIS_URL)` from ioredis; the application closes it. */
  client: RedisClient;
  /**
   * Prepended to a job's name to make its lease key; the key itself holds the jobs' fencing counters and
   * schedules. Give each
   * application sharing a Redis its own. With Redis Cluster, put a hash tag in it: `'{periodic}:'`.
   * @default 'periodic:'
   */
  keyPrefix?: string;
  /** How long a lease lasts unless renewed, in integer milliseconds (≥ 100). @default 10_000 */
  leaseMs?: number;
}

/**
 * KEYS: lease key, the hash of the jobs' counters and schedules; ARGV: owner, leaseMs, job name. Takes the lease unless it is held; on
 * success the job's fencing token becomes the larger of the last one plus one and Redis's clock in
 * microseconds, so that it grows even when Redis lost the counters (a restart without persistence, FLUSHALL,
 * a failover). Returns the token, or 0 when the lease is held. Lua numbers are doubles: the token is stored
 * through string.format('%d'), exact up to 2^53.
 */
const ACQUIRE = `if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local time = redis.call('TIME')
local floor = tonumber(time[1]) * 1000000 + tonumber(time[2])
local field = 'token:' .. ARGV[3]
local token = math.max(tonumber(redis.call('HGET', KEYS[2], field) or '0') + 1, floor)
redis.call('HSET', KEYS[2], field, string.format('%d', token))
return token`;

/** KEYS: lease key; ARGV: owner, leaseMs. Extends the lease if the owner holds it still: 1, else 0. */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;

/** KEYS: lease key; ARGV: owner. Deletes the lease if the owner holds it still: 1, else 0. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

/**
 * KEYS: lease key, the hash; ARGV: owner, fencing token, job name, last, next, grid. Stores the job's schedule
 * if the owner holds the lease with that token and \`last\` does not go back: 1, else 0.
 */
const WRITE_SCHEDULE = `if redis.call('GET', KEYS[1]) ~= ARGV[1]
  or redis.call('HGET', KEYS[2], 'token:' .. ARGV[3]) ~= ARGV[2]
  or tonumber(ARGV[4]) < tonumber(redis.call('HGET', KEYS[2], 'last:' .. ARGV[3]) or '0') then
  return 0
end
redis.call('HSET', KEYS[2], 'last:' .. ARGV[3], ARGV[4], 'next:' .. ARGV[3], ARGV[5], 'grid:' .. ARGV[3], ARGV[6])
return 1`;

/** KEYS: the hash; ARGV: job name. The job's schedule as [last, next, grid], each nil if missing. */
const READ_SCHEDULE = `return redis.call('HMGET', KEYS[1], 'last:' .. ARGV[1], 'next:' .. ARGV[1], 'grid:' .. ARGV[1])`;

const RULES = {
  client: {
    accepts: (value) => {
      const client = value as Partial<RedisClient> | null | undefined;
      return typeof client?.eval === 'function' && typeof client?.evalsha === 'function';
    },
    expected: 'an ioredis client, such as new Redis(process.env.REDIS_URL)',
    required: true,
  },
  keyPrefix: { accepts: (value) => typeof value === 'string', expected: "a string such as 'periodic:'" },
  leaseMs: LEASE_MS,
} satisfies Record<keyof RedisCoordinatorOptions, OptionRule>;

/**
 * Shares the leases of `exclusive` jobs between the replicas of an application through Redis. The lease of
 * job `name` is the key `<keyPrefix><name>`; its fencing counter is the field `name` of the hash
 * `<keyPrefix>`. The coordinator sends Lua scripts through the client it is given and loads no Redis library
 * of its own. Replies are parsed whatever the client's options (`stringNumbers`, its own `keyPrefix`).
 */
export class RedisCoordinator implements PeriodicCoordinator {
  /** Prepended to a job's name to make its lease key. */
  readonly keyPrefix: string;
  /** How long a lease lasts unless renewed, in ms. */
  readonly leaseMs: number;
  readonly #client: RedisClient;
  readonly #acquire: (...args: (string | number)[]) => Promise<unknown>;
  readonly #renew: (...args: (string | number)[]) => Promise<unknown>;
  readonly #release: (...args: (string | number)[]) => Promise<unknown>;
  readonly #readSchedule: (...args: (string | number)[]) => Promise<unknown>;
  readonly #writeSchedule: (...args: (string | number)[]) => Promise<unknown>;

  constructor(options: RedisCoordinatorOptions) {
    const where = 'new RedisCoordinator()';
    const given = checkedOptions(where, options, RULES, '{ client: new Redis(process.env.REDIS_URL) }');
    const { client, keyPrefix = 'periodic:', leaseMs = 10_000 } = given as unknown as RedisCoordinatorOptions;
    this.#client = client;
    this.keyPrefix = keyPrefix;
    this.leaseMs = leaseMs;
    this.#acquire = this.#script(ACQUIRE, 2);
    this.#renew = this.#script(RENEW, 1);
    this.#release = this.#script(RELEASE, 1);
    this.#readSchedule = this.#script(READ_SCHEDULE, 1);
    this.#writeSchedule = this.#script(WRITE_SCHEDULE, 2);
  }

  async acquire(name: string, owner: string): Promise<number> {
    const { keyPrefix } = this;
    return integerReply(
      'acquire',
      await this.#acquire(keyPrefix + name, keyPrefix, owner, this.leaseMs, name),
    );
  }

  async renew(name: string, owner: string): Promise<boolean> {
    return integerReply('renew', await this.#renew(this.keyPrefix + name, owner, this.leaseMs), 1) === 1;
  }

  async release(name: string, owner: string): Promise<boolean> {
    return integerReply('release', await this.#release(this.keyPrefix + name, owner), 1) === 1;
  }

  async readSchedule(name: string): Promise<PeriodicFleetSchedule | null> {
    const reply = await this.#readSchedule(this.keyPrefix, name);
    const [last, next, grid] = Array.isArray(reply) ? (reply as unknown[]) : [];
    // Lua turns the nil of a missing field into false; a client may give null.
    if (grid === null || grid === false) return null;
    if (typeof grid !== 'string') throw new Error(`Redis answered ${describeValue(reply)} to readSchedule`);
    return { grid, last: integerReply('readSchedule', last), next: integerReply('readSchedule', next) };
  }

  async writeSchedule(
    name: string,
    owner: string,
    fencingToken: number,
    { grid, last, next }: PeriodicFleetSchedule,
  ): Promise<boolean> {
    const { keyPrefix } = this;
    const args = [owner, fencingToken, name, last, next, grid];
    return (
      integerReply('writeSchedule', await this.#writeSchedule(keyPrefix + name, keyPrefix, ...args), 1) === 1
    );
  }

  /** A script run by its SHA1 (`EVALSHA`), sent whole (`EVAL`) when Redis does not have it yet. */
  #script(source: string, keys: number): (...args: (string | number)[]) => Promise<unknown> {
    const sha1 = createHash('sha1').update(source).digest('hex');
    return async (...args) => {
      try {
        return await this.#client.evalsha(sha1, keys, ...args);
      } catch (error) {
        if (!isError(error) || !error.message.startsWith('NOSCRIPT')) throw error;
        return await this.#client.eval(source, keys, ...args);
      }
    };
  }
}
