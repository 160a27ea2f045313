// Redis goes away while a replica holds the lease of an exclusive job, and comes back. This test runs its own
// redis-server on a free port, so that stopping it disturbs no other test.
import { afterAll, afterEach, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import { Periodic, type PeriodicContext, PeriodicModule, RedisCoordinator } from '../../lib/index.js';
import { freePort } from '../nest/child-app.js';
import { until, useApps } from '../nest/helpers.js';
import { describeWithRedisServer, startRedis } from './redis.js';

const describeRedis = await describeWithRedisServer();

const LEASE_MS = 600;

describeRedis('Redis stopped and restarted', () => {
  const createApp = useApps();
  const servers = new Set<ChildProcess>();
  const clients: Redis[] = [];
  afterEach(() => {
    for (const server of servers) server.kill('SIGKILL');
  });
  afterAll(() => clients.forEach((client) => client.disconnect()));

  it('no run starts once the lease has run out, nothing crashes, and runs resume when Redis is back', async () => {
    const port = await freePort();
    const kill = async (server: ChildProcess) => {
      server.kill('SIGKILL');
      await once(server, 'exit');
      servers.delete(server);
    };
    servers.add(await startRedis(port));

    const exclusiveStarts: number[] = [];
    const tokens: number[] = [];
    let localRuns = 0;
    @Injectable()
    class Jobs {
      @Periodic({ every: 50, exclusive: true, name: 'report' })
      report({ startedAt, fencingToken }: PeriodicContext): void {
        exclusiveStarts.push(startedAt);
        tokens.push(fencingToken!);
      }

      @Periodic({ every: 50, name: 'local' })
      local(): void {
        localRuns++;
      }
    }
    // Commands fail after one reconnection attempt instead of waiting in ioredis's queue for many.
    const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 }).on('error', () => undefined);
    clients.push(client);
    const coordinator = new RedisCoordinator({ client, leaseMs: LEASE_MS });
    const app = await createApp({ imports: [PeriodicModule.forRoot({ coordinator })], providers: [Jobs] });
    await app.events.once('leaseAcquired');
    // Runs every 50 ms: four come within a second on a loaded machine.
    await until(() => (exclusiveStarts.length > 3 ? true : undefined));

    const [server] = servers;
    await kill(server);
    const downAt = performance.now();
    const localBefore = localRuns;
    await app.events.once('leaseLost');
    const lostAt = performance.now();
    await sleep(4 * LEASE_MS);
    const outage = performance.now() - downAt;

    // The holder stopped within one lease of Redis going away, and no run started after that.
    expect(lostAt - downAt).toBeLessThan(LEASE_MS);
    expect(exclusiveStarts.filter((startedAt) => startedAt > lostAt)).toEqual([]);
    // The rest of the application kept working.
    expect(localRuns - localBefore).toBeGreaterThan(outage / 50 / 2);
    // Errors are logged, at most once per lease period.
    const errors = app.logs.periodic().filter((line) => line.startsWith('error: RedisCoordinator failed'));
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.length).toBeLessThanOrEqual(Math.ceil(outage / LEASE_MS) + 1);

    servers.add(await startRedis(port));
    const upAt = performance.now();
    const lastBefore = exclusiveStarts.at(-1)!;
    const tokenBefore = tokens.at(-1)!;
    const { fencingToken } = await app.events.once('leaseAcquired');
    const after = await until(() => {
      const since = exclusiveStarts.filter((startedAt) => startedAt > upAt);
      return since.length > 3 ? since : undefined;
    });
    // The new Redis kept nothing (no persistence): the token still grows, floored at Redis's clock.
    expect(fencingToken).toBeGreaterThan(tokenBefore);
    console.log(
      `Redis restart: the lease was lost ${(lostAt - downAt).toFixed(0)} ms after Redis went away; the first ` +
        `run came ${(after[0] - upAt).toFixed(0)} ms after it was back (no exclusive run for ` +
        `${(after[0] - lastBefore).toFixed(0)} ms, of which ${(upAt - downAt).toFixed(0)} ms down; leaseMs ${LEASE_MS})`,
    );
    expect(app.logs.periodic()).toContain(
      'log: RedisCoordinator answers again: exclusive jobs run again once they hold their lease',
    );
    await app.close();
    for (const remaining of servers) await kill(remaining);
  }, 60_000);

  it('a Redis without persistence forgets a pause when it restarts, and the replica says so (storeReset), as docs/operations.md says', async () => {
    const port = await freePort();
    const server = await startRedis(port);
    servers.add(server);
    const starts: number[] = [];
    const client = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 }).on('error', () => undefined);
    clients.push(client);
    const coordinator = new RedisCoordinator({ client, leaseMs: LEASE_MS });
    const app = await createApp({ imports: [PeriodicModule.forRoot({ coordinator })] });
    app.registry.add('report', () => void starts.push(performance.now()), { every: 50, exclusive: true });
    await app.events.once('leaseAcquired');
    await app.registry.pause('report', { by: 'alice' });
    await sleep(300);
    const pausedAt = performance.now();
    server.kill('SIGKILL');
    await once(server, 'exit');
    servers.delete(server);
    await app.events.once('leaseLost');
    const reset = app.events.once('storeReset');
    servers.add(await startRedis(port));
    const upAt = performance.now();
    expect(await reset).toEqual({ type: 'storeReset', lost: ['pauses', 'audit', 'history'] });
    await app.events.once('started');
    expect(app.logs.periodic().filter((line) => line.includes("lost the fleet's records"))).toEqual([
      expect.stringMatching(/^error: RedisCoordinator lost the fleet's records \(pauses, audit, history\)/),
    ]);
    expect(starts.filter((at) => at > pausedAt && at < upAt)).toEqual([]);
    expect(await coordinator.readPause('report')).toBeNull();
    expect(await app.registry.audit('report')).toEqual([]);
    await app.close();
  }, 60_000);
});
