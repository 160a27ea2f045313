// Redis goes away while a replica holds the lease of an exclusive job, and comes back. This test runs its own
// redis-server on a free port, so that stopping it disturbs no other test.
import { afterAll, afterEach, expect, it } from '@jest/globals';
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import { Redis } from 'ioredis';
import { Periodic, type PeriodicContext, PeriodicModule, RedisCoordinator } from '../../lib/index.js';
import { useApps } from '../nest/helpers.js';
import { describeWithRedisServer } from './redis.js';

const describeRedis = await describeWithRedisServer();

const LEASE_MS = 600;

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** A redis-server of this test's own, keeping nothing on disk; resolves once it accepts connections. */
async function startRedis(port: number): Promise<ChildProcess> {
  const server = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let output = '';
  server.stdout!.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const ready = new Promise<void>((resolve, reject) => {
    server.on('error', (error) =>
      reject(new Error(`cannot start redis-server (${error.message}); install it`)),
    );
    server.on('exit', (code) => reject(new Error(`redis-server exited (${code}): ${output}`)));
    server.stdout!.on('data', () => output.includes('Ready to accept connections') && resolve());
  });
  await ready;
  return server;
}

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
    let localRuns = 0;
    @Injectable()
    class Jobs {
      @Periodic({ every: 50, exclusive: true, name: 'report' })
      report({ startedAt }: PeriodicContext): void {
        exclusiveStarts.push(startedAt);
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
    await sleep(300);
    expect(exclusiveStarts.length).toBeGreaterThan(3);

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
    await app.events.once('leaseAcquired');
    await sleep(300);
    expect(exclusiveStarts.filter((startedAt) => startedAt > upAt).length).toBeGreaterThan(3);
    expect(app.logs.periodic()).toContain(
      'log: RedisCoordinator answers again: exclusive jobs run again once they hold their lease',
    );
    await app.close();
    for (const remaining of servers) await kill(remaining);
  }, 60_000);
});
