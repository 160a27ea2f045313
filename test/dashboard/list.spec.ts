// The list with many jobs (SPEC 20, "usable with 100,000 jobs"): counts by state, pages of at most 100 rows, a
// filter by state and a search by name, a cursor that walks every job once, and a page whose size does not grow
// with the number of jobs. On Express and Fastify, behind a global prefix.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { dashboardApp, type DashboardApp } from './app.js';

/** The jobs the tests add beside the four of the application (app.ts). */
const ADDED = 2_500;
type Answer = Record<string, unknown>;
interface ListAnswer {
  jobs: { name: string; status: { state: string }; health: { status: string } }[];
  total: number;
  counts: Record<string, number>;
  matched: number;
  offset: number;
  nextCursor: string | null;
}

describe.each(['express', 'fastify'] as const)('on %s: the list of thousands of jobs', (platform) => {
  let served: DashboardApp;
  const call = (path: string) => fetch(`${served.url}${path}`);
  const list = async (query: string) => {
    const response = await call(`/api/jobs${query}`);
    expect(response.status).toBe(200);
    return (await response.json()) as ListAnswer;
  };
  const refusal = async (query: string) => {
    const response = await call(`/api/jobs${query}`);
    return [response.status, ((await response.json()) as Answer).message];
  };

  beforeAll(async () => {
    served = await dashboardApp({ platform, prefix: 'admin' });
    for (let i = 0; i < ADDED; i++) {
      served.registry.add(`Tenant-${i}.Report`, () => undefined, { every: 3_600_000, mode: 'manual' });
    }
    // Every hundredth paused, with a note.
    for (let i = 0; i < ADDED; i += 100) await served.registry.pause(`Tenant-${i}.Report`, { note: 'moved' });
  }, 60_000);
  afterAll(() => served?.close());

  it('GET api/jobs answers a page of 100 with the counts of every job by state and a cursor', async () => {
    const first = await list('');
    expect(first.jobs).toHaveLength(100);
    expect(first.jobs.slice(0, 5).map((job) => job.name)).toEqual([
      'Reports.nightly',
      'Feeds.import',
      'Cleanup.purge',
      'Search.reindex',
      'Tenant-0.Report',
    ]);
    expect(first).toMatchObject({ total: ADDED + 4, matched: ADDED + 4, offset: 0 });
    expect(first.counts).toMatchObject({ paused: ADDED / 100, completed: 0 });
    // Every job ticks but the paused ones (Search.reindex, in manual mode, ticks too).
    expect(first.counts.ticking).toBe(ADDED + 4 - ADDED / 100);
    expect(typeof first.nextCursor).toBe('string');
  });

  it('the cursors walk every job once, in the order they were registered', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: ListAnswer = await list(
        `?limit=100${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`,
      );
      expect(page.offset).toBe(seen.length);
      seen.push(...page.jobs.map((job) => job.name));
      cursor = page.nextCursor;
      pages++;
    } while (cursor !== null);
    expect(pages).toBe(Math.ceil((ADDED + 4) / 100));
    expect(seen).toEqual(served.registry.getAll().map((scheduler) => scheduler.name));
  });

  it('?state= and ?q= filter, and the cursor walks what they match', async () => {
    const paused = await list('?state=paused');
    expect(paused.jobs.map((job) => job.name)).toEqual(
      Array.from({ length: ADDED / 100 }, (_, i) => `Tenant-${i * 100}.Report`),
    );
    expect(paused.jobs.every((job) => job.status.state === 'paused')).toBe(true);
    expect([paused.matched, paused.nextCursor]).toEqual([ADDED / 100, null]);
    // A part of the name, in any case.
    const found = await list(`?q=${encodeURIComponent('TENANT-24')}&limit=7`);
    expect(found.matched).toBe(111); // Tenant-24, Tenant-240 … 249, Tenant-2400 … 2499
    expect(found.jobs.map((job) => job.name)).toEqual([
      'Tenant-24.Report',
      ...Array.from({ length: 6 }, (_, i) => `Tenant-${240 + i}.Report`),
    ]);
    const next = await list(`?q=tenant-24&limit=7&cursor=${encodeURIComponent(found.nextCursor!)}`);
    expect([next.offset, next.jobs[0]!.name]).toEqual([7, 'Tenant-246.Report']);
    // Both at once: the paused jobs whose name holds "-1" (Tenant-100, Tenant-1000 … Tenant-1900).
    const both = await list('?state=paused&q=-1');
    expect(both.jobs.map((job) => job.name)).toEqual([
      'Tenant-100.Report',
      ...Array.from({ length: 10 }, (_, i) => `Tenant-${1000 + i * 100}.Report`),
    ]);
  });

  it('a page goes on with the jobs registered after the last of the page before, whatever was removed since', async () => {
    const first = await list('?q=Tenant-7&limit=3');
    expect(first.jobs.map((job) => job.name)).toEqual([
      'Tenant-7.Report',
      'Tenant-70.Report',
      'Tenant-71.Report',
    ]);
    // Jobs before the cursor's and the cursor's own removed; the cursor's added again, at the end.
    for (const name of ['Tenant-7.Report', 'Tenant-70.Report', 'Tenant-71.Report'])
      await served.registry.remove(name);
    served.registry.add('Tenant-71.Report', () => undefined, { every: 3_600_000, mode: 'manual' });
    try {
      const seen: string[] = [];
      let cursor: string | null = first.nextCursor;
      while (cursor !== null) {
        const page: ListAnswer = await list(`?q=Tenant-7&limit=3&cursor=${encodeURIComponent(cursor)}`);
        seen.push(...page.jobs.map((job) => job.name));
        cursor = page.nextCursor;
      }
      // Tenant-72 … 79, Tenant-700 … 799, then Tenant-71 again, registered last: none skipped, none twice.
      const expected = [
        ...Array.from({ length: 8 }, (_, i) => `Tenant-${72 + i}.Report`),
        ...Array.from({ length: 100 }, (_, i) => `Tenant-${700 + i}.Report`),
        'Tenant-71.Report',
      ];
      expect(seen).toEqual(expected);
    } finally {
      for (const name of ['Tenant-7.Report', 'Tenant-70.Report']) {
        served.registry.add(name, () => undefined, { every: 3_600_000, mode: 'manual' });
      }
    }
  });

  it('a value the list cannot take is a 400 that says why', async () => {
    expect(await refusal('?state=sleeping')).toEqual([
      400,
      '?state= must be one of ticking, paused, running, down, completed, got "sleeping": leave it out for every job',
    ]);
    expect(await refusal('?state=paused&state=down')).toEqual([
      400,
      "?state= must be given once, as plain text, got [ 'paused', 'down' ]",
    ]);
    // A parameter the list does not take, brackets included, is refused, never ignored.
    for (const query of ['?state[]=paused', '?q[a]=1', '?page=2']) {
      const name = query.slice(1).split('=')[0]!;
      expect(await refusal(query)).toEqual([
        400,
        `the list takes only ?state=, ?q=, ?handler=, ?cursor=, ?limit=, got "${name}": remove it`,
      ]);
    }
    expect(await refusal('?limit=101')).toEqual([400, '?limit= must be 1 to 100 rows, got 101']);
    expect(await refusal('?limit=0')).toEqual([400, '?limit= must be 1 to 100 rows, got 0']);
    expect((await refusal('?limit=ten'))[0]).toBe(400);
    expect(await refusal(`?q=${'x'.repeat(201)}`)).toEqual([
      400,
      "?q= is a part of a job's name, at most 200 characters, got 201",
    ]);
    for (const cursor of [
      'nope',
      Buffer.from('[-1,"a"]').toString('base64url'),
      Buffer.from('{}').toString('base64url'),
    ]) {
      expect(await refusal(`?cursor=${cursor}`)).toEqual([
        400,
        `?cursor= must be a nextCursor the dashboard answered, got "${cursor}": leave it out for the first page`,
      ]);
    }
  });

  it('the page shows 100 rows, the counts as links, a search form and the link to the next page', async () => {
    const response = await call('');
    expect(response.status).toBe(200);
    const html = await response.text();
    expect(html.match(/<tr role="row" data-job=/g)).toHaveLength(100);
    // The page's size does not grow with the jobs: 100 rows of a few hundred bytes each.
    expect(Buffer.byteLength(html)).toBeLessThan(200_000);
    expect(html).toContain(`all <b>${(ADDED + 4).toLocaleString('en-US')}</b>`);
    expect(html).toContain('<a href="periodic?state=paused">paused <b>25</b></a>');
    // The field counts UTF-16 units, the list code points: 200 characters outside the BMP fit in it.
    expect(html).toContain('<input type="search" name="q" maxlength="400" value="">');
    expect(html).toContain(`Jobs 1–100 of ${(ADDED + 4).toLocaleString('en-US')}`);
    // The next page, as a browser follows the link: the rows after these.
    const next = /<a href="periodic(\?cursor=[^"]+)" rel="next">Next page<\/a>/.exec(html)![1]!;
    const second = await (await call(next.replaceAll('&#38;', '&'))).text();
    expect(second).toContain('Jobs 101–200 of');
    expect(second).toContain(`data-job="${served.registry.getAll()[100]!.name}"`);
    expect(second).toContain('First page');
    // An address the list cannot take answers a page that says why, and leads back to the list.
    const bad = await call('?state=%3Cb%3Esleeping');
    expect([bad.status, bad.headers.get('content-type')]).toEqual([400, 'text/html; charset=utf-8']);
    const said = await bad.text();
    expect(said).toContain('<h1>The list cannot show that</h1>');
    expect(said).toContain('got &#34;&#60;b&#62;sleeping&#34;: leave it out for every job.');
    expect(said).toContain('<nav><a href="periodic">All jobs</a></nav>');
    // A page of another size keeps it in its links.
    const small = await (await call('?limit=5')).text();
    expect(small).toMatch(/<a href="periodic\?limit=5&#38;cursor=[^"]+" rel="next">Next page<\/a>/);
    // The search as the form sends it: what it was given stays in the field, escaped.
    const searched = await (await call('?q=%3Cb%3E&state=')).text();
    expect(searched).toContain('value="&#60;b&#62;"');
    expect(searched).toContain('No job matches.');
  });
});
