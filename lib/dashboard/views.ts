// What the dashboard shows of a job, read once per request: the same data for its JSON API and for its pages.
import type { PeriodicRegistry } from '../nest/registry.js';
import type { JobHealth } from '../nest/health.js';
import {
  fleetStatusAll,
  type PeriodicFleetStatus,
  type PeriodicIncident,
  replicaOf,
} from '../scheduler/fleet-status.js';
import { errorOf } from '../scheduler/history.js';
import type { PeriodicScheduler } from '../scheduler/periodic-scheduler.js';
import { Calendar } from '../scheduler/schedule.js';
import type { PeriodicJobStatus } from '../scheduler/status.js';
import type { ResolvedPeriodicOptions } from '../scheduler/options.js';

/** A job as `GET {path}/api/jobs` answers it. */
export interface PeriodicDashboardJob {
  name: string;
  exclusive: boolean;
  /** The schedule in words; a cron job's next three slots, and its time zone (null for `every` jobs). */
  schedule: { text: string; next: Date[]; timezone: string | null };
  /** The job's `status()` in this process; a run's error as the history keeps it (`history.errors`). */
  status: PeriodicJobStatus;
  /** An exclusive job's `fleetStatus()`, when its coordinator keeps the fleet's history; null otherwise. */
  fleetStatus: PeriodicFleetStatus | null;
  /** Who paused the job and why (for an exclusive job, the fleet's pause). */
  paused: PeriodicFleetStatus['paused'];
  /** The latest run (for an exclusive job, the fleet's). */
  lastRun: PeriodicFleetStatus['lastRun'];
  health: { status: 'up' | 'down'; reason?: string };
  /** The job's open incidents, oldest first, as `fleetStatus().incidents` shows them (docs/alerts.md). */
  incidents: PeriodicIncident[];
  /** A stored schedule (docs/schedules.md): its handler, and its version as this replica last applied it. */
  stored: { handler: string; version: number; updatedAt: Date; updatedBy: string | null } | null;
}

/** A job with what its own page shows beside: its options, and a backfill under way in this process. */
export interface PeriodicDashboardJobDetail extends PeriodicDashboardJob {
  options: Record<string, unknown>;
  /**
   * The slot it runs next, its end (excluded) and how many slots are left (null on a holder that took it over,
   * which did not count them); null when none runs here.
   */
  backfill: { next: Date; to: Date; left: number | null } | null;
}

/** The failures in a row at which the dashboard shows a job down, as the health check's default. */
const MAX_FAILURES = 3;

/** The states the list counts and filters by. A job may be in more than one: running and down, paused and down. */
export const LIST_STATES = ['ticking', 'paused', 'running', 'down', 'completed'] as const;
export type PeriodicDashboardState = (typeof LIST_STATES)[number];

/**
 * What the list shows: `?state`, `?q` (a part of the name, any case), `?handler` (the stored schedules of one
 * `@PeriodicHandler()`), from `?cursor`, at most `?limit` rows.
 */
export interface PeriodicDashboardQuery {
  state: PeriodicDashboardState | null;
  q: string | null;
  handler: string | null;
  /** The page goes on after the job registered as this (`readCursor`); null: the first page. */
  after: number | null;
  limit: number;
}

/**
 * The longest `?q=` and `?handler=`, in characters (code points): a name has at most 200. The page's field takes
 * twice as many UTF-16 units, so that the browser never refuses what the list takes; the list says why it refuses.
 */
export const LONGEST_SEARCH = 200;

/** The most rows of a page of the list, and of an answer of `GET {path}/api/jobs`. */
export const PAGE_ROWS = 100;

/** A page of the list, as `GET {path}/api/jobs` answers it (with the store). */
export interface PeriodicDashboardList {
  jobs: PeriodicDashboardJob[];
  /** Every job of the application, and how many are in each state. */
  total: number;
  counts: Record<PeriodicDashboardState, number>;
  /** How many match `state` and `q`. */
  matched: number;
  /** Where the rows of this page start among those that match (0 for the first page). */
  offset: number;
  /** The cursor of the next page, or null on the last. */
  nextCursor: string | null;
  /** The application's `@PeriodicHandler()`s, which `?handler` filters the stored schedules by. */
  handlers: string[];
}

/**
 * A page of the jobs that match the query, in the order they were registered, with the counts of every job by
 * state: one pass over the jobs in memory, and one read of the store for the exclusive jobs of the page only.
 * A cursor is the registry's number of the last job of the page before: the page goes on with the jobs
 * registered after it, whatever was removed since (a job added again is registered anew, at the end).
 */
export async function listOf(
  registry: PeriodicRegistry,
  health: JobHealth,
  query: PeriodicDashboardQuery,
): Promise<PeriodicDashboardList> {
  health.refresh();
  const all = registry.getAll();
  const after = query.after ?? 0;
  const needle = query.q?.toLowerCase() ?? null;
  const counts: Record<PeriodicDashboardState, number> = {
    ticking: 0,
    paused: 0,
    running: 0,
    down: 0,
    completed: 0,
  };
  const shown: PeriodicScheduler[] = [];
  let matched = 0;
  let offset = 0;
  let more = false;
  for (const scheduler of all) {
    const states = statesOf(scheduler, health);
    for (const state of states) counts[state]++;
    if (query.state !== null && !states.includes(query.state)) continue;
    if (needle !== null && !scheduler.name.toLowerCase().includes(needle)) continue;
    if (query.handler !== null && registry.schedules.handlerOf(scheduler.name) !== query.handler) continue;
    matched++;
    if (scheduler.registered <= after) offset++;
    else if (shown.length < query.limit) shown.push(scheduler);
    else more = true;
  }
  const fleet = await fleetStatusAll(shown);
  const last = shown.at(-1);
  return {
    jobs: shown.map((scheduler, i) => jobOf(registry, scheduler, fleet[i]!, health)),
    total: all.length,
    counts,
    matched,
    offset,
    nextCursor: more && last !== undefined ? cursorOf(last.registered) : null,
    handlers: registry.schedules.handlerNames,
  };
}

/** The states a job is in, as the list counts them, from what this replica knows without asking the store. */
function statesOf(scheduler: PeriodicScheduler, health: JobHealth): PeriodicDashboardState[] {
  const states: PeriodicDashboardState[] = [];
  const { state } = scheduler;
  if (state === 'ticking' || state === 'paused' || state === 'completed') states.push(state);
  if (scheduler.running > 0) states.push('running');
  if (health.problemOf(scheduler, scheduler.status(), MAX_FAILURES) !== undefined) states.push('down');
  return states;
}

/** A cursor, as the caller sees it: base64url text, opaque. */
function cursorOf(registered: number): string {
  return Buffer.from(JSON.stringify([registered])).toString('base64url');
}

/** The number a cursor holds, or undefined for text the dashboard did not give as a cursor. */
export function readCursor(cursor: string): number | undefined {
  let read: unknown;
  try {
    read = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    return undefined;
  }
  if (!Array.isArray(read) || read.length !== 1) return undefined;
  const [registered] = read as unknown[];
  return Number.isSafeInteger(registered) && (registered as number) >= 0 ? (registered as number) : undefined;
}

/** One job, with its options. */
export async function jobDetailOf(
  registry: PeriodicRegistry,
  health: JobHealth,
  name: string,
): Promise<PeriodicDashboardJobDetail> {
  health.refresh();
  const scheduler = registry.get(name);
  const job = jobOf(registry, scheduler, await registry.fleetStatus(name), health);
  const state = scheduler.backfillState;
  const backfill =
    state === undefined
      ? null
      : { next: new Date(state.next), to: new Date(state.to), left: state.left ?? null };
  return { ...job, options: optionsOf(scheduler.options), backfill };
}

function jobOf(
  registry: PeriodicRegistry,
  scheduler: PeriodicScheduler,
  fleet: PeriodicFleetStatus,
  health: JobHealth,
): PeriodicDashboardJob {
  const status = scheduler.status();
  const reason = health.problemOf(scheduler, status, MAX_FAILURES);
  const { lastFinished } = status;
  const shown: PeriodicJobStatus =
    lastFinished?.error === undefined
      ? status
      : {
          ...status,
          lastFinished: { ...lastFinished, error: errorOf(lastFinished.error, scheduler.errorsShown) },
        };
  // What the store tells of the job, for an exclusive job whose coordinator keeps the fleet's history.
  const told = scheduler.fleetReplica !== undefined;
  return {
    name: status.name,
    exclusive: scheduler.options.exclusive,
    schedule: scheduleOf(scheduler.options, scheduler.state === 'completed'),
    status: shown,
    fleetStatus: told ? fleet : null,
    paused: fleet.paused,
    lastRun: fleet.lastRun,
    health: reason === undefined ? { status: 'up' } : { status: 'down', reason },
    incidents: fleet.incidents,
    stored: registry.schedules.storedOf(status.name) ?? null,
  };
}

/** The coordinator's store as this replica sees it: null without one (no exclusive job keeps its records there). */
export interface PeriodicDashboardStore {
  reachable: boolean;
  /** Since when it has been reachable, or not. */
  since: Date;
  lastError: string | null;
}

/** The store as the serving replica sees it, for the API's answers and the banner at the top of the pages. */
export function storeOf(registry: PeriodicRegistry): PeriodicDashboardStore | null {
  const log = registry.fleetJobs()[0]?.storeLog;
  return log === undefined
    ? null
    : { reachable: log.reachable, since: new Date(log.since), lastError: log.lastError };
}

/** The replica that serves the page, when the application has a coordinator. */
export function servingReplica(registry: PeriodicRegistry): string | null {
  const replica = registry.fleetJobs()[0]?.fleetReplica;
  return replica === undefined ? null : replicaOf(replica.owner);
}

/**
 * The schedule in words: `every 5 s`, the cron pattern in its zone with its next three times, or the one slot of
 * `at`; the times its policies leave out (`exclude`, `startAt`, `endAt`) are not among them.
 */
function scheduleOf(options: ResolvedPeriodicOptions, completed: boolean): PeriodicDashboardJob['schedule'] {
  const { policy } = options;
  if (policy !== undefined && !Number.isNaN(policy.at)) {
    const at = new Date(policy.at);
    return {
      text: `once at ${at.toISOString()}`,
      next: completed || policy.at < Date.now() ? [] : [at],
      timezone: null,
    };
  }
  if (options.cron === undefined) {
    const after = options.delayMode === 'shifted' ? ' after each run' : '';
    return { text: `every ${span(options.every)}${after}`, next: [], timezone: null };
  }
  const timezone = options.timezone!;
  const calendar = Calendar.of(`job "${options.name}"`, options.cron, timezone);
  const from = (time: number) => calendar.next(time - 1);
  const next: Date[] = [];
  for (let after = Date.now(); next.length < 3 && !completed;) {
    const raw = calendar.next(after);
    const slot = policy === undefined || raw === null ? raw : policy.first(raw, from);
    if (slot === null) break;
    next.push(new Date(slot));
    after = slot;
  }
  calendar.release();
  return { text: `${options.cron} ${timezone}`, next, timezone };
}

/** A length of time in words, exact: `250 ms`, `1.5 s`, `5 s`, `1 min 30 s`, `2 h`. */
export function span(ms: number): string {
  if (!Number.isFinite(ms)) return 'no limit';
  if (ms < 1000 || (ms % 1000 !== 0 && ms < 60_000)) return ms < 1000 ? `${ms} ms` : `${ms / 1000} s`;
  const parts: string[] = [];
  let rest = ms;
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['min', 60_000],
    ['s', 1000],
    ['ms', 1],
  ] as const) {
    if (rest >= size) {
      parts.push(`${Math.floor(rest / size)} ${unit}`);
      rest %= size;
    }
  }
  return parts.join(' ');
}

/** The options a job's page lists, in words where a number alone would not say its unit. */
function optionsOf(options: ResolvedPeriodicOptions): Record<string, unknown> {
  const { retry } = options;
  const at = options.policy?.at ?? NaN;
  return {
    ...(!Number.isNaN(at)
      ? {}
      : options.cron === undefined
        ? { every: options.every, delayMode: options.delayMode, initialDelay: options.initialDelay }
        : { cron: options.cron, timezone: options.timezone, initialDelay: options.initialDelay }),
    jitter: options.jitter,
    guard: options.when !== undefined,
    onOverlap: options.onOverlap,
    timeout: Number.isFinite(options.timeout) ? options.timeout : 'Infinity',
    jobShutdown: options.jobShutdown,
    mode: options.mode,
    exclusive: options.exclusive,
    delivery: options.delivery,
    retry: retry.attempts === 0 ? 'none' : { attempts: retry.attempts, backoff: { ...retry.backoff } },
    ...policiesOf(options),
  };
}

/** The schedule policies a job has (docs/policies.md), as its page lists them: only those it was given. */
function policiesOf(options: ResolvedPeriodicOptions): Record<string, unknown> {
  const { policy } = options;
  if (policy === undefined) return {};
  const instant = (time: number) => new Date(time).toISOString();
  const { exclude } = options;
  return {
    ...(options.catchUp === undefined ? {} : { catchUp: { ...policy.catchUp } }),
    ...(Number.isFinite(policy.startAt) ? { startAt: instant(policy.startAt) } : {}),
    ...(Number.isFinite(policy.endAt) ? { endAt: instant(policy.endAt) } : {}),
    ...(Number.isFinite(policy.maxRuns) ? { maxRuns: policy.maxRuns } : {}),
    ...(Number.isNaN(policy.at)
      ? {}
      : {
          at: instant(policy.at),
          ...(options.timezone === undefined ? {} : { timezone: options.timezone }),
        }),
    ...(exclude === undefined
      ? {}
      : { exclude: typeof exclude === 'function' ? 'a function of the slot' : exclude }),
    ...(Number.isFinite(policy.pauseAfterFailures) ? { pauseAfterFailures: policy.pauseAfterFailures } : {}),
  };
}
