// What makes the dashboard a hardened page on the web: the headers of its answers, the rule that only its own
// origin may act, the bound on actions per job, and the repair of addresses that the HTTP platforms would refuse
// before the dashboard could answer them as it answers any unknown job. docs/dashboard.md#security says why.

/** The HTTP server, as Node's `http` and `https` give it: what the repair of addresses needs of it. */
export interface RequestServer {
  prependListener(
    event: 'request',
    listener: (request: { url?: string; originalUrl?: string }) => void,
  ): unknown;
}

/** Headers on every answer of the dashboard once `access` lets the caller in: its page, assets and API. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  // The page loads its script, stylesheet and icon from its own path, and fetches its own API: nothing inline.
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  'Referrer-Policy': 'same-origin',
};

/** The request, as Express and Fastify both give it: what the dashboard reads of it. */
export interface AnyRequest {
  method?: string;
  originalUrl?: string;
  url?: string;
  headers: Record<string, string | string[] | undefined>;
  /** The origin's parts as the platform reads them: `X-Forwarded-*` only where the application trusts its proxy. */
  protocol?: string;
  host?: string;
  /** Express: the route that matched. */
  route?: { path?: unknown };
  /** Fastify: the route that matched. */
  routeOptions?: { url?: unknown };
  raw?: { url?: string; originalUrl?: string };
}

/**
 * Why a POST is not from the dashboard's own origin, or undefined when it is: its `Origin` (without one, its
 * `Referer`) must be the origin the request was sent to, as the platform reads it (`req.protocol` and
 * `req.host`, which follow `X-Forwarded-Proto` and `X-Forwarded-Host` only where the application trusts its
 * proxy). A browser's `Sec-Fetch-Site`, when sent, must say `same-origin`: a same-site page is another origin.
 */
export function foreignOrigin(request: AnyRequest): string | undefined {
  const site = single(request.headers['sec-fetch-site']);
  if (site !== undefined && site !== 'same-origin') return `the browser says the request is ${site}`;
  const origin = single(request.headers.origin);
  const referer = single(request.headers.referer);
  const claimed = origin ?? referer;
  if (claimed === undefined) return 'it has neither an Origin nor a Referer';
  const own = originOf(
    `${request.protocol ?? 'http'}://${request.host ?? single(request.headers.host) ?? ''}`,
  );
  const theirs = originOf(claimed);
  if (own === undefined || theirs === undefined || own !== theirs) {
    return `it comes from ${theirs ?? 'an origin that is not a URL'}, not from ${own ?? 'the host asked'}`;
  }
  return undefined;
}

/** A header sent once; a header sent twice is not trusted. */
function single(value: string | string[] | undefined): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

function originOf(url: string): string | undefined {
  try {
    const { origin } = new URL(url);
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

/** The most actions a job takes through the API in a second. */
export const ACTIONS_PER_SECOND = 10;

/**
 * At most {@link ACTIONS_PER_SECOND} actions per job in any second, whoever sends them: a script or a stuck
 * button cannot start hundreds of runs of a job whose `onOverlap` is `'run'`. Counts only jobs that exist.
 */
export class ActionBudget {
  /** The times of each job's actions in the last second, oldest first. */
  readonly #recent = new Map<string, number[]>();
  /** When the jobs without an action in the last second were last forgotten. */
  #sweptAt = 0;

  /** Takes one action of the job's budget; the seconds to wait instead, when it is spent. */
  take(name: string, now = Date.now()): { retryAfter: number } | undefined {
    this.#sweep(now);
    const times = (this.#recent.get(name) ?? []).filter((at) => now - at < 1000);
    this.#recent.set(name, times);
    if (times.length >= ACTIONS_PER_SECOND) {
      return { retryAfter: Math.max(1, Math.ceil((times[0] + 1000 - now) / 1000)) };
    }
    times.push(now);
    return undefined;
  }

  /** At most once a second: the budget holds only the jobs acted on in the last second (a removed job goes too). */
  #sweep(now: number): void {
    if (now - this.#sweptAt < 1000) return;
    this.#sweptAt = now;
    for (const [name, times] of this.#recent)
      if (now - times[times.length - 1]! >= 1000) this.#recent.delete(name);
  }
}

/**
 * Express and Fastify answer 400 to a path that is not valid percent-encoding before any route runs. Under the
 * dashboard's `jobs/` such a segment is a name no job has: it is replaced by `%00` (a name no job can have)
 * before the platform sees it, with the request's own address kept as `originalUrl` (what Nest's answers and
 * the application's logs show). Runs first of the server's `request` listeners; other paths are left as sent.
 */
export function repairJobAddresses(server: RequestServer, mount: string): void {
  const marked = server as RequestServer & { [REPAIRED]?: Set<string> };
  if (marked[REPAIRED]?.has(mount) === true) return;
  (marked[REPAIRED] ??= new Set()).add(mount);
  const markers = [`${mount}/jobs/`, `${mount}/api/jobs/`];
  server.prependListener('request', (request) => {
    const url = request.url;
    if (url === undefined || !url.includes('%')) return;
    const query = url.indexOf('?');
    const path = query < 0 ? url : url.slice(0, query);
    for (const marker of markers) {
      const at = path.lastIndexOf(marker);
      if (at < 0) continue;
      // The name's segment, and what may follow it on the dashboard's routes: nothing, or an action or a record.
      const [name, ...rest] = path.slice(at + marker.length).split('/');
      if (rest.length > 1 || (rest.length === 1 && !SUFFIXES.has(rest[0])) || decoded(name) !== undefined)
        continue;
      request.originalUrl ??= url;
      request.url = `${path.slice(0, at + marker.length)}%00${rest.map((part) => `/${part}`).join('')}${url.slice(path.length)}`;
      return;
    }
  });
}

/** What follows a job's name in the API's addresses. */
const SUFFIXES = new Set(['history', 'audit', 'trigger', 'pause', 'resume']);

const REPAIRED = Symbol('nestjs-periodic: dashboard mounts repaired');

/** A segment of a path decoded, or undefined when it is not valid percent-encoding. */
export function decoded(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}
