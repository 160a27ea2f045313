import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { describe } from '@jest/globals';

type Describe = (name: string, tests: () => void) => void;
import { Redis, type RedisOptions } from 'ioredis';

/** The Redis these tests use: `REDIS_URL`, else the local default. */
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * A client whose errors are left to the code under test (ioredis would print every failed reconnection of a
 * client without an `error` listener).
 */
export function redisClient(options: RedisOptions = {}): Redis {
  return new Redis(REDIS_URL, options).on('error', () => undefined);
}

/**
 * `describe` when Redis answers at `REDIS_URL`; otherwise `describe.skip` and a message that says why, or,
 * with `CI=true`, an error: CI must not pass on tests it skipped.
 */
export async function describeWithRedis(): Promise<Describe> {
  const probe = new Redis(REDIS_URL, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  let cause: Error | undefined;
  probe.on('error', (error: Error) => (cause = error));
  try {
    await probe.connect();
    await probe.ping();
    return describe;
  } catch (error) {
    return skip(`no Redis answers at ${REDIS_URL} (${(cause ?? (error as Error)).message})`);
  } finally {
    probe.disconnect();
  }
}

/** As {@link describeWithRedis}; the `redis-server` program must be there too, to start a Redis of its own. */
export async function describeWithRedisServer(): Promise<Describe> {
  const found = await describeWithRedis();
  if (found !== describe) return found;
  const { error } = spawnSync('redis-server', ['--version']);
  return error === undefined ? describe : skip(`redis-server cannot be run (${error.message})`);
}

function skip(why: string): Describe {
  if (process.env.CI === 'true')
    throw new Error(`${why}; CI needs it: .ci/run installs and starts redis-server`);
  process.stderr.write(
    `SKIPPED: these Redis tests, as ${why}. Install redis-server, or set REDIS_URL, to run them.\n`,
  );
  return describe.skip;
}

/** A key prefix no other test uses, so that tests can run side by side on one Redis. */
export function uniquePrefix(): string {
  return `periodic-test:${process.pid}:${Math.random().toString(36).slice(2)}:`;
}

/** Deletes every key a test made under `prefix`: leases, histories and the fleet's hash. */
export async function dropKeys(redis: Redis, prefix: string): Promise<void> {
  const keys = await redis.keys(`${prefix}*`);
  if (keys.length > 0) await redis.del(...keys);
}

/**
 * A redis-server of a test's own on `port`, keeping nothing on disk (with `args` added, and `cwd` for the files
 * of a cluster node); resolves once it accepts connections.
 */
export async function startRedis(port: number, args: string[] = [], cwd?: string): Promise<ChildProcess> {
  const server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...args],
    { stdio: ['ignore', 'pipe', 'inherit'], cwd },
  );
  let output = '';
  server.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  await new Promise<void>((resolve, reject) => {
    server.on('error', (error) =>
      reject(new Error(`cannot start redis-server (${error.message}); install it`)),
    );
    server.on('exit', (code) => reject(new Error(`redis-server exited (${code}): ${output}`)));
    server.stdout!.on('data', () => output.includes('Ready to accept connections') && resolve());
  });
  return server;
}
