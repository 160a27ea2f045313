import { createHash } from 'node:crypto';
import { now } from './clock.js';
import { describeValue, messageOf, PeriodicConfigError } from './errors.js';
import { Lease, type LeaseHolder, type LeaseStore } from './lease.js';
import { readOptions } from './options.js';

/** What the coordinator needs of its client; an ioredis `Redis` or `Cluster` has it. */
export interface RedisClient {
  eval(script: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  evalsha(sha1: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
}

/** Options of {@link RedisCoordinator}. */
export interface RedisCoordinatorOptions {
  /** The connection, e.g. `new Redis(process.env.REDIS_URL)` from ioredis; the application closes it. */
  client: RedisClient;
  /** Prepended to a job's name to make its lease key; the key itself holds the fencing counters. @default 'periodic:' */
  keyPrefix?: string;
  /** How long a lease lasts unless renewed, in integer milliseconds (≥ 100). @default 10_000 */
  leaseMs?: number;
}

/** Where the coordinator reports failures of Redis commands and their end. */
export interface CoordinatorLog {
  error(message: string): void;
  log(message: string): void;
}

/**
 * KEYS: lease key, fencing counters; ARGV: token, leaseMs. Takes the lease unless it is held, and on success
 * counts the job's fencing token up: the new token, or 0 when the lease is held.
 */
const ACQUIRE = `if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('HINCRBY', KEYS[2], ARGV[3], 1)
end
return 0`;

/** KEYS: lease key; ARGV: token, leaseMs. Extends the lease if the token still holds it: 1, else 0. */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0`;

/** KEYS: lease key; ARGV: token. Deletes the lease if the token still holds it: 1, else 0. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

const OPTION_NAMES = ['client', 'keyPrefix', 'leaseMs'];

/**
 * Shares the leases of `exclusive` jobs between the replicas of an application through Redis, so that each
 * such job runs in one replica at a time. The lease of job `name` is the key `<keyPrefix><name>`; its fencing
 * counter is the field `name` of the hash `<keyPrefix>`. The coordinator sends Lua scripts through the
 * client it is given and loads no Redis library of its own.
 */
export class RedisCoordinator {
  /** Prepended to a job's name to make its lease key. */
  readonly keyPrefix: string;
  /** How long a lease lasts unless renewed, in ms. */
  readonly leaseMs: number;
  /** @internal Set by `PeriodicModule` to Nest's logger; process warnings otherwise. */
  log: CoordinatorLog = warnings;
  /** @internal The three scripts, one call each. */
  readonly store: LeaseStore;
  readonly #client: RedisClient;
  /** Errors are reported at most once per `leaseMs`; those in between are counted. */
  #reportedAt = -Infinity;
  #unreported = 0;
  #failing = false;

  constructor(options: RedisCoordinatorOptions) {
    const where = 'new RedisCoordinator()';
    const given = readOptions(where, options, OPTION_NAMES, '{ client: new Redis(process.env.REDIS_URL) }');
    const { client, keyPrefix = 'periodic:', leaseMs = 10_000 } = given as Partial<RedisCoordinatorOptions>;
    if (typeof client?.eval !== 'function' || typeof client?.evalsha !== 'function') {
      throw new PeriodicConfigError(
        `${where}: "client" must be an ioredis client, such as new Redis(process.env.REDIS_URL), got ` +
          describeValue(client),
      );
    }
    if (typeof keyPrefix !== 'string') {
      throw new PeriodicConfigError(
        `${where}: "keyPrefix" must be a string such as 'periodic:', got ${describeValue(keyPrefix)}`,
      );
    }
    if (!Number.isSafeInteger(leaseMs) || leaseMs < 100) {
      throw new PeriodicConfigError(
        `${where}: "leaseMs" must be an integer number of milliseconds ≥ 100, got ${describeValue(leaseMs)}; ` +
          'a lease is renewed every leaseMs / 3, so a shorter one would be lost to any pause of the process',
      );
    }
    this.#client = client;
    this.keyPrefix = keyPrefix;
    this.leaseMs = leaseMs;
    const acquire = this.#script(ACQUIRE, 2);
    const renew = this.#script(RENEW, 1);
    const release = this.#script(RELEASE, 1);
    this.store = {
      leaseMs,
      acquire: (name, token) =>
        this.#call('acquiring', name, acquire(keyPrefix + name, keyPrefix, token, leaseMs, name)),
      renew: async (name, token) =>
        (await this.#call('renewing', name, renew(keyPrefix + name, token, leaseMs))) === 1,
      release: async (name, token) =>
        (await this.#call('releasing', name, release(keyPrefix + name, token))) === 1,
    };
  }

  /** @internal One job's lease, told to `holder`. */
  lease(name: string, holder: LeaseHolder): Lease {
    return new Lease(this.store, name, holder);
  }

  /** A script run by its SHA1 (`EVALSHA`), sent whole (`EVAL`) when Redis does not have it yet. */
  #script(source: string, keys: number): (...args: (string | number)[]) => Promise<number> {
    const sha1 = createHash('sha1').update(source).digest('hex');
    return async (...args) => {
      try {
        return (await this.#client.evalsha(sha1, keys, ...args)) as number;
      } catch (error) {
        if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
        return (await this.#client.eval(source, keys, ...args)) as number;
      }
    };
  }

  async #call(what: string, name: string, reply: Promise<number>): Promise<number> {
    try {
      const value = await reply;
      if (this.#failing) {
        this.#failing = false;
        this.log.log('Redis answers again: exclusive jobs run again once they hold their lease');
      }
      return value;
    } catch (error) {
      this.#failed(`${what} the lease of "${name}"`, error);
      throw error;
    }
  }

  #failed(what: string, error: unknown): void {
    this.#failing = true;
    const at = now();
    if (at - this.#reportedAt < this.leaseMs) {
      this.#unreported++;
      return;
    }
    const more = this.#unreported === 0 ? '' : ` (${this.#unreported} more failed since the last report)`;
    this.log.error(
      `Redis failed while ${what}: ${messageOf(error)}${more}. Exclusive jobs start no run until their lease is ` +
        `held again; the next report comes in ${this.leaseMs}ms at the earliest`,
    );
    this.#reportedAt = at;
    this.#unreported = 0;
  }
}

const warnings: CoordinatorLog = {
  error: (message) => process.emitWarning(message, { code: 'PERIODIC_COORDINATOR' }),
  log: () => undefined,
};
