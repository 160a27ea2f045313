// The Lua scripts against a real Redis, and exclusive jobs of two applications sharing it.
import { afterAll, afterEach, beforeAll, beforeEach, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import type { Cluster, Redis } from 'ioredis';
import {
  Periodic,
  type PeriodicContext,
  PeriodicModule,
  type RedisClient,
  RedisCoordinator,
  type RedisCoordinatorOptions,
} from '../../lib/index.js';
import { useApps } from '../nest/helpers.js';
import { describeWithRedis, dropKeys, redisClient, uniquePrefix } from './redis.js';

const describeRedis = await describeWithRedis();

// ioredis's clients fit the coordinator's `client` (checked when the tests are type-checked, by npm run lint).
const clientsFit: [Redis, Cluster] extends [RedisClient, RedisClient] ? true : false = true;
void clientsFit;

describeRedis('the Lua scripts', () => {
  let redis: Redis;
  let prefix: string;
  let coordinator: RedisCoordinator;
  const leaseMs = 5000;

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(async () => {
    await redis.quit();
  });
  afterEach(() => dropKeys(redis, prefix));

  const make = (options: Partial<RedisCoordinatorOptions> = {}) =>
    new RedisCoordinator({ client: redis, keyPrefix: prefix, leaseMs, ...options });

  beforeEach(() => {
    prefix = uniquePrefix();
    coordinator = make();
  });

  it('acquire sets <keyPrefix><name> to the token for leaseMs and counts the fencing token up', async () => {
    await expect(coordinator.store.acquire('cleanup', 'token-a')).resolves.toBe(1);
    expect(await redis.get(`${prefix}cleanup`)).toBe('token-a');
    const ttl = await redis.pttl(`${prefix}cleanup`);
    expect(ttl).toBeGreaterThan(leaseMs - 1000);
    expect(ttl).toBeLessThanOrEqual(leaseMs);
    expect(await redis.hget(prefix, 'cleanup')).toBe('1');
  });

  it('acquire of a held lease returns 0 and changes nothing, not even the counter', async () => {
    await coordinator.store.acquire('cleanup', 'token-a');
    await expect(coordinator.store.acquire('cleanup', 'token-b')).resolves.toBe(0);
    expect(await redis.get(`${prefix}cleanup`)).toBe('token-a');
    expect(await redis.hget(prefix, 'cleanup')).toBe('1');
  });

  it('fencing tokens grow with every acquisition, per job', async () => {
    const tokens: number[] = [];
    for (const token of ['a', 'b', 'c']) {
      tokens.push(await coordinator.store.acquire('cleanup', token));
      await coordinator.store.release('cleanup', token);
    }
    expect(tokens).toEqual([1, 2, 3]);
    await expect(coordinator.store.acquire('report', 'd')).resolves.toBe(1);
  });

  it('renew with the holding token resets the expiry to leaseMs; with a stale one it does nothing', async () => {
    await coordinator.store.acquire('cleanup', 'token-a');
    await redis.pexpire(`${prefix}cleanup`, 100);
    await expect(coordinator.store.renew('cleanup', 'stale')).resolves.toBe(false);
    expect(await redis.pttl(`${prefix}cleanup`)).toBeLessThanOrEqual(100);
    await expect(coordinator.store.renew('cleanup', 'token-a')).resolves.toBe(true);
    expect(await redis.pttl(`${prefix}cleanup`)).toBeGreaterThan(leaseMs - 1000);
  });

  it('renew of an expired lease fails, and does not bring it back', async () => {
    await coordinator.store.acquire('cleanup', 'token-a');
    await redis.del(`${prefix}cleanup`);
    await expect(coordinator.store.renew('cleanup', 'token-a')).resolves.toBe(false);
    expect(await redis.exists(`${prefix}cleanup`)).toBe(0);
  });

  it('release with a stale token leaves the lease; with the holding token deletes it, not the counter', async () => {
    await coordinator.store.acquire('cleanup', 'token-a');
    await expect(coordinator.store.release('cleanup', 'stale')).resolves.toBe(false);
    expect(await redis.get(`${prefix}cleanup`)).toBe('token-a');
    await expect(coordinator.store.release('cleanup', 'token-a')).resolves.toBe(true);
    expect(await redis.exists(`${prefix}cleanup`)).toBe(0);
    expect(await redis.hget(prefix, 'cleanup')).toBe('1');
  });

  it('a lease expires by itself after leaseMs', async () => {
    const short = make({ leaseMs: 100 });
    await short.store.acquire('cleanup', 'token-a');
    await new Promise((resolve) => setTimeout(resolve, 200));
    await expect(short.store.acquire('cleanup', 'token-b')).resolves.toBe(2);
  });

  it('scripts go by EVALSHA, and are sent whole once when Redis does not know them', async () => {
    await redis.script('FLUSH');
    const evalCalls = jest.spyOn(redis, 'eval');
    await expect(coordinator.store.acquire('cleanup', 'token-a')).resolves.toBe(1);
    await expect(coordinator.store.release('cleanup', 'token-a')).resolves.toBe(true);
    await expect(coordinator.store.acquire('cleanup', 'token-b')).resolves.toBe(2);
    expect(evalCalls).toHaveBeenCalledTimes(2); // acquire's script and release's, once each
    evalCalls.mockRestore();
  });

  it('a job named like another job plus a suffix has its own lease and counter', async () => {
    await coordinator.store.acquire('a', 'token-a');
    await expect(coordinator.store.acquire('a:fencing', 'token-b')).resolves.toBe(1);
    await expect(coordinator.store.acquire('a', 'token-c')).resolves.toBe(0);
  });
});

describeRedis('two applications with one exclusive job', () => {
  const createApp = useApps();
  const clients: Redis[] = [];
  const prefix = uniquePrefix();
  afterAll(async () => {
    await dropKeys(clients[0], prefix);
    await Promise.all(clients.map((client) => client.quit()));
  });

  const runs: { app: string; fencingToken: number | undefined }[] = [];

  function appNamed(app: string, keyPrefix: string) {
    @Injectable()
    class Reports {
      @Periodic({ every: 20, exclusive: true })
      send({ fencingToken }: PeriodicContext): void {
        runs.push({ app, fencingToken });
      }

      @Periodic({ every: 20, name: 'everywhere' })
      local(): void {}
    }
    const client = redisClient();
    clients.push(client);
    const coordinator = new RedisCoordinator({ client, keyPrefix, leaseMs: 300 });
    return createApp({ imports: [PeriodicModule.forRoot({ coordinator })], providers: [Reports] });
  }

  it('one runs the job; when it closes, the other takes over with a larger fencing token', async () => {
    const first = await appNamed('first', prefix);
    await first.events.once('leaseAcquired');
    const second = await appNamed('second', prefix);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(runs.length).toBeGreaterThan(5);
    expect(new Set(runs.map((run) => run.app))).toEqual(new Set(['first']));
    expect(second.seen.filter((event) => event.name === 'Reports.send').map((event) => event.type)).toEqual(
      expect.not.arrayContaining(['started', 'leaseAcquired']),
    );
    // The job that is not exclusive runs in both.
    expect(second.seen.some((event) => event.type === 'started' && event.name === 'everywhere')).toBe(true);

    const taken = second.events.once('leaseAcquired');
    await first.close();
    expect(first.logs.periodic()).toContain('log: Reports.send acquired its lease, fencing token 1');
    await taken;
    await new Promise((resolve) => setTimeout(resolve, 100));
    const handedOver = runs.filter((run) => run.app === 'second');
    expect(handedOver.length).toBeGreaterThan(0);
    expect(handedOver.every((run) => run.fencingToken === 2)).toBe(true);
    expect(second.logs.periodic()).toContain('log: Reports.send acquired its lease, fencing token 2');
  });
});
