// A store that answers too slowly for the schedule (SPEC 21): two replicas share 40 exclusive jobs every
// 200 ms through Redis behind a proxy that then delays every answer by 150 ms each way, so that a claim's round
// trip outlasts the interval. Ticks come late or are missed; no lease is lost, given up or taken again (the
// fencing tokens stay); no slot runs twice; and once the store is fast again, every slot runs.
import { expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { PeriodicModule, RedisCoordinator } from '../../lib/index.js';
import { type TestApp, useApps } from '../nest/helpers.js';
import { TcpProxy } from '../proxy.js';
import { describeWithRedis, dropKeys, REDIS_URL, redisClient, uniquePrefix } from '../redis/redis.js';

const describeRedis = await describeWithRedis();

const LEASE_MS = 1500;
const EVERY = 200;
const JOBS = 40;

describeRedis('a store slowed down under two replicas', () => {
  const createApp = useApps();

  it('makes ticks late or missed, keeps every lease, and every slot runs again once it is fast', async () => {
    const url = new URL(REDIS_URL);
    const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 6379) });
    const keyPrefix = uniquePrefix();
    const clients = [0, 1].map(() => new Redis(proxy.port, '127.0.0.1').on('error', () => undefined));
    /** Each job's runs: the slot and the fencing token. */
    const runs = new Map<string, { slot: number; token: number }[]>();
    try {
      const apps: TestApp[] = [];
      for (const client of clients) {
        const coordinator = new RedisCoordinator({ client, keyPrefix, leaseMs: LEASE_MS });
        const app = await createApp({ imports: [PeriodicModule.forRoot({ coordinator, logger: false })] });
        for (let i = 0; i < JOBS; i++) {
          const name = `job-${i}`;
          app.registry.add(
            name,
            ({ scheduledDate, fencingToken }) => {
              const list = runs.get(name) ?? [];
              list.push({ slot: scheduledDate.getTime(), token: fencingToken! });
              runs.set(name, list);
            },
            { every: EVERY, exclusive: true },
          );
        }
        apps.push(app);
      }
      const held = (app: TestApp) => app.registry.statusAll().filter((job) => job.lease?.held).length;
      const settled = performance.now();
      while (apps.map(held).join() !== `${JOBS / 2},${JOBS / 2}` && performance.now() - settled < 20_000) {
        await sleep(50);
      }
      expect(apps.map(held)).toEqual([JOBS / 2, JOBS / 2]);
      await sleep(4 * EVERY);
      const tokens = () => new Map([...runs].map(([name, list]) => [name, list.at(-1)!.token]));
      const before = tokens();
      expect(before.size).toBe(JOBS);
      const seenFrom = apps.map((app) => app.seen.length);
      const since = (type: string) =>
        apps.flatMap((app, i) => app.seen.slice(seenFrom[i]).filter((event) => event.type === type));

      proxy.delay(150);
      await sleep(3000);
      proxy.delay(0);
      // The late answers drain, and each job's next tick claims on time again: from the moment no tick has been
      // missed for a lease period (on a loaded machine the drain takes longer than on a quiet one).
      let missed = since('missed').length;
      let quietSince = Date.now();
      for (const began = Date.now(); Date.now() - quietSince < LEASE_MS && Date.now() - began < 20_000;) {
        await sleep(50);
        if (since('missed').length !== missed) [missed, quietSince] = [since('missed').length, Date.now()];
      }
      const from = Date.now();
      await sleep(2000);
      const to = Date.now() - 2 * EVERY;

      expect(since('missed').length).toBeGreaterThan(0);
      expect(since('leaseLost')).toEqual([]);
      expect(since('leaseAcquired')).toEqual([]);
      expect(tokens()).toEqual(before);
      for (const [name, list] of runs) {
        const slots = list.map((run) => run.slot);
        expect({ name, twice: slots.length - new Set(slots).size }).toEqual({ name, twice: 0 });
        // After the overload, each slot of the job's grid from `from` to `to`, once.
        const recovered = slots.filter((slot) => slot >= from && slot <= to).sort((a, b) => a - b);
        const first = slots[0] + Math.ceil((from - slots[0]) / EVERY) * EVERY;
        const due = Array.from({ length: Math.floor((to - first) / EVERY) + 1 }, (_, k) => first + k * EVERY);
        expect({ name, recovered }).toEqual({ name, recovered: due });
      }
      for (const app of apps) await app.close();
    } finally {
      for (const client of clients) client.disconnect();
      await proxy.close();
      const cleanup = redisClient();
      await dropKeys(cleanup, keyPrefix);
      cleanup.disconnect();
    }
  }, 60_000);
});
