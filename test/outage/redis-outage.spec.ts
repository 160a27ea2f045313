// Redis away under a replica whose ioredis client keeps its defaults: ioredis queues the commands while it
// reconnects, and fails them only after 20 attempts, some ten seconds later. The outage must be reported from
// the moment commands stop answering, through a TCP proxy the test closes and opens again.
import { expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import { Periodic, PeriodicModule, RedisCoordinator } from '../../lib/index.js';
import { useApps } from '../nest/helpers.js';
import { TcpProxy } from '../proxy.js';
import { describeWithRedis, dropKeys, REDIS_URL, redisClient, uniquePrefix } from '../redis/redis.js';

const describeRedis = await describeWithRedis();

const LEASE_MS = 900;

describeRedis('Redis away under a client that queues commands', () => {
  const createApp = useApps();

  it('the outage is logged within leaseMs / 3 of the first command left unanswered, then once per lease period with the count, and its end once', async () => {
    const url = new URL(REDIS_URL);
    const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 6379) });
    // ioredis's defaults, as an application writes it; only its own error lines are silenced.
    const client = new Redis(proxy.port, '127.0.0.1').on('error', () => undefined);
    const keyPrefix = uniquePrefix();
    @Injectable()
    class Jobs {
      @Periodic({ every: 100, exclusive: true })
      report(): void {}
    }
    try {
      const coordinator = new RedisCoordinator({ client, keyPrefix, leaseMs: LEASE_MS });
      const app = await createApp({ imports: [PeriodicModule.forRoot({ coordinator })], providers: [Jobs] });
      await app.events.once('leaseAcquired');

      await proxy.refuse();
      const downAt = performance.now();
      const failures = () =>
        app.logs.periodic().filter((line) => line.startsWith('error: RedisCoordinator failed'));
      while (failures().length === 0 && performance.now() - downAt < 5000) await sleep(10);
      const reportedAfter = performance.now() - downAt;
      // The renewal due at most leaseMs / 3 after the cut, unanswered for leaseMs / 3.
      expect(reportedAfter).toBeLessThan(LEASE_MS);
      // The first command left unanswered: the job's renewal or claim, or the read of the fleet's open incidents.
      const [, unanswered] = /failed while .*: no answer after (\d+)ms/.exec(failures()[0]) ?? [];
      // Once a command has gone leaseMs / 3 unanswered, never sooner; a loaded machine's timers fire a little late.
      expect(Number(unanswered)).toBeGreaterThanOrEqual(LEASE_MS / 3);
      expect(Number(unanswered)).toBeLessThan(LEASE_MS / 3 + 200);

      await sleep(3 * LEASE_MS);
      const outage = performance.now() - downAt;
      expect(failures().length).toBeGreaterThanOrEqual(2);
      expect(failures().length).toBeLessThanOrEqual(Math.ceil(outage / LEASE_MS) + 1);
      expect(failures()[1]).toMatch(/\(\d+ more failed since the last report\)/);

      await proxy.accept();
      await app.events.once('leaseAcquired');
      expect(app.logs.periodic()).toContain(
        'log: RedisCoordinator answers again: exclusive jobs run again once they hold their lease',
      );
      await app.close();
    } finally {
      client.disconnect();
      await proxy.close();
      const cleanup = redisClient();
      await dropKeys(cleanup, keyPrefix);
      cleanup.disconnect();
    }
  }, 30_000);
});
