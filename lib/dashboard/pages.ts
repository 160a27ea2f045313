// The dashboard's two pages, rendered on the server as plain HTML: the list of jobs and a job's own page. They
// read without JavaScript; the script (assets.ts) refreshes their live parts and sends the operators' actions.
import type { PeriodicAuditEntry } from '../scheduler/operations.js';
import type { PeriodicRunRecord } from '../scheduler/history.js';
import {
  LIST_STATES,
  LONGEST_SEARCH,
  PAGE_ROWS,
  span,
  type PeriodicDashboardJob,
  type PeriodicDashboardJobDetail,
  type PeriodicDashboardList,
  type PeriodicDashboardQuery,
  type PeriodicDashboardStore,
} from './views.js';

/** Between a number and its unit, and within a short time in words: never a line break. */
const NBSP = '\u00a0';

/** The options given in milliseconds, which the job's page shows with their unit. */
const IN_MS = new Set(['every', 'initialDelay', 'jitter', 'timeout', 'jobShutdown']);

/** What every page needs besides its data. */
export interface PageContext {
  /** The dashboard's root, relative to the page's own address: works behind any prefix or proxy path. */
  root: string;
  access: 'operate' | 'read';
  /** The replica that serves the page, when there is a coordinator. */
  replica: string | null;
  /** The coordinator's store as this replica sees it; null without one. */
  store: PeriodicDashboardStore | null;
  now: number;
}

/**
 * The columns of the list; for operators, its actions come last and take the width the others leave. Its rows
 * are given their roles explicitly: on a phone the table is laid out as cards (CSS `display: block`), which
 * makes some browsers forget that it is a table.
 */
const COLUMNS = ['Job', 'Schedule', 'State', 'Holder', 'Next tick', 'Last run', 'Failures', 'Health'];

/** The colours of the chart and of the results, one per exit reason (and a run in flight). */
const REASONS = ['normal', 'error', 'timeout', 'killed', 'shutdown', 'leaseLost', 'running'] as const;

export function listPage(
  list: PeriodicDashboardList,
  query: PeriodicDashboardQuery,
  page: PageContext,
): string {
  const rows = list.jobs.map((job) => jobRow(job, page)).join('');
  const body = `
<main>
  <h1>Periodic jobs</h1>
  ${intro(page, `${thousands(list.total)} job${list.total === 1 ? '' : 's'}`)}
  <p class="counts" data-live="counts">${stateCounts(list, query, page.root)}</p>
  ${filterForm(query, list.handlers, page.root)}
  <table class="jobs" role="table">
    <caption class="hidden">Every job, its schedule, state and last run${page.access === 'operate' ? ', and its actions' : ''}</caption>
    ${COLUMNS.map((column) => `<col class="col-${column.toLowerCase().replace(' ', '-')}">`).join('')}
    <thead role="rowgroup"><tr role="row">
      ${COLUMNS.map((column) => `<th scope="col" role="columnheader">${column}</th>`).join('')}
      ${page.access === 'operate' ? '<th scope="col" role="columnheader" class="needs-script">Actions</th>' : ''}
    </tr></thead>
    <tbody role="rowgroup" data-live="rows">${rows === '' ? `<tr role="row"><td role="cell" colspan="9">${list.total === 0 ? 'No jobs.' : 'No job matches.'}</td></tr>` : rows}</tbody>
  </table>
  <nav class="pager" aria-label="Pages of the list" data-live="pager">${pager(list, query, page.root)}</nav>
</main>`;
  return document('Periodic jobs', body, page);
}

/**
 * `runs`: null when the module keeps no history (`history: false`); `runs` and `audit` undefined when the store
 * did not answer.
 */
export function jobPage(
  job: PeriodicDashboardJobDetail,
  runs: PeriodicRunRecord[] | null | undefined,
  audit: PeriodicAuditEntry[] | undefined,
  page: PageContext,
): string {
  const body = `
<nav><a href="${esc(page.root)}">All jobs</a></nav>
<main data-job="${esc(job.name)}">
  <h1>${breakable(job.name)}</h1>
  ${intro(page, job.exclusive ? 'exclusive: one replica runs it at a time; this page shows and operates the fleet’s job' : 'not exclusive: every process runs it; this page shows and operates this process’s')}
  <dl class="summary" data-live="summary">${summary(job, page)}</dl>
  ${page.access === 'operate' ? actions(job) : ''}
  ${page.access === 'operate' && job.stored !== null ? scheduleEditor(job, job.stored) : ''}
  ${backfillSection(job, page)}
  <section aria-labelledby="runs-title">
    <h2 id="runs-title">Runs</h2>
    <div data-live="runs">${
      runs === null
        ? '<p>No history is kept: the module’s <code>history</code> option is <code>false</code>. The counts above are this process’s.</p>'
        : runs === undefined
          ? UNREAD('runs')
          : chart(runs, page.now) + runsTable(runs, page)
    }</div>
  </section>
  <section aria-labelledby="audit-title">
    <h2 id="audit-title">Audit trail</h2>
    <div data-live="audit">${audit === undefined ? UNREAD('audit trail') : auditTable(audit, page)}</div>
  </section>
  <section aria-labelledby="options-title">
    <h2 id="options-title">Options</h2>
    <dl class="options" data-live="options">${Object.entries(job.options)
      .map(([key, value]) => `<dt>${esc(key)}</dt><dd>${esc(optionText(key, value))}</dd>`)
      .join('')}</dl>
  </section>
</main>`;
  return document(`${job.name} · Periodic jobs`, body, page);
}

/** A number with its thousands apart: 100,000. */
function thousands(value: number): string {
  return value.toLocaleString('en-US');
}

/** The list's address with a filter, from the dashboard's root (which keeps any prefix or proxy path). */
function listHref(
  root: string,
  { state, q, handler }: Pick<PeriodicDashboardQuery, 'state' | 'q' | 'handler'>,
  limit = PAGE_ROWS,
  cursor?: string,
): string {
  const params = new URLSearchParams();
  if (state !== null) params.set('state', state);
  if (q !== null) params.set('q', q);
  if (handler !== null) params.set('handler', handler);
  if (limit !== PAGE_ROWS) params.set('limit', String(limit));
  if (cursor !== undefined) params.set('cursor', cursor);
  const search = params.toString();
  return search === '' ? root : `${root}?${search}`;
}

/**
 * How many jobs of all there are in each state, each a link to the list of them, searched by nothing (a job may be
 * counted in two states).
 */
function stateCounts(list: PeriodicDashboardList, query: PeriodicDashboardQuery, root: string): string {
  const all = `<a href="${esc(root)}"${query.state === null ? ' aria-current="true"' : ''}>all <b>${thousands(list.total)}</b></a>`;
  const states = LIST_STATES.map((state) => {
    const current = query.state === state ? ' aria-current="true"' : '';
    return `<a href="${esc(listHref(root, { state, q: null, handler: null }))}"${current}>${state} <b>${thousands(list.counts[state])}</b></a>`;
  });
  return [all, ...states].join(' · ');
}

/** The search by name and the filter by state: a form that works without the script. */
function filterForm(query: PeriodicDashboardQuery, handlers: string[], root: string): string {
  const options = ['', ...LIST_STATES]
    .map((state) => {
      const selected = (query.state ?? '') === state ? ' selected' : '';
      return `<option value="${state}"${selected}>${state === '' ? 'any state' : state}</option>`;
    })
    .join('');
  // Stored schedules by the handler that runs them (docs/schedules.md), when the application has handlers.
  const byHandler =
    handlers.length === 0
      ? ''
      : `<label>Handler <select name="handler"><option value="">any job</option>${handlers
          .map(
            (handler) =>
              `<option value="${esc(handler)}"${query.handler === handler ? ' selected' : ''}>${esc(handler)}</option>`,
          )
          .join('')}</select></label>`;
  return `<form class="filter" method="get" action="${esc(root)}" role="search" aria-label="Find jobs">
<label>Name contains <input type="search" name="q" maxlength="${2 * LONGEST_SEARCH}" value="${esc(query.q ?? '')}"></label>
<label>State <select name="state">${options}</select></label>
${byHandler}<button type="submit">Show</button>
</form>`;
}

/** Which rows this page shows of those that match, and the links to the first page and the next. */
function pager(list: PeriodicDashboardList, query: PeriodicDashboardQuery, root: string): string {
  const { offset, matched, jobs } = list;
  const filtered = query.state !== null || query.q !== null || query.handler !== null;
  const of = `${thousands(matched)}${filtered ? ' that match' : ''}`;
  const shown =
    jobs.length === 0
      ? `none of ${of}`
      : `${thousands(offset + 1)}–${thousands(offset + jobs.length)} of ${of}`;
  const links: string[] = [];
  if (offset > 0) links.push(`<a href="${esc(listHref(root, query, query.limit))}">First page</a>`);
  if (list.nextCursor !== null) {
    links.push(
      `<a href="${esc(listHref(root, query, query.limit, list.nextCursor))}" rel="next">Next page</a>`,
    );
  }
  return `<span>Jobs ${shown}</span>${links.map((link) => ` · ${link}`).join('')}`;
}

/** What a job's page says of a record the store did not answer. */
const UNREAD = (what: string) =>
  `<p class="unread">The ${what} cannot be read now: the coordinator’s store does not answer. This page shows it again once the store answers.</p>`;

/** An address of the list that asks for what it cannot show (`why`, the 400's message), and the way back. */
export function badListPage(why: string, page: PageContext): string {
  const body = `
<nav><a href="${esc(page.root)}">All jobs</a></nav>
<main>
  <h1>The list cannot show that</h1>
  <p>${esc(why)}.</p>
</main>`;
  return document('The list cannot show that · Periodic jobs', body, page);
}

/** `name`: undefined for an address that is not valid percent-encoding, which names no job. */
export function notFoundPage(name: string | undefined, page: PageContext): string {
  const named = name === undefined ? 'No job by that name' : `No job named ${breakable(name)}`;
  const body = `
<nav><a href="${esc(page.root)}">All jobs</a></nav>
<main>
  <h1>${named}</h1>
  <p>It was removed, or renamed by a deploy, since this address was made. The list shows the jobs there are.</p>
</main>`;
  return document(
    `${name === undefined ? 'No job by that name' : `No job named ${name}`} · Periodic jobs`,
    body,
    page,
  );
}

function optionText(key: string, value: unknown): string {
  if (key === 'guard') return value === true ? 'when() decides each tick' : 'no guard';
  if (typeof value === 'object') return JSON.stringify(value);
  if (value === 'Infinity') return 'no limit';
  return typeof value === 'number' && IN_MS.has(key) ? `${value} ms` : String(value);
}

function document(title: string, body: string, page: PageContext): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${esc(title)}</title>
<link rel="icon" href="${esc(page.root)}/assets/icon.svg" type="image/svg+xml">
<link rel="stylesheet" href="${esc(page.root)}/assets/dashboard.css">
<script src="${esc(page.root)}/assets/dashboard.js" defer></script>
</head>
<body data-api="${esc(page.root)}/api" data-access="${page.access}">
<div data-live="store">${storeBanner(page)}</div>
${body}
<p id="announce" class="announce" role="status" aria-live="polite"></p>
</body>
</html>
`;
}

/** The store's state, at the top of every page, when it does not answer. */
function storeBanner(page: PageContext): string {
  const { store } = page;
  if (store === null || store.reachable) return '';
  const why = store.lastError === null ? '' : ` (${esc(store.lastError)})`;
  return `<p class="banner" role="alert"><b>The coordinator’s store does not answer</b>, since ${time(store.since.getTime(), page.now, true)}${why}. This page shows what replica ${esc(page.replica ?? 'this one')} knows; what only the store knows is left out, and actions on exclusive jobs fail until it answers.</p>`;
}

function intro(page: PageContext, what: string): string {
  const served = page.replica === null ? '' : ` · served by replica <b>${esc(page.replica)}</b>`;
  const store =
    page.store === null
      ? ''
      : page.store.reachable
        ? ' · store answers'
        : ' · <span class="down">store down</span>';
  const access = page.access === 'read' ? ' · <span class="badge">read-only</span>' : '';
  const script = page.access === 'operate' ? '<noscript><p>The actions need JavaScript.</p></noscript>' : '';
  const at = new Date(page.now).toISOString().slice(11, 19);
  return `<p class="intro">${esc(what)}${served}<span data-live="store-state">${store}</span>${access} · <span data-live="clock">as of ${at} UTC</span></p>${script}`;
}

function jobRow(job: PeriodicDashboardJob, page: PageContext): string {
  const { status, fleetStatus } = job;
  const href = esc(`${page.root}/jobs/${encodeURIComponent(job.name)}`);
  const cells = [
    [
      'Schedule',
      schedule(job, page) +
        (job.stored === null
          ? ''
          : `<small class="handler">handler ${breakable(job.stored.handler)}</small>`),
    ],
    ['State', state(job, page)],
    ['Holder', holder(job, false)],
    ['Next tick', nextTick(job, page, false)],
    ['Last run', lastRun(job, page)],
    ['Failures', String(fleetStatus?.consecutiveFailures ?? status.consecutiveFailures)],
    ['Health', health(job)],
  ];
  return `<tr role="row" data-job="${esc(job.name)}">
<th scope="row" role="rowheader" data-label="Job"><a href="${href}">${breakable(job.name)}</a></th>
${cells.map(([label, html]) => `<td role="cell" data-label="${label}" data-live="${label}">${html}</td>`).join('')}
${page.access === 'operate' ? `<td role="cell" data-label="Actions" class="needs-script">${actionControls(job)}</td>` : ''}
</tr>`;
}

function actions(job: PeriodicDashboardJob): string {
  return `<section class="actions needs-script" aria-label="Actions on ${esc(job.name)}" data-job="${esc(job.name)}">${actionControls(job)}</section>`;
}

/** The note field and the buttons of a job, named for what they do: Trigger, and Pause or Resume as applies. */
function actionControls(job: PeriodicDashboardJob): string {
  const name = esc(job.name);
  return `<div class="controls">
<input type="text" name="note" maxlength="1000" placeholder="Note (optional)" aria-label="Note on the next action on ${name}, for the audit trail">
<span class="buttons" data-live="buttons">${buttons(job)}</span>
</div>`;
}

function buttons(job: PeriodicDashboardJob): string {
  return `<button type="button" data-action="trigger">Trigger</button> ${
    isPaused(job)
      ? '<button type="button" data-action="resume">Resume</button>'
      : '<button type="button" data-action="pause">Pause</button>'
  }`;
}

/**
 * A backfill under way in this process, with a button that cancels it; for operators, the form that asks for one
 * (its times in the viewer's zone, sent as instants).
 */
function backfillSection(job: PeriodicDashboardJobDetail, page: PageContext): string {
  const { backfill } = job;
  const state =
    backfill === null
      ? '<p>No backfill runs here.</p>'
      : `<p>Backfill under way: ${backfill.left === null ? 'its slots' : `${backfill.left} slot${backfill.left === 1 ? '' : 's'} left,`} from ${time(backfill.next.getTime(), page.now, true)} up to ${time(backfill.to.getTime(), page.now, true)}.${page.access === 'operate' ? ' <button type="button" data-backfill="cancel" class="needs-script">Cancel the backfill</button>' : ''}</p>`;
  const form =
    page.access !== 'operate'
      ? ''
      : `<form data-backfill="ask" class="needs-script">
<label>From <input type="datetime-local" name="from" step="1" required></label>
<label>To <input type="datetime-local" name="to" step="1" required></label>
<label>Note on the backfill <input type="text" name="note" maxlength="1000" placeholder="Why (optional)"></label>
<button type="submit">Backfill</button>
<p class="hint">Runs each slot of the schedule from “From” up to “To” (excluded), oldest first, one at a time, after the job’s own slots: at most 10,000. Times in your browser’s zone.</p>
</form>`;
  return `<section aria-labelledby="backfill-title" data-job="${esc(job.name)}">
<h2 id="backfill-title">Backfill</h2>
<div data-live="backfill">${state}</div>
${form}
</section>`;
}

/** Paused: in this process, or, for an exclusive job, in the fleet. */
function isPaused(job: PeriodicDashboardJob): boolean {
  return job.status.state === 'paused' || job.paused !== null;
}

/** The next tick: "paused" while the job is, when the fleet's schedule or this process's timer says otherwise. */
function nextTick(job: PeriodicDashboardJob, page: PageContext, absolute: boolean): string {
  if (isPaused(job)) return 'paused';
  const next = job.fleetStatus?.nextSlot ?? job.status.nextTickAt;
  return next === null ? '—' : time(next.getTime(), page.now, absolute);
}

function summary(job: PeriodicDashboardJob, page: PageContext): string {
  const { status, fleetStatus } = job;
  const lastSucceeded = fleetStatus?.lastSucceededAt ?? status.lastSucceededAt;
  const items: [string, string][] = [
    ['Schedule', schedule(job, page)],
    ['State', state(job, page, true)],
    ['Holder', holder(job, true)],
    ['Next tick', nextTick(job, page, true)],
    ['Last run', lastRun(job, page, true)],
    ['Last success', lastSucceeded === null ? 'never' : time(lastSucceeded.getTime(), page.now, true)],
    ['Failures in a row', String(fleetStatus?.consecutiveFailures ?? status.consecutiveFailures)],
    ['Health', health(job)],
    ['Runs in this process', counts(job)],
  ];
  if (job.stored !== null) items.unshift(['Stored schedule', storedSummary(job, job.stored, page)]);
  if (job.incidents.length > 0) items.push(['Incidents', incidents(job, page)]);
  if (fleetStatus !== null && !fleetStatus.store.reachable) {
    items.push(['Store', `<span class="down">not reached</span> ${esc(fleetStatus.store.lastError ?? '')}`]);
  }
  return items.map(([term, html]) => `<dt>${term}</dt><dd>${html}</dd>`).join('');
}

/** A stored schedule's handler, version and last change, and the replicas that lack its handler, if all do. */
function storedSummary(
  job: PeriodicDashboardJob,
  stored: NonNullable<PeriodicDashboardJob['stored']>,
  page: PageContext,
): string {
  const by = stored.updatedBy === null ? '' : ` by ${breakable(stored.updatedBy)}`;
  const missing = job.fleetStatus?.handlerMissing;
  const lacking =
    missing === undefined
      ? ''
      : `<br><span class="down">no live replica has the handler</span> <small>(${missing.map(esc).join(', ')})</small>`;
  return `handler <code>${breakable(stored.handler)}</code>, version ${stored.version}, changed${by} ${time(stored.updatedAt.getTime(), page.now, true)}${lacking}`;
}

/** The units the editor offers for `every`, largest first: a value is shown in the largest that divides it. */
const UNITS: [string, number][] = [
  ['h', 3_600_000],
  ['min', 60_000],
  ['s', 1_000],
  ['ms', 1],
];

/**
 * The form that changes a stored schedule's timing, and the button that removes it: each sends the version the
 * page was read at, and the dashboard refuses a change made on an older one (409).
 */
function scheduleEditor(
  job: PeriodicDashboardJobDetail,
  stored: NonNullable<PeriodicDashboardJob['stored']>,
): string {
  const { every, cron, timezone } = job.options;
  const byCron = typeof cron === 'string';
  const ms = typeof every === 'number' ? every : 60_000;
  const [unit, size] = UNITS.find(([, size]) => ms % size === 0)!;
  const units = UNITS.map(
    ([name]) => `<option value="${name}"${name === unit ? ' selected' : ''}>${name}</option>`,
  ).join('');
  const checked = (kind: boolean) => (kind ? ' checked' : '');
  return `<section class="editor needs-script" aria-labelledby="editor-title" data-job="${esc(job.name)}" data-version="${stored.version}">
<h2 id="editor-title">Change the schedule</h2>
<form data-edit="schedule">
<fieldset class="kind"><legend>Timing</legend>
<label><input type="radio" name="kind" value="every"${checked(!byCron)}> Every</label>
<label><input type="radio" name="kind" value="cron"${checked(byCron)}> Cron</label>
</fieldset>
<fieldset class="fields" data-kind="every"${byCron ? ' hidden disabled' : ''}><legend class="hidden">Every</legend>
<label>Interval <input type="number" name="every" min="1" step="1" required value="${ms / size}"></label>
<label>Unit <select name="unit">${units}</select></label>
</fieldset>
<fieldset class="fields" data-kind="cron"${byCron ? '' : ' hidden disabled'}><legend class="hidden">Cron</legend>
<label>Cron expression <input type="text" name="cron" required spellcheck="false" value="${esc(byCron ? cron : '')}" placeholder="0 8 * * 1-5"></label>
<label>Time zone <input type="text" name="timezone" spellcheck="false" value="${esc(typeof timezone === 'string' ? timezone : '')}" placeholder="UTC"></label>
</fieldset>
<p class="buttons-row"><button type="submit">Save schedule</button> <button type="button" data-edit="remove">Remove schedule</button></p>
<p><small>Saved only if nobody changed the schedule since this page was read, at version <span data-version-text>${stored.version}</span>.</small></p>
</form>
</section>`;
}

function schedule(job: PeriodicDashboardJob, page: PageContext): string {
  const { text, next, timezone } = job.schedule;
  if (next.length === 0) return esc(text);
  // A pattern of six fields or more starts with its seconds: its times say them.
  const seconds = text.slice(0, -timezone!.length).trim().split(/\s+/).length >= 6;
  const clock = new Intl.DateTimeFormat('en-GB', {
    weekday: 'short',
    hour: '2-digit',
    minute: '2-digit',
    ...(seconds ? { second: '2-digit' as const } : {}),
    hourCycle: 'h23',
    timeZone: timezone!,
  });
  const times = next
    .map((date) => {
      const at = date.getTime();
      const iso = date.toISOString();
      return `<li><time datetime="${iso}" title="${utc(at)}">${clock.format(date).replace(' ', NBSP)}</time> <small>${relative(at - page.now)}</small></li>`;
    })
    .join('');
  return `<code>${breakable(text)}</code><ul class="next" aria-label="Next times, in ${esc(timezone!)}">${times}</ul>`;
}

function state(job: PeriodicDashboardJob, page: PageContext, absolute = false): string {
  const { status, paused } = job;
  if (status.state === 'paused' || paused !== null) {
    const by = paused?.by === null || paused === null ? '' : ` by ${breakable(paused.by)}`;
    const note = paused?.note === null || paused === null ? '' : `: <q>${esc(paused.note)}</q>`;
    const at = paused === null ? '' : ` <small>${time(paused.at.getTime(), page.now, absolute)}</small>`;
    return `<span class="state paused">paused</span>${by}${note}${at}`;
  }
  const mode = status.mode === 'manual' ? ' <small>(manual mode)</small>' : '';
  const running = status.running > 0 ? ` <small>${status.running} running</small>` : '';
  return `<span class="state ${status.state}">${status.state}</span>${mode}${running}`;
}

/** Who holds an exclusive job's lease; its fencing token on the job's own page (`token`). */
function holder(job: PeriodicDashboardJob, token: boolean): string {
  if (job.fleetStatus === null) return '<small>each process</small>';
  const held = job.fleetStatus.holder;
  if (held === null) return 'none';
  return `${esc(held.replica)}${token ? ` <small>fencing token ${held.fencingToken}</small>` : ''}`;
}

/**
 * The latest run: the history's (the fleet's, for an exclusive job), or, without a history (`history: false`),
 * the last end this process saw.
 */
function lastRun(job: PeriodicDashboardJob, page: PageContext, absolute = false): string {
  const run = job.lastRun;
  if (run !== null) {
    return `${result(run.reason)} ${run.durationMs === null ? '' : lasted(run.durationMs)} <small>${time(run.startedAt.getTime(), page.now, absolute)}</small>`;
  }
  const ended = job.status.lastFinished;
  if (ended === null) return 'never';
  return `${result(ended.reason)} ${lasted(ended.durationMs)} <small>${time(ended.at.getTime(), page.now, absolute)}</small>`;
}

function health(job: PeriodicDashboardJob): string {
  const { status, reason } = job.health;
  const shown =
    status === 'up'
      ? '<span class="up">up</span>'
      : `<span class="down">down</span> <small>${esc(reason ?? '')}</small>`;
  const open = job.incidents.map(({ kind }) => ` <span class="badge down">incident: ${esc(kind)}</span>`);
  return shown + open.join('');
}

/** The open incidents, each with since when and its detail. */
function incidents(job: PeriodicDashboardJob, page: PageContext): string {
  return job.incidents
    .map(
      ({ kind, since, detail }) =>
        `<span class="down">${esc(kind)}</span> since ${time(since.getTime(), page.now, true)}: ${breakable(detail)}`,
    )
    .join('<br>');
}

function counts(job: PeriodicDashboardJob): string {
  const { counts } = job.status;
  const shown = (['started', 'normal', 'error', 'timeout', 'skipped', 'missed'] as const)
    .map((key) => `${key} ${counts[key]}`)
    .join(', ');
  return esc(shown);
}

/** An exit reason as a coloured label; null: a run in flight. */
function result(reason: PeriodicRunRecord['reason']): string {
  const shown = reason ?? 'running';
  return `<span class="reason reason-${shown}">${shown}</span>`;
}

function runsTable(runs: PeriodicRunRecord[], page: PageContext): string {
  if (runs.length === 0) return '<p>No runs yet.</p>';
  const rows = runs.map((run) => ({
    head: time(run.startedAt.getTime(), page.now, true),
    cells: [
      ['Slot', run.slot === null ? '—' : time(run.slot.getTime(), page.now)],
      ['Origin', `${run.origin}${run.attempt > 1 ? ` <small>attempt ${run.attempt}</small>` : ''}`],
      [
        'Replica',
        `${esc(run.replica)}${run.fencingToken === null ? '' : ` <small>token ${run.fencingToken}</small>`}`,
      ],
      ['Result', result(run.reason)],
      ['Duration', run.durationMs === null ? '—' : lasted(run.durationMs)],
      [
        'Error',
        run.error === null
          ? ''
          : esc(run.error.message === '' ? run.error.name : `${run.error.name}: ${run.error.message}`),
      ],
    ] satisfies Cell[],
  }));
  return cardTable('Runs, newest first', 'The latest runs, newest first', 'Started', rows);
}

function auditTable(entries: PeriodicAuditEntry[], page: PageContext): string {
  if (entries.length === 0) return '<p>No pause, resume or trigger yet.</p>';
  const rows = entries.map((entry) => ({
    head: time(entry.at.getTime(), page.now, true),
    cells: [
      ['Action', entry.action],
      ['By', entry.by === null ? '—' : esc(entry.by)],
      ['Note', entry.note === null ? '' : esc(entry.note)],
      ['Replica', esc(entry.replica)],
    ] satisfies Cell[],
  }));
  return cardTable(
    'Audit trail, newest first',
    'Who paused, resumed or triggered the job, newest first',
    'When',
    rows,
  );
}

/**
 * A table of entries, newest first, each row headed by its time: one line per entry on a wide screen (scrolled
 * sideways where it is wider), a card per entry on a phone, each cell with its column's name (`data-label`).
 */
function cardTable(
  label: string,
  caption: string,
  first: string,
  rows: { head: string; cells: Cell[] }[],
): string {
  const columns = [first, ...rows[0].cells.map(([column]) => column)];
  return `<div class="scroll" role="region" aria-label="${label}" tabindex="0"><table class="cards" role="table">
<caption class="hidden">${caption}</caption>
<thead role="rowgroup"><tr role="row">${columns.map((column) => `<th scope="col" role="columnheader"${CELL_CLASS[column] ?? ''}>${column}</th>`).join('')}</tr></thead>
<tbody role="rowgroup">${rows
    .map(
      ({ head, cells }) =>
        `<tr role="row"><th scope="row" role="rowheader" data-label="${first}">${head}</th>${cells
          .map(
            ([column, html]) =>
              `<td role="cell" data-label="${column}"${CELL_CLASS[column] ?? ''}>${html}</td>`,
          )
          .join('')}</tr>`,
    )
    .join('\n')}</tbody></table></div>`;
}

/** The runs' and audit's cells that wrap (`text`), and those a phone leaves out, where the card is short of room (`wide`). */
const CELL_CLASS: Record<string, string> = {
  Error: ' class="text"',
  Note: ' class="text"',
  Slot: ' class="wide"',
  Replica: ' class="wide"',
};

/** A cell of a table: its column's name, and its HTML. */
type Cell = [column: string, html: string];

/**
 * The durations of the runs, oldest on the left, as an SVG bar chart coloured by exit reason. Each bar has a
 * title (a tooltip, and what a screen reader says); the table below it holds the same data.
 */
function chart(runs: PeriodicRunRecord[], now: number): string {
  if (runs.length === 0) return '';
  const shown = [...runs].reverse();
  // A run in flight is as tall as it has run so far, and paler: it has no duration yet.
  const duration = (run: PeriodicRunRecord) => run.durationMs ?? Math.max(0, now - run.startedAt.getTime());
  const longest = Math.max(0, ...shown.map(duration));
  // Room for 50 bars, whatever their number: a few runs make thin bars on the left, not blocks.
  const [bar, gap, height] = [10, 2, 120];
  const width = Math.max(shown.length, 50) * (bar + gap);
  const bars = shown
    .map((run, index) => {
      const reason = run.reason ?? 'running';
      const tall = Math.max(2, Math.round((duration(run) / (longest || 1)) * height));
      const what = `${run.startedAt.toISOString()}: ${reason}${run.durationMs === null ? `, ${lasted(duration(run))} so far` : `, ${lasted(run.durationMs)}`}`;
      return `<rect class="bar reason-${reason}" x="${index * (bar + gap)}" y="${height - tall}" width="${bar}" height="${tall}"><title>${esc(what)}</title></rect>`;
    })
    .join('');
  const tally = REASONS.map(
    (reason) => [reason, shown.filter((run) => (run.reason ?? 'running') === reason).length] as const,
  ).filter(([, count]) => count > 0);
  const label = `Durations of the last ${shown.length === 1 ? 'run' : `${shown.length} runs`}, oldest first, longest ${lasted(longest)}: ${tally.map(([reason, count]) => `${count} ${reason}`).join(', ')}`;
  const legend = tally
    .map(([reason, count]) => `<li><span class="swatch reason-${reason}"></span>${reason} ${count}</li>`)
    .join('');
  return `<figure class="chart">
<svg viewBox="0 0 ${width} ${height}" preserveAspectRatio="none" role="img" aria-label="${esc(label)}">${bars}</svg>
<figcaption>Durations (longest ${lasted(longest)}), oldest on the left<ul class="legend">${legend}</ul></figcaption>
</figure>`;
}

/** How long a run took, to two significant digits or to the millisecond: `0.04 ms`, `3.2 ms`, `41 ms`, `1.5 s`. */
function lasted(ms: number): string {
  if (ms < 10) return `${Number(ms.toPrecision(2))}${NBSP}ms`;
  if (ms < 1000) return `${Math.round(ms)}${NBSP}ms`;
  if (ms < 60_000) return `${Number((ms / 1000).toPrecision(3))}${NBSP}s`;
  return span(Math.round(ms / 1000) * 1000).replaceAll(' ', NBSP);
}

/**
 * A time: relative to now in words, exact in its tooltip and `datetime`; with `absolute` (a job's page), exact
 * beside it too. The server writes UTC; the script writes them again in the viewer's time zone.
 */
function time(at: number, now: number, absolute = false): string {
  const iso = new Date(at).toISOString();
  const exact = absolute ? ` <span class="absolute" data-absolute="${iso}">(${utc(at)})</span>` : '';
  return `<time datetime="${iso}" title="${utc(at)}">${relative(at - now)}</time>${exact}`;
}

function utc(at: number): string {
  return `${new Date(at).toISOString().replace('T', ' ').slice(0, 19)}${NBSP}UTC`;
}

function relative(ms: number): string {
  const size = Math.abs(ms);
  const words =
    size < 1000
      ? 'now'
      : size < 60_000
        ? `${Math.round(size / 1000)} s`
        : size < 3_600_000
          ? `${Math.round(size / 60_000)} min`
          : size < 86_400_000
            ? `${Math.round(size / 3_600_000)} h`
            : `${Math.round(size / 86_400_000)} d`;
  const said = words === 'now' ? 'now' : ms < 0 ? `${words} ago` : `in ${words}`;
  return said.replaceAll(' ', NBSP);
}

/** Text as HTML that a narrow column may break after a `.`, `/`, `_` or `@` (a job's name, a time zone, an e-mail). */
function breakable(text: string): string {
  return esc(text).replace(/([./_@])(?=.)/g, '$1<wbr>');
}

/**
 * Text as HTML: every character that could open markup or end an attribute, escaped; a control character that
 * HTML does not allow (a run's error may carry NUL or ESC) shown as U+FFFD.
 */
export function esc(text: string): string {
  return (
    text
      .replace(/[&<>"']/g, (char) => `&#${char.charCodeAt(0)};`)
      // eslint-disable-next-line no-control-regex -- finding control characters is the point
      .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F]/g, '\uFFFD')
  );
}
