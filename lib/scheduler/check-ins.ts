// Check-ins (docs/alerts.md): each run tells an outside monitor that it started and how it ended, so that the
// monitor notices when no run comes at all (every replica down). The pings of the widely used cron monitors
// (Healthchecks.io, Cronitor, Sentry's HTTP check-ins): `POST <url>/start`, `POST <url>`, `POST <url>/fail`; or a
// function of the application's. A ping never delays or fails a run: it is sent beside it, given 5 s and one
// retry, and its failures are reported, at most once an hour per job.
import { describeValue, messageOf, PeriodicConfigError } from './errors.js';
import type { JobExitReason } from './events.js';
import { errorOf } from './history.js';
import type { OptionRule } from './rules.js';

/** What a check-in tells: a run of the job started, ended normally, or ended otherwise. */
export interface PeriodicCheckInEvent {
  name: string;
  jobId: number;
  kind: 'start' | 'success' | 'fail';
  /** The slot the run is for; null for a trigger or a manual tick. */
  slot: Date | null;
  /** A run that failed: its error as the module's `errors` allows (`Name: message`, or the name alone). */
  error?: string;
}

/** Where a job's check-ins go: pings of a monitor's address, or a function that sends them (a vendor's SDK). */
export type PeriodicCheckIn = { url: string } | { send: (event: PeriodicCheckInEvent) => unknown };

/** The module's `checkIns`: as a job's, but the address may be a function of the job (undefined: none). */
export type PeriodicCheckIns =
  | { url: string | ((job: { name: string }) => string | undefined) }
  | { send: (event: PeriodicCheckInEvent) => unknown };

/** How long a ping may take, in ms, before it is given up (and tried once more). */
const CHECK_IN_TIMEOUT = 5000;
/** The most a failed run's ping says of its error, in bytes of UTF-8. */
const BODY_MAX = 10 * 1024;
/** How often a job's failing pings are reported at most, in ms. */
const REPORT_EVERY = 3_600_000;

/** What a ping's address must be: an http(s) URL without credentials in it, a query or a fragment. */
function urlProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'it is not a URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    return `its scheme is ${url.protocol}, not https: or http:`;
  if (url.search !== '' || url.hash !== '')
    return 'it has a query or a fragment, after which /start and /fail would not go';
  return undefined;
}

const isCheckInUrl = (value: unknown) => typeof value === 'string' && urlProblem(value) === undefined;

/**
 * Whether `value` is a check-in's one option: `{ url }` (an address; or, with `urlFunction`, a function of the
 * job) or `{ send }`.
 */
function isCheckIn(value: unknown, urlFunction: boolean): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const { url, send } = value as { url?: unknown; send?: unknown };
  return (
    Object.keys(value).length === 1 &&
    (isCheckInUrl(url) || (urlFunction && typeof url === 'function') || typeof send === 'function')
  );
}

const checkInProblem = (value: unknown) => urlProblem((value as { url?: unknown } | undefined)?.url);

/** The rule of a job's `checkIn`. */
export const CHECK_IN_RULE = {
  accepts: (value) => value === false || isCheckIn(value, false),
  expected:
    "{ url: 'https://monitor.example/ping/<id>' } (an http(s) URL without a query), { send: (event) => … }, or " +
    "false (none, whatever the module's checkIns)",
  problem: checkInProblem,
} satisfies OptionRule;

/** The rule of the module's `checkIns`. */
export const CHECK_INS_RULE = {
  accepts: (value) => isCheckIn(value, true),
  expected:
    '{ url: (job) => `https://monitor.example/ping/${job.name}` } (or one URL for every job), or ' +
    '{ send: (event) => … }',
  problem: checkInProblem,
} satisfies OptionRule;

/**
 * What hears of pings that failed, after their retry: the module logs them (`report`: at most once an hour per
 * job), and counts each as a metric.
 */
export interface CheckInReports {
  failed(name: string, error: unknown, report: boolean): void;
}

/** Outside the Nest module: a failing job's pings are a process warning, once an hour. */
export const CHECK_IN_WARNINGS: CheckInReports = {
  failed: (name, error, report) => {
    if (!report) return;
    process.emitWarning(
      `the check-ins of job ${JSON.stringify(name)} fail: ${messageOf(error)}; its runs go on (said once an hour)`,
      { code: 'PERIODIC_CHECK_IN' },
    );
  },
};

/**
 * The check-ins of one job: a ping when a run starts, and one when it ends, sent after the first has settled, so
 * that a monitor gets them in order. Made only for a job that has check-ins.
 */
export class CheckIns {
  /** When this job's failures were last reported (ms since the epoch), so that they are reported once an hour. */
  #reportedAt = -Infinity;
  /** The start pings of the runs in flight, by jobId: the end's ping waits for its start's. */
  readonly #starts = new Map<number, Promise<void>>();

  private constructor(
    private readonly name: string,
    private readonly send: (event: PeriodicCheckInEvent) => Promise<unknown>,
    private readonly errors: 'message' | 'name',
    private readonly reports: CheckInReports,
  ) {}

  /**
   * The check-ins of job `name`: its own `checkIn` (false: none), or the module's `checkIns`; undefined when it
   * has none. `where` names the job in the error of a module's `url` function that fails.
   */
  static of(
    where: string,
    name: string,
    own: PeriodicCheckIn | false | undefined,
    module: PeriodicCheckIns | undefined,
    errors: 'message' | 'name',
    reports: CheckInReports,
  ): CheckIns | undefined {
    const target = own === false ? undefined : (own ?? module);
    if (target === undefined) return undefined;
    if ('send' in target) {
      const { send } = target;
      return new CheckIns(name, async (event) => send(event), errors, reports);
    }
    let url: unknown = target.url;
    if (typeof url === 'function') {
      try {
        url = (url as (job: { name: string }) => unknown)({ name });
      } catch (error) {
        throw new PeriodicConfigError(`${where}: checkIns.url(job) threw: ${messageOf(error)}`, {
          cause: error,
        });
      }
      if (url === undefined) return undefined;
      if (!isCheckInUrl(url)) {
        throw new PeriodicConfigError(
          `${where}: checkIns.url(job) must return an http(s) URL without a query, or undefined for none, got ` +
            `${describeValue(url)}${typeof url === 'string' ? `: ${urlProblem(url)}` : ''}`,
        );
      }
    }
    const base = (url as string).replace(/\/+$/, '');
    return new CheckIns(name, (event) => ping(base, event), errors, reports);
  }

  /** A run started. */
  started(jobId: number, slot: number | null): void {
    this.#starts.set(jobId, this.#deliver({ name: this.name, jobId, kind: 'start', slot: dateOf(slot) }));
  }

  /** A run ended, `normal` or not, with what it threw (or the reason it was stopped for). */
  ended(jobId: number, slot: number | null, reason: JobExitReason, error: unknown): void {
    const start = this.#starts.get(jobId) ?? Promise.resolve();
    this.#starts.delete(jobId);
    const event: PeriodicCheckInEvent =
      reason === 'normal'
        ? { name: this.name, jobId, kind: 'success', slot: dateOf(slot) }
        : { name: this.name, jobId, kind: 'fail', slot: dateOf(slot), error: this.#text(reason, error) };
    void start.then(() => this.#deliver(event));
  }

  /** Sends an event, and once more if that fails; a second failure is reported. Never rejects. */
  async #deliver(event: PeriodicCheckInEvent): Promise<void> {
    try {
      await this.send(event);
    } catch {
      try {
        await this.send(event);
      } catch (error) {
        const now = Date.now();
        const report = now - this.#reportedAt >= REPORT_EVERY;
        if (report) this.#reportedAt = now;
        try {
          this.reports.failed(this.name, error, report);
        } catch {
          // What reports a failure must not make one.
        }
      }
    }
  }

  /** A failed run's error as the module's `errors` allows, or its exit reason, cut to 10 kB. */
  #text(reason: JobExitReason, error: unknown): string {
    if (error === undefined) return `the run ended '${reason}'`;
    const { name, message } = errorOf(error, this.errors);
    const text = message === '' ? name : `${name}: ${message}`;
    return Buffer.byteLength(text) <= BODY_MAX ? text : cut(text, BODY_MAX);
  }
}

const dateOf = (slot: number | null) => (slot === null ? null : new Date(slot));

/** `text` cut to at most `bytes` bytes of UTF-8, on a character's boundary. */
function cut(text: string, bytes: number): string {
  const encoded = Buffer.from(text).subarray(0, bytes);
  return new TextDecoder('utf-8', { fatal: false }).decode(encoded).replace(/\uFFFD$/, '');
}

/** One HTTP ping: `POST <base>/start`, `<base>` or `<base>/fail`; a failed run's error as the body. */
async function ping(base: string, event: PeriodicCheckInEvent): Promise<void> {
  const path = event.kind === 'start' ? '/start' : event.kind === 'fail' ? '/fail' : '';
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'Content-Type': 'text/plain; charset=utf-8' },
    body: event.error ?? '',
    signal: AbortSignal.timeout(CHECK_IN_TIMEOUT),
  });
  // The body is not needed: read it away, so that the connection is free again.
  await response.arrayBuffer().catch(() => undefined);
  if (!response.ok) throw new Error(`the monitor answered ${response.status} to ${base}${path}`);
}
