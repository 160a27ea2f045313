// The dashboard over HTTP, on Express and on Fastify: its JSON API, access per request, the refusals a browser
// cannot get round (415 for a form, 403 for a reader and for another site), relative addresses behind a global
// prefix and a proxy path, and its size.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createServer, request as httpRequest, type Server } from 'node:http';
import { gzipSync } from 'node:zlib';
import { setTimeout as sleep } from 'node:timers/promises';
import { PeriodicConfigError } from 'nestjs-periodic';
import { PeriodicDashboardModule } from 'nestjs-periodic/dashboard';
import { rootOf } from '../../lib/dashboard/controller.js';
import { dashboardApp, NIGHTLY_CRON, type DashboardApp } from './app.js';

const json = { 'content-type': 'application/json' };
/** A JSON answer, as the tests read it: checked by matchers, not by types. */
type Answer = Record<string, unknown>;
const read = async <T = Answer[]>(response: Response) => (await response.json()) as T;

describe.each(['express', 'fastify'] as const)('on %s, behind a global prefix', (platform) => {
  let served: DashboardApp;
  const call = (path: string, init: RequestInit & { headers?: Record<string, string> } = {}) =>
    fetch(`${served.url}${path}`, init);
  // A script acts with the dashboard's own Origin, as the page does.
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    call(path, {
      method: 'POST',
      headers: { ...json, origin: new URL(served.url).origin, ...headers },
      body: JSON.stringify(body),
    });

  beforeAll(async () => {
    served = await dashboardApp({ platform, prefix: 'admin' });
    // Every fourth run of Feeds.import fails.
    while (!(await served.registry.history('Feeds.import')).some((run) => run.reason === 'error')) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }, 30_000);
  afterAll(() => served?.close());

  it('GET api/jobs: every job with its status, and the fleet status of the exclusive ones', async () => {
    const response = await call('/api/jobs');
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const { store, jobs } = await read<{ store: Answer; jobs: Answer[] }>(response);
    expect(store).toMatchObject({ reachable: true, lastError: null });
    expect(jobs.map((job) => job.name)).toEqual([
      'Reports.nightly',
      'Feeds.import',
      'Cleanup.purge',
      'Search.reindex',
    ]);
    const [nightly, feeds, purge] = jobs;
    expect(nightly).toMatchObject({
      exclusive: false,
      fleetStatus: null,
      schedule: {
        text: `${NIGHTLY_CRON} Europe/Berlin`,
        next: [expect.any(String), expect.any(String), expect.any(String)],
      },
      status: { name: 'Reports.nightly', state: 'ticking', mode: 'auto' },
      health: { status: 'up' },
    });
    expect(purge).toMatchObject({
      exclusive: true,
      schedule: { text: 'every 1 s', next: [] },
      fleetStatus: { name: 'Cleanup.purge', holder: { replica: 'web-1' }, store: { reachable: true } },
    });
    expect(feeds.lastRun).toMatchObject({ name: 'Feeds.import', origin: 'schedule' });
  });

  it('GET api/jobs/:name/history and audit; a bad query is 400, an unknown job 404', async () => {
    const runs = async (path: string) => (await read<{ runs: Answer[] }>(await call(path))).runs;
    const history = await runs('/api/jobs/Feeds.import/history?limit=3');
    expect(history).toHaveLength(3);
    expect(history[0]).toMatchObject({ name: 'Feeds.import', replica: 'web-1', attempt: 1 });
    // A run's error as the history keeps it: its name and message, never a stack.
    const errors = (await runs('/api/jobs/Feeds.import/history')).filter((run) => run.reason === 'error');
    expect(errors[0].error).toEqual({ name: 'Error', message: 'the feed answered 503' });
    const many = await call('/api/jobs/Feeds.import/history?limit=many');
    expect([many.status, (await read<Answer>(many)).message]).toEqual([
      400,
      '?limit= must be a whole number, such as ?limit=20, got "many"',
    ]);
    expect((await call('/api/jobs/Feeds.import/history?before=yesterday')).status).toBe(400);
    expect((await call('/api/jobs/Feeds.import/audit?limit=0')).status).toBe(400);
    expect((await call('/api/jobs/Nope/history')).status).toBe(404);
    expect((await call('/api/jobs/Nope')).status).toBe(404);
    expect((await call('/jobs/Nope')).status).toBe(404);
    expect(await (await call('/api/jobs/Cleanup.purge/audit')).json()).toMatchObject({ entries: [] });
  });

  it('POST pause, resume and trigger act with the actor, and the audit trail says who and why', async () => {
    const paused = await post(
      '/api/jobs/Cleanup.purge/pause',
      { note: 'migrating' },
      { 'x-user': 'ops@example.com' },
    );
    expect([paused.status, await paused.json()]).toEqual([200, { ok: true }]);
    expect((await served.registry.fleetStatus('Cleanup.purge')).paused).toMatchObject({
      by: 'ops@example.com',
      note: 'migrating',
    });
    const refused = await post('/api/jobs/Cleanup.purge/trigger', {});
    expect([refused.status, await refused.json()]).toEqual([
      409,
      {
        ok: false,
        error: 'paused',
        message: 'trigger of job "Cleanup.purge" started nothing: the job is paused',
      },
    ]);
    expect((await post('/api/jobs/Cleanup.purge/resume', {}, { 'x-user': 'ops@example.com' })).status).toBe(
      200,
    );
    const triggered = await post(
      '/api/jobs/Reports.nightly/trigger',
      { note: 'rerun after the fix' },
      { 'x-user': 'ops@example.com' },
    );
    expect(await triggered.json()).toEqual({ ok: true, jobId: expect.any(Number) });
    const audit = (await read<{ entries: Answer[] }>(await call('/api/jobs/Cleanup.purge/audit'))).entries;
    expect(audit.map(({ action, by, note }) => [action, by, note])).toEqual([
      ['resume', 'ops@example.com', null],
      ['pause', 'ops@example.com', 'migrating'],
    ]);
    // A trigger's audit entry is written beside its run, once the run has started.
    const triggers = async () =>
      (await read<{ entries: Answer[] }>(await call('/api/jobs/Reports.nightly/audit'))).entries;
    for (let waited = 0; (await triggers()).length === 0 && waited < 5000; waited += 20) await sleep(20);
    expect((await triggers()).map(({ action, by, note }) => [action, by, note])).toEqual([
      ['trigger', 'ops@example.com', 'rerun after the fix'],
    ]);
  });

  it('POST backfill runs a past range on the holder, audited; cancelBackfill says what it dropped; bad ranges are 400', async () => {
    const to = Date.now();
    const asked = await post(
      '/api/jobs/Cleanup.purge/backfill',
      { from: new Date(to - 5000).toISOString(), to: new Date(to).toISOString(), note: 'the outage' },
      { 'x-user': 'ops@example.com' },
    );
    expect([asked.status, await asked.json()]).toEqual([200, { ok: true, slots: 5 }]);
    const backfilled = async () =>
      (await served.registry.history('Cleanup.purge', { limit: 100 })).filter(
        (run) => run.origin === 'backfill',
      );
    for (let waited = 0; (await backfilled()).length < 5 && waited < 10_000; waited += 20) await sleep(20);
    const slots = (await backfilled()).map((run) => run.slot!.getTime());
    expect(slots).toHaveLength(5);
    expect(slots.every((slot) => slot >= to - 5000 && slot < to)).toBe(true);
    const cancelled = await post('/api/jobs/Cleanup.purge/cancelBackfill', {});
    expect([cancelled.status, await cancelled.json()]).toEqual([200, { ok: true, dropped: 0 }]);
    const audit = (await read<{ entries: Answer[] }>(await call('/api/jobs/Cleanup.purge/audit'))).entries;
    expect(audit[0]).toMatchObject({ action: 'backfill', by: 'ops@example.com', note: 'the outage' });
    const tooMany = await post('/api/jobs/Cleanup.purge/backfill', {
      from: new Date(to - 20_000_000).toISOString(),
      to: new Date(to).toISOString(),
    });
    expect(tooMany.status).toBe(400);
    expect((await read<Answer>(tooMany)).message).toMatch(/has more than 10000 slots of the job's schedule/);
    const future = await post('/api/jobs/Cleanup.purge/backfill', {
      from: new Date(to).toISOString(),
      to: new Date(to + 3_600_000).toISOString(),
    });
    expect([future.status, (await read<Answer>(future)).message]).toEqual([
      400,
      expect.stringMatching(/"to" must not be in the future/),
    ]);
    const missing = await post('/api/jobs/Cleanup.purge/backfill', { to: new Date(to).toISOString() });
    expect([missing.status, (await read<Answer>(missing)).message]).toEqual([
      400,
      expect.stringMatching(/^"from" must be an instant as ISO 8601 text/),
    ]);
    const extra = await post('/api/jobs/Cleanup.purge/backfill', { from: 'a', to: 'b', force: true });
    expect(extra.status).toBe(400);
  });

  it('POST schedule and remove edit a stored schedule at the version the page read; a stale one is 409', async () => {
    const { schedules } = served.registry;
    const name = `report:${platform}`;
    await schedules.upsert(
      {
        name,
        handler: 'tenant-report',
        cron: '0 8 * * 1-5',
        timezone: 'Europe/Paris',
        jitter: 500,
        data: { tenantId: 'acme' },
      },
      { by: 'signup' },
    );
    const path = `/api/jobs/${encodeURIComponent(name)}`;
    const changed = await post(
      `${path}/schedule`,
      { ifVersion: 1, every: 60_000 },
      { 'x-user': 'ops@example.com' },
    );
    expect([changed.status, await changed.json()]).toEqual([200, { ok: true, version: 2 }]);
    // The timing replaced, every other option and the data kept.
    const saved = await schedules.get(name);
    expect(saved).toMatchObject({
      every: 60_000,
      jitter: 500,
      data: { tenantId: 'acme' },
      version: 2,
      updatedBy: 'ops@example.com',
    });
    expect(saved).not.toHaveProperty('cron');
    const job = await read<Answer>(await call(path));
    expect(job).toMatchObject({
      stored: { handler: 'tenant-report', version: 2, updatedBy: 'ops@example.com' },
    });

    // An edit read at version 1 is stale: 409 with the version now, and nothing changed.
    const stale = await post(`${path}/schedule`, { ifVersion: 1, cron: '0 9 * * *', timezone: 'UTC' });
    expect([stale.status, await stale.json()]).toEqual([
      409,
      {
        ok: false,
        error: 'conflict',
        currentVersion: 2,
        message: `change of schedule "${name}" refused: it was changed since the page was read (version 1, now 2). Read it again, then edit it.`,
      },
    ]);
    expect((await post(`${path}/remove`, { ifVersion: 1 })).status).toBe(409);
    expect((await schedules.get(name))?.version).toBe(2);

    // A body it cannot take, or a timing the schedule cannot take: 400, with why.
    for (const body of [
      {},
      { every: 1000 },
      { ifVersion: 2 },
      { ifVersion: 2, every: 1000, cron: '* * * * *' },
      { ifVersion: 2, every: 1000, timezone: 'UTC' },
      { ifVersion: 2, every: 1000, note: 'x' },
      { ifVersion: '2', every: 1000 },
    ]) {
      expect((await post(`${path}/schedule`, body)).status).toBe(400);
    }
    const bad = await post(`${path}/schedule`, { ifVersion: 2, every: -5 });
    expect([bad.status, (await read<Answer>(bad)).message]).toEqual([
      400,
      expect.stringMatching(/"every".*-5/),
    ]);
    const badZone = await post(`${path}/schedule`, {
      ifVersion: 2,
      cron: '0 8 * * *',
      timezone: 'Mars/Olympus',
    });
    expect([badZone.status, (await read<Answer>(badZone)).message]).toEqual([
      400,
      expect.stringMatching(/Mars\/Olympus/),
    ]);
    // A decorated job's timing is in the code.
    const decorated = await post('/api/jobs/Cleanup.purge/schedule', { ifVersion: 1, every: 5000 });
    expect([decorated.status, (await read<Answer>(decorated)).message]).toEqual([
      400,
      expect.stringContaining('"Cleanup.purge" is not a stored schedule'),
    ]);
    // A reader may not; another site may not.
    expect((await post(`${path}/remove`, { ifVersion: 2 }, { 'x-role': 'read' })).status).toBe(403);
    expect((await post(`${path}/remove`, { ifVersion: 2 }, { origin: 'https://evil.example' })).status).toBe(
      403,
    );
    expect((await schedules.get(name))?.version).toBe(2);

    const removed = await post(`${path}/remove`, { ifVersion: 2 }, { 'x-user': 'ops@example.com' });
    expect([removed.status, await removed.json()]).toEqual([200, { ok: true, version: null }]);
    expect(await schedules.get(name)).toBeNull();
    // An edit of a schedule removed since the page was read: the same conflict, with no version now.
    const gone = await post(`${path}/schedule`, { ifVersion: 2, every: 1000 });
    expect([gone.status, await gone.json()]).toEqual([
      409,
      {
        ok: false,
        error: 'conflict',
        currentVersion: null,
        message: `change of schedule "${name}" refused: it was removed since the page was read (or never was). Go back to the list.`,
      },
    ]);
    expect((await served.registry.audit(name)).map(({ action, by }) => [action, by])).toEqual([
      ['remove', 'ops@example.com'],
      ['update', 'ops@example.com'],
      ['create', 'signup'],
    ]);
  });

  it('refuses what a cross-site form could send (415), another site (403), and bad bodies (400)', async () => {
    const form = await call('/api/jobs/Reports.nightly/pause', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'note=x',
    });
    expect(form.status).toBe(415);
    const text = await call('/api/jobs/Reports.nightly/pause', {
      method: 'POST',
      headers: { 'content-type': 'text/plain' },
      body: '{}',
    });
    expect(text.status).toBe(415);
    expect((await call('/api/jobs/Reports.nightly/pause', { method: 'POST' })).status).toBe(415);
    expect(
      (await post('/api/jobs/Reports.nightly/pause', {}, { 'sec-fetch-site': 'cross-site' })).status,
    ).toBe(403);
    // A browser that sends no Sec-Fetch-Site: its Origin against the host it asked.
    expect(
      (await post('/api/jobs/Reports.nightly/pause', {}, { origin: 'https://evil.example' })).status,
    ).toBe(403);
    expect((await post('/api/jobs/Reports.nightly/pause', {}, { origin: 'null' })).status).toBe(403);
    const own = new URL(served.url).origin;
    expect((await post('/api/jobs/Reports.nightly/resume', {}, { origin: own })).status).toBe(200);
    expect((await post('/api/jobs/Reports.nightly/pause', null)).status).toBe(400);
    expect((await post('/api/jobs/Reports.nightly/pause', { note: 5 })).status).toBe(400);
    expect((await post('/api/jobs/Reports.nightly/pause', { reason: 'x' })).status).toBe(400);
    expect((await post('/api/jobs/Reports.nightly/trigger', { note: 5 })).status).toBe(400);
    expect((await post('/api/jobs/Reports.nightly/stop', {})).status).toBe(404);
    expect((await post('/api/jobs/Nope/pause', {})).status).toBe(404);
    expect(served.registry.status('Reports.nightly').state).toBe('ticking');
  });

  it("access per request: 'read' sees everything and may do nothing (403); 'none' finds nothing (404)", async () => {
    const reader = { 'x-role': 'read' };
    expect((await call('/api/jobs', { headers: reader })).status).toBe(200);
    expect((await call('', { headers: reader })).status).toBe(200);
    expect((await post('/api/jobs/Reports.nightly/pause', {}, reader)).status).toBe(403);
    expect((await post('/api/jobs/Reports.nightly/trigger', {}, reader)).status).toBe(403);
    expect(served.registry.status('Reports.nightly').state).toBe('ticking');
    const nobody = { 'x-role': 'none' };
    for (const path of [
      '',
      '/jobs/Feeds.import',
      '/api/jobs',
      '/api/jobs/Feeds.import/history',
      '/assets/dashboard.js',
    ]) {
      expect([path, (await call(path, { headers: nobody })).status]).toEqual([path, 404]);
    }
    expect((await post('/api/jobs/Reports.nightly/pause', {}, nobody)).status).toBe(404);
    // An access function that answers something else is the application's bug: a 500, never a way in.
    expect((await call('/api/jobs', { headers: { 'x-role': 'admin' } })).status).toBe(500);
  });

  it('serves its pages and assets with addresses relative to the page: under the prefix, the assets load', async () => {
    const page = await call('');
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const html = await page.text();
    for (const asset of [...html.matchAll(/(?:href|src)="([^"]+\/assets\/[^"]+)"/g)].map(
      (match) => match[1],
    )) {
      const response = await fetch(new URL(asset, served.url));
      expect([asset, response.status]).toEqual([asset, 200]);
    }
    // Runs shorter than 10 ms: the chart says how long to two digits, not "1 ms". The job is paused while the
    // page is read, so that its history holds still; how long its runs took depends on the machine's load.
    await served.registry.pause('Cleanup.purge');
    let runs = await served.registry.history('Cleanup.purge');
    while (runs.length === 0 || runs.some((run) => run.durationMs === null)) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      runs = await served.registry.history('Cleanup.purge');
    }
    const purge = await (await call('/jobs/Cleanup.purge')).text();
    await served.registry.resume('Cleanup.purge');
    const longest = Math.max(...runs.map((run) => run.durationMs!));
    const shown = longest < 10 ? String(Number(longest.toPrecision(2))) : String(Math.round(longest));
    expect(purge).toContain(`oldest first, longest ${shown}\u00a0ms`);
    if (longest < 1) expect(shown).toMatch(/^0\.\d+$/);
    const job = await (await call('/jobs/Feeds.import')).text();
    // The name may break after its dot in a narrow column.
    expect(job).toContain('<h1>Feeds.<wbr>import</h1>');
    expect(job).toContain('href="../../periodic"');
  });
});

describe.each(['/ops/jobs', '/'])(
  'the page at %p under a proxy that mounts the application under a path of its own',
  (path) => {
    let served: DashboardApp;
    let proxy: Server;
    let base: string;

    beforeAll(async () => {
      served = await dashboardApp({ path });
      const target = new URL(served.url);
      // /tools/* → the application's /*, as an ingress that strips a prefix does.
      proxy = createServer((request, response) => {
        const forward = httpRequest(
          {
            host: target.hostname,
            port: target.port,
            method: request.method,
            path: request.url!.replace(/^\/tools/, ''),
            headers: request.headers,
          },
          (answer) => {
            response.writeHead(answer.statusCode!, answer.headers);
            answer.pipe(response);
          },
        );
        request.pipe(forward);
      });
      await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
      const address = proxy.address() as { port: number };
      base = `http://127.0.0.1:${address.port}/tools${path}`;
    }, 30_000);
    afterAll(async () => {
      await new Promise((resolve) => proxy?.close(resolve));
      await served?.close();
    });

    it('every address of the list and of a job page resolves through the proxy', async () => {
      for (const page of [base, `${base.replace(/\/$/, '')}/jobs/Feeds.import`]) {
        const html = await (await fetch(page)).text();
        const addresses = [...html.matchAll(/(?:href|src|data-api)="([^"#:]+)"/g)].map((match) => match[1]);
        expect(addresses.length).toBeGreaterThan(3);
        for (const address of addresses) {
          const url = new URL(address.endsWith('/api') ? `${address}/jobs` : address, page);
          expect([address, url.pathname.startsWith(`/tools${path}`), (await fetch(url)).status]).toEqual([
            address,
            true,
            200,
          ]);
        }
      }
    });
  },
);

describe('the dashboard module', () => {
  it('needs access: without it, a PeriodicConfigError that says why and how', () => {
    expect(() => PeriodicDashboardModule.forRoot({} as never)).toThrow(PeriodicConfigError);
    expect(() => PeriodicDashboardModule.forRoot({} as never)).toThrow(
      /PeriodicDashboardModule.forRoot\(\): "access" must be a function of the request that returns 'operate', 'read' or 'none', got undefined; the dashboard shows every job/,
    );
    expect(() => PeriodicDashboardModule.forRoot({ access: () => 'read', path: 'periodic' })).toThrow(
      /"path" must be a path that starts with '\/'.*got "periodic"/,
    );
    expect(() => PeriodicDashboardModule.forRoot({ access: () => 'read', path: '/a/../b' })).toThrow(
      /"path"/,
    );
    expect(() => PeriodicDashboardModule.forRoot({ access: () => 'read', acess: 1 } as never)).toThrow(
      /unknown option "acess"; did you mean "access"\?/,
    );
  });

  it('ships its page, script and stylesheet in well under 100 kB gzipped', async () => {
    const served = await dashboardApp();
    try {
      const bodies = await Promise.all(
        ['', '/jobs/Feeds.import', '/assets/dashboard.js', '/assets/dashboard.css', '/assets/icon.svg'].map(
          async (path) => Buffer.from(await (await fetch(`${served.url}${path}`)).arrayBuffer()),
        ),
      );
      const gzipped = bodies.reduce((sum, body) => sum + gzipSync(body).length, 0);
      expect(gzipped).toBeLessThan(100_000);
      expect(gzipped).toBeGreaterThan(1000);
    } finally {
      await served.close();
    }
  });

  it("without a history (history: false), the list's last run is the last end this process saw", async () => {
    const served = await dashboardApp({ history: false });
    try {
      while (served.registry.status('Feeds.import').lastFinished === null) await sleep(20);
      const [job] = (await read<{ jobs: Answer[] }>(await fetch(`${served.url}/api/jobs`))).jobs.filter(
        ({ name }) => name === 'Feeds.import',
      );
      expect(job).toMatchObject({ lastRun: null, status: { lastFinished: { reason: expect.any(String) } } });
      const list = await (await fetch(served.url)).text();
      const cell = list.match(
        /data-job="Feeds\.import"[\s\S]*?data-label="Last run"[^>]*>([\s\S]*?)<\/td>/,
      )![1];
      expect(cell).toMatch(/reason-(normal|error)/);
      expect(cell).not.toContain('never');
      // Its page says why it lists no run.
      const page = await (await fetch(`${served.url}/jobs/Feeds.import`)).text();
      expect(page).toContain('No history is kept');
    } finally {
      await served.close();
    }
  });

  it('finds its root from where it is mounted, with or without a trailing slash', () => {
    expect(rootOf('/periodic', 0, false)).toBe('periodic');
    expect(rootOf('/admin/periodic', 0, false)).toBe('periodic');
    expect(rootOf('/admin/periodic', 0, true)).toBe('../periodic');
    expect(rootOf('/admin/periodic/', 2, false)).toBe('../../periodic');
    // Mounted at the application's root.
    expect(rootOf('/', 0, false)).toBe('.');
    expect(rootOf('/', 2, false)).toBe('..');
  });
});
