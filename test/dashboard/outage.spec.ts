// The dashboard while the coordinator's store is away (Redis behind a TCP proxy the test closes), on Express and
// Fastify: every page renders from what this replica knows and says so at the top, the API's reads answer 200
// with what the store did not answer null and store.reachable false, its actions 503 storeUnreachable; and the
// page in Chromium, whose pictures the docs show (SCREENSHOTS=docs/images).
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { chromium } from 'playwright-core';
import { RedisCoordinator } from 'nestjs-periodic';
import { TcpProxy } from '../proxy.js';
import { describeWithRedis, dropKeys, REDIS_URL, redisClient, uniquePrefix } from '../redis/redis.js';
import { dashboardApp, type DashboardApp } from './app.js';

const describeRedis = await describeWithRedis();
const LEASE_MS = 1500;
type Answer = Record<string, unknown>;

/** An application on Redis through a proxy, whose exclusive job has run; `down()` closes the proxy. */
async function onRedis(platform: 'express' | 'fastify') {
  const url = new URL(REDIS_URL);
  const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 6379) });
  const client = new Redis(proxy.port, '127.0.0.1').on('error', () => undefined);
  const keyPrefix = uniquePrefix();
  const served = await dashboardApp({
    platform,
    coordinator: new RedisCoordinator({ client, keyPrefix, leaseMs: LEASE_MS }),
  });
  await until(async () => (await served.registry.history('Cleanup.purge')).length > 0);
  return {
    served,
    async down() {
      await proxy.refuse();
      // The store is seen down once a command has gone unanswered: a read of the list sends one.
      await until(async () => {
        const { store } = (await (await fetch(`${served.url}/api/jobs`)).json()) as { store: Answer };
        return store.reachable === false;
      });
    },
    async close() {
      await served.close();
      client.disconnect();
      await proxy.close();
      const cleanup = redisClient();
      await dropKeys(cleanup, keyPrefix);
      cleanup.disconnect();
    },
  };
}

describeRedis('with the store down', () => {
  describe.each(['express', 'fastify'] as const)('on %s', (platform) => {
    let app: Awaited<ReturnType<typeof onRedis>>;
    let served: DashboardApp;
    const call = (path: string) => fetch(`${served.url}${path}`);
    const post = (path: string) =>
      fetch(`${served.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', origin: new URL(served.url).origin },
        body: '{}',
      });

    beforeAll(async () => {
      app = await onRedis(platform);
      served = app.served;
      await app.down();
    }, 30_000);
    afterAll(() => app?.close());

    it('every page renders from what this replica knows, and says at the top that the store does not answer', async () => {
      for (const page of ['', '/jobs/Cleanup.purge', '/jobs/Feeds.import']) {
        const response = await call(page);
        const html = await response.text();
        expect([page, response.status]).toEqual([page, 200]);
        expect(html).toMatch(
          /<div data-live="store"><p class="banner" role="alert"><b>The coordinator’s store does not answer<\/b>/,
        );
      }
      const purge = await (await call('/jobs/Cleanup.purge')).text();
      expect(purge).toContain('The runs cannot be read now');
      expect(purge).toContain('The audit trail cannot be read now');
    });

    it('the API reads answer 200: what the store did not answer null, store.reachable false', async () => {
      const list = (await (await call('/api/jobs')).json()) as { store: Answer; jobs: Answer[] };
      expect(list.store).toMatchObject({ reachable: false, lastError: expect.any(String) });
      const purge = list.jobs.find(({ name }) => name === 'Cleanup.purge')!;
      expect(purge.fleetStatus).toMatchObject({
        nextSlot: null,
        lastSlot: null,
        store: { reachable: false },
      });
      const job = await call('/api/jobs/Cleanup.purge');
      expect([job.status, await job.json()]).toEqual([
        200,
        expect.objectContaining({
          name: 'Cleanup.purge',
          store: expect.objectContaining({ reachable: false }),
        }),
      ]);
      for (const [record, field] of [
        ['history', 'runs'],
        ['audit', 'entries'],
      ]) {
        const answer = await call(`/api/jobs/Cleanup.purge/${record}`);
        expect([record, answer.status, await answer.json()]).toEqual([
          record,
          200,
          { store: expect.objectContaining({ reachable: false }), [field]: null },
        ]);
      }
    });

    it("actions on the store's jobs answer 503 storeUnreachable, with a message; a job of this process still acts", async () => {
      for (const action of ['pause', 'resume', 'trigger']) {
        const began = performance.now();
        const answer = await post(`/api/jobs/Cleanup.purge/${action}`);
        expect([action, answer.status, await answer.json()]).toEqual([
          action,
          503,
          { ok: false, error: 'storeUnreachable', message: expect.stringContaining('Cleanup.purge') },
        ]);
        expect(performance.now() - began).toBeLessThan(LEASE_MS + 1000);
      }
      expect((await post('/api/jobs/Reports.nightly/trigger')).status).toBe(200);
    });
  });

  it('in Chromium: the list and a job page with the store down, as the docs show them', async () => {
    const shots = process.env.SCREENSHOTS ?? join(tmpdir(), 'nestjs-periodic-screenshots');
    mkdirSync(shots, { recursive: true });
    const app = await onRedis('express');
    const browser = await chromium.launch({
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    });
    const problems: string[] = [];
    try {
      // Runs to show before the store goes away.
      await until(async () => (await app.served.registry.history('Feeds.import')).length >= 12);
      await app.down();
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      page.on('pageerror', (error) => problems.push(error.message));
      await page.goto(app.served.url);
      await page.getByRole('alert').filter({ hasText: 'The coordinator’s store does not answer' }).waitFor();
      // An action on an exclusive job says why it failed, in words.
      const purge = page
        .getByRole('row')
        .filter({ has: page.getByRole('rowheader', { name: 'Cleanup.purge', exact: true }) });
      await purge.getByRole('button', { name: 'Pause', exact: true }).click();
      await page.getByRole('status').filter({ hasText: 'pause failed: the store does not answer' }).waitFor();
      await page.screenshot({ path: join(shots, 'dashboard-outage-list.png'), fullPage: true });
      await page.goto(`${app.served.url}/jobs/Cleanup.purge`);
      await page.getByText('The runs cannot be read now').waitFor();
      await page.getByRole('alert').waitFor();
      await page.screenshot({ path: join(shots, 'dashboard-outage-job.png'), fullPage: true });
      await context.close();
      expect(problems).toEqual([]);
    } finally {
      await browser.close();
      await app.close();
    }
  }, 60_000);
});

/** Waits, with a wide margin, for what a test needs: 20 s at most. */
async function until(done: () => Promise<boolean>): Promise<void> {
  for (const began = performance.now(); !(await done()); await sleep(50)) {
    if (performance.now() - began > 20_000) throw new Error('waited 20 s in vain');
  }
}
