// The dashboard in a real browser, as an operator uses it: Debian's Chromium (CHROMIUM_PATH, default
// /usr/bin/chromium) driven by playwright-core. The list, a job's page, "Trigger", "Pause" with a note,
// "Resume", the read-only view, the page without JavaScript and a 375 px phone; any console error fails the
// test. Screenshots go to SCREENSHOTS (npm run docs:screenshots writes docs/images) or a temporary folder.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { dashboardApp, NIGHTLY_CRON, type DashboardApp } from './app.js';

const shots = process.env.SCREENSHOTS ?? join(tmpdir(), 'nestjs-periodic-screenshots');
let browser: Browser;
let served: DashboardApp;
/** Every console error and uncaught exception of every page, with where it came from. */
const problems: string[] = [];

beforeAll(async () => {
  mkdirSync(shots, { recursive: true });
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium' });
  served = await dashboardApp({ prefix: 'admin' });
  // Runs to show: Feeds.import runs every 300 ms, and every fourth run fails.
  await until(async () => (await served.registry.history('Feeds.import')).length >= 12);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await served?.close();
});

async function open(
  options: {
    headers?: Record<string, string>;
    width?: number;
    javaScript?: boolean;
    /** For a test that adds a style of its own to the page, which the dashboard's policy refuses. */
    bypassCSP?: boolean;
  } = {},
) {
  const context: BrowserContext = await browser.newContext({
    viewport: { width: options.width ?? 1280, height: 900 },
    extraHTTPHeaders: options.headers ?? {},
    javaScriptEnabled: options.javaScript ?? true,
    bypassCSP: options.bypassCSP ?? false,
    timezoneId: 'Asia/Tokyo',
  });
  const page = await context.newPage();
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`${page.url()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`${page.url()}: ${error.message}`));
  return { context, page };
}

/** A job's row in the list, found as a person finds it: by the job's name in its row header. */
const row = (page: Page, name: string) =>
  page.getByRole('row').filter({ has: page.getByRole('rowheader', { name, exact: true }) });

describe('the dashboard in Chromium', () => {
  it('lists every job with its Trigger button, and Pause or Resume as applies; they work, and the page says so', async () => {
    const { context, page } = await open({ headers: { 'x-user': 'alice@example.com' } });
    await page.goto(served.url);
    await expect(page.getByRole('heading', { name: 'Periodic jobs' }).isVisible()).resolves.toBe(true);
    for (const name of ['Reports.nightly', 'Feeds.import', 'Cleanup.purge', 'Search.reindex']) {
      for (const [label, count] of [
        ['Trigger', 1],
        ['Pause', 1],
        ['Resume', 0],
      ] as const) {
        await expect(row(page, name).getByRole('button', { name: label, exact: true }).count()).resolves.toBe(
          count,
        );
      }
    }
    const nightly = row(page, 'Reports.nightly');
    await expect(nightly.getByRole('cell').nth(0).textContent()).resolves.toContain(
      `${NIGHTLY_CRON} Europe/Berlin`,
    );
    await expect(nightly.locator('[data-label="Last run"]').textContent()).resolves.toBe('never');

    // Trigger: the run starts, the page says which, and the row shows it without a reload.
    await nightly.getByRole('button', { name: 'Trigger', exact: true }).click();
    await page.getByRole('status').filter({ hasText: 'Triggered Reports.nightly, run #1' }).waitFor();
    await nightly.locator('[data-label="Last run"]').filter({ hasText: 'normal' }).waitFor();

    // Pause an exclusive job with a note: the fleet's pause, with who and why.
    const purge = row(page, 'Cleanup.purge');
    await purge.getByRole('textbox').fill('deploying v2');
    await purge.getByRole('button', { name: 'Pause', exact: true }).click();
    await purge
      .locator('[data-label="State"]')
      .filter({ hasText: 'paused by alice@example.com: deploying v2' })
      .waitFor();
    const paused = await served.registry.fleetStatus('Cleanup.purge');
    expect(paused.paused).toMatchObject({ by: 'alice@example.com', note: 'deploying v2' });
    // A paused job offers Resume, not Pause, and its next tick says it is paused.
    await purge.getByRole('button', { name: 'Resume', exact: true }).waitFor();
    await expect(purge.getByRole('button', { name: 'Pause', exact: true }).count()).resolves.toBe(0);
    await expect(purge.locator('[data-label="Next tick"]').textContent()).resolves.toBe('paused');
    // A trigger that starts nothing says why, in words.
    await purge.getByRole('button', { name: 'Trigger', exact: true }).click();
    await page
      .getByRole('status')
      .filter({ hasText: 'Cleanup.purge: nothing started: the job is paused' })
      .waitFor();
    await page.screenshot({ path: join(shots, 'dashboard-list-desktop.png'), fullPage: true });

    // Resume, from the keyboard; the focus goes to the Pause button that takes its place.
    const resume = purge.getByRole('button', { name: 'Resume', exact: true });
    await resume.focus();
    await page.keyboard.press('Enter');
    await purge
      .locator('[data-label="State"]')
      .filter({ hasText: /^ticking/ })
      .waitFor();
    const pause = purge.getByRole('button', { name: 'Pause', exact: true });
    await pause.waitFor();
    await expect(pause.evaluate((button) => button === button.ownerDocument.activeElement)).resolves.toBe(
      true,
    );
    expect((await served.registry.fleetStatus('Cleanup.purge')).paused).toBeNull();
    expect(
      (await served.registry.audit('Cleanup.purge')).map(({ action, by, note }) => [action, by, note]),
    ).toEqual([
      ['resume', 'alice@example.com', null],
      ['pause', 'alice@example.com', 'deploying v2'],
    ]);
    await context.close();
    // The browser reports the trigger refused while the job was paused (409), and nothing else.
    expect(problems.splice(0)).toEqual([expect.stringMatching(/status of 409 \(Conflict\)/)]);
  }, 60_000);

  it("shows a job's page: its history as a table and a chart by exit reason, its audit trail and options", async () => {
    const { context, page } = await open();
    await page.goto(served.url);
    await page.getByRole('link', { name: 'Feeds.import', exact: true }).click();
    await page.getByRole('heading', { name: 'Feeds.import', level: 1 }).waitFor();
    const chart = page.getByRole('img', { name: /^Durations of the last \d+ runs/ });
    await expect(chart.getAttribute('aria-label')).resolves.toMatch(/\d+ normal, \d+ error/);
    await expect(chart.locator('rect.reason-error').count()).resolves.toBeGreaterThan(0);
    const runs = page.getByRole('region', { name: 'Runs, newest first' });
    await expect(runs.getByRole('row').count()).resolves.toBeGreaterThan(10);
    // Each run's row is headed by when it started, as the audit trail's by when it was asked.
    await expect(runs.getByRole('rowheader').count()).resolves.toBeGreaterThan(10);
    await expect(runs.getByText('Error: the feed answered 503').first().isVisible()).resolves.toBe(true);
    await expect(page.getByRole('heading', { name: 'Audit trail' }).isVisible()).resolves.toBe(true);
    await expect(page.locator('dl.options').textContent()).resolves.toContain('onOverlaprun');
    await page.screenshot({ path: join(shots, 'dashboard-job-desktop.png'), fullPage: true });

    // Back to the list by its link: relative addresses hold under the global prefix.
    await page.getByRole('link', { name: 'All jobs' }).click();
    await page.getByRole('heading', { name: 'Periodic jobs' }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/admin/periodic');
    await context.close();
    expect(problems).toEqual([]);
  }, 60_000);

  it("asks for a backfill from a job's page, in the viewer's zone: the slots it runs said, a bad range refused", async () => {
    const { context, page } = await open();
    await page.goto(`${served.url}/jobs/Feeds.import`);
    await page.getByRole('heading', { name: 'Backfill' }).waitFor();
    // The viewer is in Tokyo (UTC+9): the form takes its wall-clock times, to the second.
    const tokyo = (ms: number) => new Date(ms + 9 * 3_600_000).toISOString().slice(0, 19);
    const to = Math.floor(Date.now() / 1000) * 1000;
    await page.getByLabel('From').fill(tokyo(to - 3000));
    await page.getByLabel('To', { exact: true }).fill(tokyo(to));
    await page.getByLabel('Note on the backfill').fill('the feed was down');
    await page.getByRole('button', { name: 'Backfill', exact: true }).click();
    await page.getByText('Backfill of Feeds.import: 10 slots to run').waitFor();
    const audit = page.getByRole('region', { name: 'Audit trail' });
    await audit.getByText('the feed was down').waitFor();
    await page.screenshot({ path: join(shots, 'dashboard-backfill-desktop.png'), fullPage: true });
    await page.getByLabel('From').fill(tokyo(to + 3_600_000));
    await page.getByLabel('To', { exact: true }).fill(tokyo(to + 7_200_000));
    await page.getByRole('button', { name: 'Backfill', exact: true }).click();
    await page.getByText(/Feeds.import: backfill refused: .*"to" must not be in the future/).waitFor();
    const backfilled = (await served.registry.history('Feeds.import', { limit: 100 })).filter(
      (run) => run.origin === 'backfill',
    );
    expect(backfilled.every((run) => run.slot!.getTime() >= to - 3000 && run.slot!.getTime() < to)).toBe(
      true,
    );
    await context.close();
    // The browser reports the refusal's answer; nothing else went wrong.
    expect(problems.splice(0)).toEqual([expect.stringMatching(/status of 400 \(Bad Request\)/)]);
  }, 60_000);

  it('edits a stored schedule from its page: a new timing saved, a stale edit refused, the schedule removed', async () => {
    const { schedules } = served.registry;
    await schedules.upsertMany(
      [
        {
          name: 'report:acme',
          handler: 'tenant-report',
          cron: '0 8 * * 1-5',
          timezone: 'Europe/Paris',
          data: { tenantId: 'acme' },
        },
        { name: 'report:globex', handler: 'tenant-report', every: 3_600_000, data: { tenantId: 'globex' } },
      ],
      { by: 'signup' },
    );
    const { context, page } = await open({ headers: { 'x-user': 'alice@example.com' } });
    page.on('dialog', (dialog) => void dialog.accept());
    // The list names each stored schedule's handler, and filters by it.
    await page.goto(served.url);
    await page.getByLabel('Handler').selectOption('tenant-report');
    await page.getByRole('button', { name: 'Show', exact: true }).click();
    await expect(page.locator('tr[data-job]').count()).resolves.toBe(2);
    await expect(
      row(page, 'report:acme').locator('[data-label="Schedule"]').textContent(),
    ).resolves.toContain('handler tenant-report');
    await page.screenshot({ path: join(shots, 'dashboard-schedules-desktop.png'), fullPage: true });

    // Its page: the handler and version, and the editor filled with its timing.
    await page.getByRole('link', { name: 'report:acme', exact: true }).click();
    await page.getByRole('heading', { name: 'Change the schedule' }).waitFor();
    await expect(page.locator('dl.summary').textContent()).resolves.toMatch(
      /handler tenant-report, version 1, changed by signup/,
    );
    await expect(page.getByLabel('Cron expression').inputValue()).resolves.toBe('0 8 * * 1-5');
    await expect(page.getByLabel('Time zone').inputValue()).resolves.toBe('Europe/Paris');
    await expect(page.getByLabel('Interval').isVisible()).resolves.toBe(false);

    // A timing the schedule cannot take: refused with the option and the value, nothing stored.
    await page.getByLabel('Cron expression').fill('0 25 * * *');
    await page.getByRole('button', { name: 'Save schedule' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: /report:acme: not saved: .*"cron"/ })
      .waitFor();
    expect((await schedules.get('report:acme'))?.version).toBe(1);

    // A new timing: every 15 minutes. The store has it as version 2, by alice, with the data kept.
    await page.getByRole('radio', { name: 'Every' }).check();
    await page.getByLabel('Interval').fill('15');
    await page.getByLabel('Unit').selectOption('min');
    await page.getByRole('button', { name: 'Save schedule' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved report:acme, version 2' }).waitFor();
    const saved = await schedules.get('report:acme');
    expect(saved).toMatchObject({
      every: 900_000,
      version: 2,
      updatedBy: 'alice@example.com',
      data: { tenantId: 'acme' },
    });
    expect(saved).not.toHaveProperty('cron');
    expect(saved).not.toHaveProperty('timezone');
    await page.locator('dl.summary').filter({ hasText: 'every 15 min' }).waitFor();
    await page.screenshot({ path: join(shots, 'dashboard-schedule-desktop.png'), fullPage: true });

    // Someone else changes it meanwhile: this page's edit, made on version 2, is refused and says why.
    await schedules.upsert({ ...saved!, every: 600_000 }, { by: 'bob' });
    await page.getByLabel('Interval').fill('20');
    await page.getByRole('button', { name: 'Save schedule' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: 'it was changed since the page was read (version 2, now 3)' })
      .waitFor();
    expect(await schedules.get('report:acme')).toMatchObject({
      every: 600_000,
      version: 3,
      updatedBy: 'bob',
    });
    // So is its removal.
    await page.getByRole('button', { name: 'Remove schedule' }).click();
    await page.getByRole('status').filter({ hasText: 'report:acme: not removed' }).waitFor();
    expect(served.registry.has('report:acme')).toBe(true);

    // Read again, it removes: the page says so and leads back to the list; the audit trail has every change.
    await page.reload();
    await page.getByRole('button', { name: 'Remove schedule' }).click();
    await page.getByRole('status').filter({ hasText: 'Removed report:acme' }).waitFor();
    await expect(page.getByRole('link', { name: 'All jobs' }).count()).resolves.toBeGreaterThan(0);
    expect(await schedules.get('report:acme')).toBeNull();
    expect(served.registry.has('report:acme')).toBe(false);
    expect((await served.registry.audit('report:acme')).map(({ action, by }) => [action, by])).toEqual([
      ['remove', 'alice@example.com'],
      ['update', 'bob'],
      ['update', 'alice@example.com'],
      ['create', 'signup'],
    ]);
    await context.close();
    await schedules.remove('report:globex');
    // The browser reports the refused edits (400, and 409 twice), and nothing else.
    expect(problems.splice(0)).toEqual([
      expect.stringMatching(/status of 400 \(Bad Request\)/),
      expect.stringMatching(/status of 409 \(Conflict\)/),
      expect.stringMatching(/status of 409 \(Conflict\)/),
    ]);
  }, 60_000);

  it('fits a 375 px phone: each job a card, its buttons within reach', async () => {
    const { context, page } = await open({ width: 375 });
    await page.goto(served.url);
    // Before any action: a full-page picture would show the status line where the screen's bottom was.
    await page.screenshot({ path: join(shots, 'dashboard-list-phone.png'), fullPage: true });
    const nightly = row(page, 'Reports.nightly');
    await nightly.getByRole('button', { name: 'Pause', exact: true }).click();
    await nightly.locator('[data-label="State"]').filter({ hasText: 'paused' }).waitFor();
    await nightly.getByRole('button', { name: 'Resume', exact: true }).click();
    await nightly
      .locator('[data-label="State"]')
      .filter({ hasText: /^ticking/ })
      .waitFor();
    const width = () => page.evaluate<number>('document.documentElement.scrollWidth');
    await expect(width()).resolves.toBeLessThanOrEqual(375);
    const box = await nightly.getByRole('button', { name: 'Pause', exact: true }).boundingBox();
    expect(box!.x + box!.width).toBeLessThanOrEqual(375);
    await page.goto(`${served.url}/jobs/Feeds.import`);
    await expect(width()).resolves.toBeLessThanOrEqual(375);
    // Each run is a card, whose error reads whole on the screen, not in a table scrolled sideways.
    const error = page
      .getByRole('region', { name: 'Runs, newest first' })
      .getByText('Error: the feed answered 503');
    const shown = await error.first().boundingBox();
    expect(shown!.x + shown!.width).toBeLessThanOrEqual(375);
    await page.screenshot({ path: join(shots, 'dashboard-job-phone.png'), fullPage: true });
    await context.close();
    expect(problems).toEqual([]);
  }, 60_000);

  it("from a tablet to a wide screen: no column too narrow for its words, a row's buttons on one line", async () => {
    for (const width of [961, 1024, 1121, 1200, 1201, 1240, 1280, 1440]) {
      const { context, page } = await open({ width, bypassCSP: true });
      await page.goto(served.url);
      // The page would break a word that does not fit in its column: here it overflows instead, and is seen.
      await page.addStyleTag({
        content: 'table.jobs td, table.jobs th { overflow-wrap: normal !important; }',
      });
      // The widest words the list shows in its short columns, in every row (times and durations keep their units
      // on one line).
      await page.evaluate(`document.querySelectorAll('tr[data-job]').forEach((row) => {
        row.querySelector('[data-label="Next tick"]').innerHTML = 'in\u00a059\u00a0min';
        row.querySelector('[data-label="Last run"]').innerHTML =
          '<span class="reason reason-leaseLost">leaseLost</span> 59.9\u00a0s <small>59\u00a0min\u00a0ago</small>';
        row.querySelector('[data-label="Failures"]').innerHTML = '9999';
        row.querySelector('[data-label="Holder"]').innerHTML = 'web-1 <small>token 1796294458368000</small>';
      })`);
      // A word wider than its cell overflows it: the cell's content is wider than the cell.
      const layout = await page.evaluate<{
        scrolled: number;
        overflowing: string[];
        buttonRows: number[];
      }>(`({
        scrolled: document.documentElement.scrollWidth,
        // (The column headers of the cards are there for screen readers only, in a box of one pixel.)
        overflowing: [...document.querySelectorAll('table.jobs th, table.jobs td')]
          .filter((cell) => !cell.closest('thead') || cell.closest('thead').offsetWidth > 1)
          .filter((cell) => cell.scrollWidth > cell.clientWidth + 1)
          .map((cell) => cell.textContent.trim().slice(0, 30)),
        buttonRows: [...document.querySelectorAll('tr[data-job]')].map(
          (row) => new Set([...row.querySelectorAll('button')].map((button) => button.getBoundingClientRect().top)).size,
        ),
      })`);
      expect({ width, ...layout }).toEqual({
        width,
        scrolled: width,
        overflowing: [],
        buttonRows: layout.buttonRows.map(() => 1),
      });
      await context.close();
    }
    expect(problems).toEqual([]);
  }, 60_000);

  it("under a Content-Security-Policy of 'self' the pages load whole, with no error", async () => {
    const { context, page } = await open();
    await context.route('**/*', async (route) => {
      const response = await route.fetch();
      await route.fulfill({
        response,
        headers: { ...response.headers(), 'content-security-policy': "default-src 'self'" },
      });
    });
    await page.goto(served.url);
    await expect(page.evaluate("document.documentElement.classList.contains('scripted')")).resolves.toBe(
      true,
    );
    await page.goto(`${served.url}/jobs/Feeds.import`);
    await page.getByRole('heading', { name: 'Feeds.import', level: 1 }).waitFor();
    // The page's refresh may be on its way through the route: it ends before the context closes, whose closing
    // would dispose of the response the route is about to fulfil.
    await context.unrouteAll({ behavior: 'wait' });
    await context.close();
    expect(problems).toEqual([]);
  }, 60_000);

  it('a link to a job that is gone: a page that says so, and leads back to the list', async () => {
    const { context, page } = await open();
    const response = await page.goto(`${served.url}/jobs/Reports.gone`);
    expect(response!.status()).toBe(404);
    await page.getByRole('heading', { name: 'No job named Reports.gone' }).waitFor();
    await page.getByRole('link', { name: 'All jobs' }).click();
    await page.getByRole('heading', { name: 'Periodic jobs' }).waitFor();
    await context.close();
    // The browser reports the page's own 404, and nothing else.
    expect(problems.splice(0)).toEqual([
      expect.stringMatching(
        /Reports\.gone: Failed to load resource: the server responded with a status of 404/,
      ),
    ]);
  }, 60_000);

  it('read-only: everything shown, no action offered, and an action sent anyway refused with 403', async () => {
    const { context, page } = await open({ headers: { 'x-role': 'read' } });
    await page.goto(served.url);
    await expect(page.getByText('read-only').isVisible()).resolves.toBe(true);
    await expect(row(page, 'Cleanup.purge').isVisible()).resolves.toBe(true);
    // The search's button only: it sends a form, which reading may.
    await expect(page.getByRole('button').allTextContents()).resolves.toEqual(['Show']);
    const refused = await page.request.post(`${served.url}/api/jobs/Cleanup.purge/pause`, { data: {} });
    expect(refused.status()).toBe(403);
    expect(served.registry.status('Cleanup.purge').state).toBe('ticking');
    const none = await context.request.get(served.url, { headers: { 'x-role': 'none' } });
    expect(none.status()).toBe(404);
    await context.close();
    expect(problems).toEqual([]);
  }, 60_000);

  it('without JavaScript offers no button that could not work', async () => {
    const { context, page } = await open({ javaScript: false });
    await page.goto(served.url);
    await expect(row(page, 'Cleanup.purge').isVisible()).resolves.toBe(true);
    // The search's button sends its form, which needs no script; and it finds the job.
    await expect(page.getByRole('button').allTextContents()).resolves.toEqual(['Show']);
    await page.getByLabel('Name contains').fill('PURGE');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForURL(/\?q=PURGE/);
    await expect(page.locator('tr[data-job]').count()).resolves.toBe(1);
    await expect(row(page, 'Cleanup.purge').isVisible()).resolves.toBe(true);
    await expect(page.getByText('Jobs 1–1 of 1 that match').isVisible()).resolves.toBe(true);
    await context.close();
    expect(problems).toEqual([]);
  }, 60_000);

  it('reads without JavaScript: the list and a job page are whole', async () => {
    const { context, page } = await open({ headers: { 'x-role': 'read' }, javaScript: false });
    await page.goto(served.url);
    await expect(row(page, 'Feeds.import').locator('[data-label="Last run"]').textContent()).resolves.toMatch(
      /normal|error|running/,
    );
    await page.getByRole('link', { name: 'Feeds.import', exact: true }).click();
    await expect(
      page.getByRole('region', { name: 'Runs, newest first' }).getByRole('row').count(),
    ).resolves.toBeGreaterThan(10);
    await context.close();
    expect(problems).toEqual([]);
  }, 60_000);
});

async function until(done: () => Promise<boolean>): Promise<void> {
  while (!(await done())) await new Promise((resolve) => setTimeout(resolve, 50));
}
