// The dashboard as a hardened page on the web, on Express and on Fastify: its security headers, addresses that
// never come from the request, actions only from its own origin (X-Forwarded-* only behind a trusted proxy),
// 'none' that cannot be told from an unmounted path, every valid name in its addresses, at most 10 actions a
// second per job, and a page that tells the truth at a glance.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { until } from '../nest/helpers.js';
import { dashboardApp, type DashboardApp } from './app.js';

/** An answer as the wire carried it. */
interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A request sent as written, its path untouched by any URL parser (fetch would normalise it). */
function raw(
  base: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Raw> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const sent = httpRequest(
      { host: hostname, port, path, method: options.method ?? 'GET', headers: options.headers ?? {} },
      (response) => {
        let body = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (body += chunk));
        response.on('end', () => resolve({ status: response.statusCode!, headers: response.headers, body }));
      },
    );
    sent.on('error', reject);
    sent.end(options.body);
  });
}

const SECURITY = {
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'same-origin',
};

/** Names of every kind the rule accepts. */
const NAMES = [
  'a/b',
  '50%',
  `?#&"'<>`,
  'x:y',
  '名前',
  '🚀 launch',
  '..x',
  'a b',
  '%E0%A4%A',
  'e'.repeat(200),
  '😀'.repeat(100),
];

describe.each(['express', 'fastify'] as const)('on %s, behind a global prefix', (platform) => {
  let served: DashboardApp;
  let own: string;
  const path = (rest: string) => `/admin/periodic${rest}`;
  const act = (name: string, action: string, headers: Record<string, string> = {}) =>
    raw(served.url, path(`/api/jobs/${encodeURIComponent(name)}/${action}`), {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: own, ...headers },
      body: '{}',
    });

  beforeAll(async () => {
    served = await dashboardApp({ platform, prefix: 'admin' });
    own = new URL(served.url).origin;
  }, 30_000);
  afterAll(() => served?.close());

  it('every answer of the page, its assets and its API carries the security headers; the API also no-store', async () => {
    const answers: [string, Raw, boolean][] = [];
    for (const page of [
      '',
      '/jobs/Feeds.import',
      '/jobs/Nope',
      '/assets/dashboard.js',
      '/assets/dashboard.css',
    ]) {
      answers.push([page, await raw(served.url, path(page)), false]);
    }
    answers.push(['/assets/icon.svg', await raw(served.url, path('/assets/icon.svg')), false]);
    for (const api of [
      '/api/jobs',
      '/api/jobs/Feeds.import',
      '/api/jobs/Feeds.import/history',
      '/api/jobs/Nope',
    ]) {
      answers.push([api, await raw(served.url, path(api)), true]);
    }
    answers.push([
      'POST 415',
      await raw(served.url, path('/api/jobs/Feeds.import/pause'), { method: 'POST' }),
      true,
    ]);
    answers.push(['POST 403', await act('Feeds.import', 'pause', { origin: 'https://evil.example' }), true]);
    answers.push(['POST read', await act('Feeds.import', 'pause', { 'x-role': 'read' }), true]);
    for (const [what, answer, api] of answers) {
      expect([what, answer.headers]).toEqual([what, expect.objectContaining(SECURITY)]);
      const policy = String(answer.headers['content-security-policy']);
      expect([what, policy]).toEqual([what, expect.stringContaining("frame-ancestors 'none'")]);
      expect(policy).toContain("script-src 'self'");
      expect(policy).not.toMatch(/unsafe-inline|unsafe-eval/);
      if (api) expect([what, answer.headers['cache-control']]).toEqual([what, 'no-store']);
    }
  });

  it("the page never writes the request's address into its HTML: its addresses come from where it is mounted", async () => {
    const odd = [
      '?"zq1=1><zq2>',
      '#"zq1=1><zq2>',
      '/jobs/Feeds.import?"zq1=1><zq2>',
      '/jobs/Feeds.import#"zq1=1><zq2>',
      `/jobs/${encodeURIComponent('"zq1=1><zq2>')}`,
      '/jobs/%22zq1=1%3E%3Czq2%3E',
      '/jobs/Feeds.import;"zq1=1><zq2>',
    ].map((rest) => path(rest));
    // Express matches paths whatever their case: the page's addresses keep the mount's.
    if (platform === 'express')
      odd.push('/admin/PERIODIC', '/ADMIN/Periodic/jobs/Feeds.import', '/admin/periodic/');
    let pages = 0;
    for (const address of odd) {
      const answer = await raw(served.url, address);
      // The platform's own 404 says what was asked, as JSON; a page of the dashboard never does.
      if (!String(answer.headers['content-type']).includes('text/html')) continue;
      pages++;
      expect([address, answer.body]).not.toEqual([address, expect.stringMatching(/zq1=1>|<zq2>/)]);
      const links = [...answer.body.matchAll(/(?:href|src|data-api)="([^"]*)"/g)].map((match) => match[1]);
      const below = address.split('?')[0].split('/').length - 3 - (address.includes('/jobs/') ? 0 : 0);
      const depth = '../'.repeat(Math.max(0, below));
      expect(links.length).toBeGreaterThan(3);
      for (const link of links) {
        expect([address, link]).toEqual([
          address,
          // The dashboard's root, a page below it, or the root with a filter of the list (?state=…).
          expect.stringMatching(new RegExp(`^${depth}periodic(/|\\?|$)`)),
        ]);
      }
    }
    expect(pages).toBeGreaterThanOrEqual(5);
  });

  describe('a POST is accepted only from the same origin', () => {
    it.each([
      ['another site', { origin: 'https://evil.example' }],
      ['a same-site origin', { origin: 'http://other.localhost' }],
      ['another port', { origin: 'http://127.0.0.1:1' }],
      ['a browser that says same-site', { 'sec-fetch-site': 'same-site' }],
      ['a browser that says cross-site', { 'sec-fetch-site': 'cross-site' }],
      ['the opaque origin', { origin: 'null' }],
      ['no Origin, a foreign Referer', { origin: '', referer: 'https://evil.example/page' }],
      ['neither Origin nor Referer', { origin: '' }],
      // Without a trusted proxy, X-Forwarded-Host is anyone's to write.
      [
        'a foreign Origin that X-Forwarded-Host matches',
        { origin: 'https://evil.example', 'x-forwarded-host': 'evil.example', 'x-forwarded-proto': 'https' },
      ],
    ])('%s: 403, and nothing done', async (_, headers: Record<string, string>) => {
      const sent = Object.fromEntries(Object.entries(headers).filter(([, value]) => value !== ''));
      const answer = await raw(served.url, path('/api/jobs/Reports.nightly/pause'), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(headers.origin === '' ? {} : { origin: own }),
          ...sent,
        },
        body: '{}',
      });
      expect(answer.status).toBe(403);
      expect(served.registry.status('Reports.nightly').state).toBe('ticking');
    });

    it('its own origin, or without an Origin its own Referer: 200', async () => {
      expect((await act('Reports.nightly', 'resume', { 'sec-fetch-site': 'same-origin' })).status).toBe(200);
      const referred = await raw(served.url, path('/api/jobs/Reports.nightly/resume'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', referer: `${served.url}/jobs/Reports.nightly` },
        body: '{}',
      });
      expect(referred.status).toBe(200);
    });
  });

  it("'none' cannot be told from a path where nothing is mounted: the platform's own 404", async () => {
    const nobody = { 'x-role': 'none' };
    for (const [method, rest] of [
      ['GET', ''],
      ['GET', '/jobs/Feeds.import'],
      ['GET', '/jobs/Nope'],
      ['GET', '/assets/dashboard.js'],
      ['GET', '/api/jobs'],
      ['GET', '/api/jobs/Feeds.import/history'],
      ['GET', '/jobs/%E0%A4%A'],
      ['POST', '/api/jobs/Feeds.import/pause'],
    ]) {
      const options = {
        method,
        headers: { ...nobody, 'content-type': 'application/json' },
        body: method === 'POST' ? '{}' : undefined,
      };
      const dashboard = await raw(served.url, path(rest), options);
      const nowhere = await raw(served.url, `/admin/nowhere${rest}`, options);
      const shown = (answer: Raw, mount: string) => ({
        status: answer.status,
        type: answer.headers['content-type'],
        body: answer.body.replace(mount, '{mount}'),
        headers: Object.keys(answer.headers)
          .filter((name) => !['date', 'etag', 'content-length'].includes(name))
          .sort(),
      });
      expect([method, rest, shown(dashboard, '/admin/periodic')]).toEqual([
        method,
        rest,
        shown(nowhere, '/admin/nowhere'),
      ]);
      expect(dashboard.status).toBe(rest.includes('%E0') ? 400 : 404);
    }
  });

  it("'none', without a global prefix: a path that is not valid percent-encoding is answered as where nothing is mounted", async () => {
    const bare = await dashboardApp({ platform });
    try {
      const base = new URL(bare.url).origin;
      for (const rest of ['/jobs/%E0%A4%A', '/api/jobs/%ZZ', '/api/jobs/%ZZ/history']) {
        const options = { headers: { 'x-role': 'none' } };
        const dashboard = await raw(base, `/periodic${rest}`, options);
        const nowhere = await raw(base, `/nowhere${rest}`, options);
        const shown = (answer: Raw, mount: string) => ({
          status: answer.status,
          type: answer.headers['content-type'],
          body: answer.body.replace(mount, '{mount}'),
        });
        expect([rest, shown(dashboard, '/periodic')]).toEqual([rest, shown(nowhere, '/nowhere')]);
        expect(dashboard.status).toBe(platform === 'fastify' ? 400 : 404);
      }
    } finally {
      await bare.close();
    }
  });

  it('a name that is not valid percent-encoding is answered as an unknown job', async () => {
    const page = await raw(served.url, path('/jobs/%E0%A4%A'));
    expect([page.status, page.headers['content-type']]).toEqual([404, 'text/html; charset=utf-8']);
    expect(page.body).toContain('No job by that name');
    for (const rest of ['/api/jobs/%E0%A4%A', '/api/jobs/%E0%A4%A/history', '/api/jobs/%ZZ/audit']) {
      const answer = await raw(served.url, path(rest));
      expect([rest, answer.status, JSON.parse(answer.body).message]).toEqual([rest, 404, 'no job named so']);
    }
    expect(
      (
        await raw(served.url, path('/api/jobs/%E0%A4%A/trigger'), {
          method: 'POST',
          headers: { 'content-type': 'application/json', origin: own },
          body: '{}',
        })
      ).status,
    ).toBe(404);
  });

  it("an incident shows on the list and the job's page, its detail (an error's message) escaped", async () => {
    served.registry.add(
      'Hostile.error',
      () => {
        throw new Error('<script>alert(1)</script> & "quoted"\u0000\u001b[31m');
      },
      { every: 100 },
    );
    try {
      const job = await until(async () => {
        const answer = JSON.parse((await raw(served.url, path('/api/jobs/Hostile.error'))).body) as {
          incidents: { kind: string; detail: string }[];
        };
        return answer.incidents.length > 0 ? answer : undefined;
      });
      expect(job.incidents).toEqual([
        {
          kind: 'failing',
          since: expect.any(String),
          detail:
            '3 slots in a row failed after their retries; the last: Error: <script>alert(1)</script> & "quoted"  [31m',
        },
      ]);
      for (const page of [path('/jobs/Hostile.error'), path('')]) {
        const { body } = await raw(served.url, page);
        expect(body).toContain('incident: failing');
        expect(body).not.toContain('<script>alert');
        // The run's error in the history too: no control character that HTML does not allow.
        expect([body.includes('\u0000'), body.includes('\u001b')]).toEqual([false, false]);
      }
      const { body } = await raw(served.url, path('/jobs/Hostile.error'));
      expect(body).toContain('&#60;script&#62;alert(1)&#60;/script&#62; &#38; &#34;quoted&#34;');
    } finally {
      await served.registry.remove('Hostile.error');
    }
  });

  it('every valid name works in the page, the API and a trigger', async () => {
    const runs: string[] = [];
    for (const name of NAMES) served.registry.add(name, () => void runs.push(name), { every: 3_600_000 });
    try {
      for (const name of NAMES) {
        const encoded = encodeURIComponent(name);
        const page = await raw(served.url, path(`/jobs/${encoded}`));
        expect([name, page.status]).toEqual([name, 200]);
        expect(page.body).toContain(
          `data-job="${name.replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`)}"`,
        );
        const job = await raw(served.url, path(`/api/jobs/${encoded}`));
        expect([name, job.status, JSON.parse(job.body).name]).toEqual([name, 200, name]);
        const triggered = await act(name, 'trigger');
        expect([name, triggered.status, JSON.parse(triggered.body)]).toEqual([
          name,
          200,
          { ok: true, jobId: 1 },
        ]);
        const history = await raw(served.url, path(`/api/jobs/${encoded}/history`));
        expect(JSON.parse(history.body).runs).toMatchObject([{ name, origin: 'trigger' }]);
      }
      expect(new Set(runs)).toEqual(new Set(NAMES));
      // The list links to each by its encoded name.
      const list = (await raw(served.url, path(''))).body;
      for (const name of NAMES)
        expect(list).toContain(`href="periodic/jobs/${encodeURIComponent(name).replaceAll("'", '&#39;')}"`);
    } finally {
      for (const name of NAMES) await served.registry.remove(name);
    }
  }, 30_000);

  it('a property: a generated name goes through registry.add, the API and back', async () => {
    // Short names and long ones (percent-encoded, a long name passes Fastify's 100 characters of a parameter).
    const legal = fc
      .oneof(
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 200 }),
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 200, size: 'max' }),
      )
      // eslint-disable-next-line no-control-regex -- the rule refuses control characters: the property replaces them
      .map((text) => text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '·'))
      // '.' and '..' are refused by the options (a URL cannot name them), tested in options.spec.
      .filter((text) => text.trim() !== '' && text !== '.' && text !== '..' && [...text].length <= 200);
    await fc.assert(
      fc.asyncProperty(legal, async (name) => {
        if (served.registry.has(name)) return;
        served.registry.add(name, () => undefined, { every: 3_600_000 });
        try {
          const job = await raw(served.url, path(`/api/jobs/${encodeURIComponent(name)}`));
          expect([job.status, JSON.parse(job.body).name]).toEqual([200, name]);
          const page = await raw(served.url, path(`/jobs/${encodeURIComponent(name)}`));
          expect(page.status).toBe(200);
          expect((await act(name, 'pause')).status).toBe(200);
          expect(served.registry.status(name).state).toBe('paused');
        } finally {
          await served.registry.remove(name);
        }
      }),
      { numRuns: Number(process.env.NUM_RUNS ?? 40) },
    );
  }, 60_000);

  it('at most 10 actions a second per job: 300 triggers at once start about 10 runs, the others 429 with Retry-After', async () => {
    let started = 0;
    served.registry.add(
      'Burst.job',
      async () => {
        started++;
        await sleep(200);
      },
      { every: 3_600_000, onOverlap: 'run' },
    );
    try {
      const began = performance.now();
      const answers = await Promise.all(Array.from({ length: 300 }, () => act('Burst.job', 'trigger')));
      const seconds = Math.ceil((performance.now() - began) / 1000);
      const ok = answers.filter((answer) => answer.status === 200).length;
      const limited = answers.filter((answer) => answer.status === 429);
      expect(ok + limited.length).toBe(300);
      // 10 in any second: a burst that took longer than a second may start 10 more each second.
      expect(ok).toBeGreaterThanOrEqual(10);
      expect(ok).toBeLessThanOrEqual(10 * seconds);
      expect(started).toBeLessThanOrEqual(10 * seconds);
      expect(limited[0].headers['retry-after']).toMatch(/^[1-9]\d*$/);
      expect(JSON.parse(limited[0].body)).toMatchObject({ ok: false, error: 'tooManyActions' });
      // Another job has its own budget.
      expect((await act('Reports.nightly', 'resume')).status).toBe(200);
    } finally {
      await served.registry.remove('Burst.job');
    }
  }, 30_000);

  it('tells the truth at a glance: Pause or Resume, "paused" as the next tick, tokens on the job page, no guard, a cron with seconds', async () => {
    served.registry.add('Seconds.job', () => undefined, { cron: '*/10 * * * * *', timezone: 'UTC' });
    try {
      expect((await act('Cleanup.purge', 'pause')).status).toBe(200);
      const list = (await raw(served.url, path(''))).body;
      const row = (name: string) =>
        list.match(new RegExp(`<tr role="row" data-job="${name.replace('.', '\\.')}">[\\s\\S]*?</tr>`))![0];
      const purge = row('Cleanup.purge');
      expect(purge).toContain('data-action="resume"');
      expect(purge).not.toContain('data-action="pause"');
      expect(purge).toMatch(/data-label="Next tick"[^>]*>paused</);
      expect(row('Feeds.import')).toContain('data-action="pause"');
      expect(row('Feeds.import')).not.toContain('data-action="resume"');
      expect(list).not.toContain('token');
      // Every relative time has its exact time on hover.
      for (const [, title] of list.matchAll(/<time [^>]*?(title="[^"]*")?>/g)) expect(title).toBeDefined();
      expect(row('Seconds.job')).toMatch(/<time [^>]*>\w{3}\u00a0\d\d:\d\d:\d0<\/time>/);
      const page = (await raw(served.url, path('/jobs/Cleanup.purge'))).body;
      expect(page).toMatch(/fencing token \d+/);
      expect(page).toMatch(/<dt>Next tick<\/dt><dd>paused<\/dd>/);
      expect(page).toContain('<dt>guard</dt><dd>no guard</dd>');
      // The job's page says each time exactly, beside its distance.
      expect(page).toMatch(/data-absolute="[^"]+">\(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\u00a0UTC\)/);
    } finally {
      await act('Cleanup.purge', 'resume');
      await served.registry.remove('Seconds.job');
    }
  });
});

describe.each(['express', 'fastify'] as const)('on %s behind a trusted proxy', (platform) => {
  let served: DashboardApp;

  beforeAll(async () => {
    served = await dashboardApp({ platform, trustProxy: true });
  }, 30_000);
  afterAll(() => served?.close());

  it('the origin is the one X-Forwarded-Proto and X-Forwarded-Host say', async () => {
    const post = (headers: Record<string, string>) =>
      raw(served.url, '/periodic/api/jobs/Reports.nightly/resume', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: '{}',
      });
    const forwarded = { 'x-forwarded-host': 'jobs.example.com', 'x-forwarded-proto': 'https' };
    expect((await post({ ...forwarded, origin: 'https://jobs.example.com' })).status).toBe(200);
    expect((await post({ ...forwarded, origin: 'https://evil.example' })).status).toBe(403);
    expect((await post({ ...forwarded, origin: 'http://jobs.example.com' })).status).toBe(403);
    expect((await post({ ...forwarded, origin: new URL(served.url).origin })).status).toBe(403);
  });
});
