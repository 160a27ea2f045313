// Check-ins (SPEC 25) from a real replica process on Redis and PostgreSQL, watched by a local HTTP server standing
// for the monitor: the pings come while the replica runs its job, and stop when it is SIGKILLed, which is the
// silence an outside monitor alerts on when no replica is left.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { stores, useReplicas } from './stores.js';

const EVERY = 200;
const pings: { path: string; at: number }[] = [];
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((request, response) => {
    pings.push({ path: request.url ?? '', at: Date.now() });
    request.resume();
    request.on('end', () => response.end('OK'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

describe.each(stores)('on %s', (_, store, describeStore) => {
  describeStore('a replica with check-ins', () => {
    const { start, end } = useReplicas(store);

    it('pings its monitor for each run, and falls silent when SIGKILLed', async () => {
      const job = `check-ins-${store.env.STORE ?? 'redis'}`;
      pings.length = 0;
      start('A', {
        LEASE_MS: '1500',
        EVERY: String(EVERY),
        RUN_MS: '20',
        JOB: job,
        CHECK_IN: `${base}/ping/${job}`,
      });
      for (let waited = 0; pings.filter((ping) => ping.path === `/ping/${job}`).length < 3; waited += 20) {
        if (waited > 30_000) throw new Error(`3 runs did not ping within 30 s: ${JSON.stringify(pings)}`);
        await sleep(20);
      }
      // A run's start comes before its end (a run's end may come after the next run's start).
      expect(pings[0].path).toBe(`/ping/${job}/start`);
      expect(pings.filter((ping) => ping.path === `/ping/${job}/start`).length).toBeGreaterThanOrEqual(3);
      await end('A', 'SIGKILL');
      // A ping the replica sent before it died may still be handled here just after; a live replica would ping
      // several times in the 6 intervals after that.
      const silentFrom = Date.now() + 2 * EVERY;
      await sleep(8 * EVERY);
      expect(pings.filter((ping) => ping.at > silentFrom)).toEqual([]);
    }, 60_000);
  });
});
