// The dashboard's routes: two pages, three assets and the JSON API, each asking `access` first. The module mounts
// a subclass of this controller at the dashboard's path. A job's name is read from the request's own address
// (one segment, percent-encoded), behind a wildcard route: Fastify's routes limit a parameter to 100
// characters, and a name may have 200 (600 once encoded, or more).
import {
  BadRequestException,
  Body,
  ForbiddenException,
  Get,
  HttpCode,
  HttpException,
  HttpStatus,
  Inject,
  NotFoundException,
  Post,
  Query,
  Req,
  Res,
  UnsupportedMediaTypeException,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { JobHealth } from '../nest/health.js';
import type { PeriodicScheduleDefinition } from '../scheduler/stored-schedules.js';
import { PeriodicRegistry } from '../nest/registry.js';
import {
  describeValue,
  PeriodicConfigError,
  PeriodicConflictError,
  PeriodicNotFoundError,
  PeriodicStoreError,
} from '../scheduler/errors.js';
import { ASSETS } from './assets.js';
import { ActionBudget, type AnyRequest, decoded, foreignOrigin, SECURITY_HEADERS } from './hardening.js';
import { DASHBOARD_OPTIONS, type PeriodicDashboardAccess, type ResolvedDashboardOptions } from './options.js';
import { badListPage, jobPage, listPage, notFoundPage, type PageContext } from './pages.js';
import {
  jobDetailOf,
  LIST_STATES,
  listOf,
  LONGEST_SEARCH,
  PAGE_ROWS,
  type PeriodicDashboardQuery,
  type PeriodicDashboardState,
  readCursor,
  servingReplica,
  storeOf,
} from './views.js';

const HTML = 'text/html; charset=utf-8';
const ACTIONS = ['trigger', 'pause', 'resume'] as const;
/** A backfill of a past range of the job's slots, and its cancellation (docs/policies.md). */
const BACKFILLS = ['backfill', 'cancelBackfill'] as const;
/** What an operator may change of a stored schedule (docs/schedules.md): its timing, or whether it is there. */
const EDITS = ['schedule', 'remove'] as const;
type Edit = (typeof EDITS)[number];
const RECORDS = ['history', 'audit'] as const;

/** The response, as Express and Fastify both give it: a status and headers. */
interface AnyResponse {
  status(code: number): unknown;
  header(name: string, value: string): unknown;
}

/** The headers of the pages, of an asset and of the API's answers, besides the security headers. */
const PAGE = { 'Content-Type': HTML, 'Cache-Control': 'no-store' };
const API = { 'Cache-Control': 'no-store' };
const assetHeaders = (file: string) => ({ 'Content-Type': ASSETS[file].type, 'Cache-Control': 'no-cache' });

/** The routes below a job's name, whose path ends in the platform's wildcard (set when the module starts). */
export const WILDCARD_ROUTES = { jobPage: 'jobs/', jobRead: 'api/jobs/', act: 'api/jobs/' } as const;

/** The wildcard at the end of a route's path: Fastify's router and Express's path-to-regexp name it apart. */
export function wildcard(platform: string): string {
  return platform === 'fastify' ? '*' : '*address';
}

/** Why an action did not start: 409 with `{ ok: false, error, message }`, in words. */
const REFUSALS: Record<string, string> = {
  paused: 'the job is paused',
  jobNotStarted: 'its guard said no, or a run is still going and onOverlap is ignore',
  notInManualMode: 'the job is not in manual mode',
  notLeaseHolder: 'this replica does not hold the lease',
  noHolder: 'no replica holds the lease',
};

export class DashboardController {
  readonly #health: JobHealth;
  readonly #budget = new ActionBudget();

  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly registry: PeriodicRegistry,
    private readonly adapterHost: HttpAdapterHost,
  ) {
    this.#health = new JobHealth(registry);
  }

  @Get()
  async listPage(
    @Req() request: AnyRequest,
    @Res({ passthrough: true }) response: AnyResponse,
    @Query() given: Record<string, unknown>,
  ): Promise<string> {
    const access = await this.#allowed(request, response, PAGE);
    const page = this.#page(request, access, '');
    let query: PeriodicDashboardQuery;
    try {
      query = listQuery(given);
    } catch (error) {
      // A person follows a link or types an address: the answer is a page, with the way back to the list.
      if (!(error instanceof BadRequestException)) throw error;
      response.status(400);
      return badListPage(error.message, page);
    }
    return listPage(await listOf(this.registry, this.#health, query), query, page);
  }

  @Get(WILDCARD_ROUTES.jobPage)
  async jobPage(
    @Req() request: AnyRequest,
    @Res({ passthrough: true }) response: AnyResponse,
  ): Promise<string> {
    const [encoded, ...rest] = this.#below(request, WILDCARD_ROUTES.jobPage);
    if (encoded === undefined || encoded === '' || rest.length > 0) this.#nothingHere(request);
    const access = await this.#allowed(request, response, PAGE);
    const page = this.#page(request, access, WILDCARD_ROUTES.jobPage);
    const name = decoded(encoded);
    // A link kept from before the job was removed or renamed: a page that says so, and leads back to the list.
    if (name === undefined || !this.registry.has(name)) {
      response.status(404);
      return notFoundPage(name, page);
    }
    const job = await jobDetailOf(this.registry, this.#health, name);
    const recorded = this.registry.get(name).recordsRuns;
    // What the store does not answer is said so on the page, which shows what this replica knows.
    const [runs, audit] = await Promise.all([
      recorded ? this.#unlessStoreDown(this.registry.history(name)) : Promise.resolve(undefined),
      this.#unlessStoreDown(this.registry.audit(name)),
    ]);
    return jobPage(job, recorded ? runs : null, audit, page);
  }

  @Get('assets/dashboard.css')
  async style(
    @Req() request: AnyRequest,
    @Res({ passthrough: true }) response: AnyResponse,
  ): Promise<string> {
    await this.#allowed(request, response, assetHeaders('dashboard.css'));
    return ASSETS['dashboard.css'].body;
  }

  @Get('assets/icon.svg')
  async icon(@Req() request: AnyRequest, @Res({ passthrough: true }) response: AnyResponse): Promise<string> {
    await this.#allowed(request, response, assetHeaders('icon.svg'));
    return ASSETS['icon.svg'].body;
  }

  @Get('assets/dashboard.js')
  async script(
    @Req() request: AnyRequest,
    @Res({ passthrough: true }) response: AnyResponse,
  ): Promise<string> {
    await this.#allowed(request, response, assetHeaders('dashboard.js'));
    return ASSETS['dashboard.js'].body;
  }

  @Get('api/jobs')
  async jobs(
    @Req() request: AnyRequest,
    @Res({ passthrough: true }) response: AnyResponse,
    @Query() given: Record<string, unknown>,
  ) {
    await this.#allowed(request, response, API);
    const list = await listOf(this.registry, this.#health, listQuery(given));
    return { store: storeOf(this.registry), ...list };
  }

  /** `api/jobs/:name`, and its `history` and `audit`. */
  @Get(WILDCARD_ROUTES.jobRead)
  async jobRead(
    @Req() request: AnyRequest,
    @Res({ passthrough: true }) response: AnyResponse,
    @Query('limit') limit?: string,
    @Query('before') before?: string,
  ) {
    const [encoded, record, ...rest] = this.#below(request, WILDCARD_ROUTES.jobRead);
    const known = record === undefined || (RECORDS as readonly string[]).includes(record);
    if (encoded === undefined || encoded === '' || !known || rest.length > 0) this.#nothingHere(request);
    await this.#allowed(request, response, API);
    const name = this.#known(decoded(encoded));
    if (record === undefined) {
      return { ...(await jobDetailOf(this.registry, this.#health, name)), store: storeOf(this.registry) };
    }
    const read: Promise<unknown[]> =
      record === 'history'
        ? this.registry.history(name, {
            ...(limit === undefined ? {} : { limit: integer('limit', limit) }),
            ...(before === undefined ? {} : { before: date('before', before) }),
          })
        : this.registry.audit(name, limit === undefined ? {} : { limit: integer('limit', limit) });
    const shown = await this.#unlessStoreDown(answered(read));
    return { store: storeOf(this.registry), [record === 'history' ? 'runs' : 'entries']: shown ?? null };
  }

  /**
   * `POST api/jobs/:name/trigger | pause | resume | backfill | cancelBackfill`, and of a stored schedule
   * `schedule | remove`.
   */
  @Post(WILDCARD_ROUTES.act)
  @HttpCode(200)
  async act(
    @Req() request: AnyRequest,
    @Res({ passthrough: true }) response: AnyResponse,
    @Body() body: unknown,
  ) {
    const [encoded, action, ...rest] = this.#below(request, WILDCARD_ROUTES.act);
    if (encoded === undefined || encoded === '' || action === undefined || rest.length > 0) {
      this.#nothingHere(request);
    }
    const access = await this.#allowed(request, response, API);
    if (![...ACTIONS, ...BACKFILLS, ...EDITS].includes(action as Edit)) {
      throw new NotFoundException(
        `no action "${action}": the actions are ${[...ACTIONS, ...BACKFILLS].join(', ')}, and of a stored ` +
          `schedule ${EDITS.join(', ')}`,
      );
    }
    if (access !== 'operate') throw new ForbiddenException('read-only access: actions are refused');
    // A cross-site form can only send form or text bodies: JSON is proof enough that the page's script sent it.
    const type = String(request.headers['content-type'] ?? '');
    if (type.split(';')[0].trim().toLowerCase() !== 'application/json') {
      const example = (EDITS as readonly string[]).includes(action)
        ? EXAMPLES[action as Edit]
        : action === 'backfill'
          ? BACKFILL_EXAMPLE
          : '{"note":"maintenance"}';
      throw new UnsupportedMediaTypeException(
        `${action} takes a JSON body, for example ${example}, with Content-Type: application/json; got ${type === '' ? 'no Content-Type' : type}`,
      );
    }
    const foreign = foreignOrigin(request);
    if (foreign !== undefined) {
      throw new ForbiddenException(`only the dashboard's own origin may act, and ${foreign}`);
    }
    const editing = (EDITS as readonly string[]).includes(action);
    const range = action === 'backfill' ? rangeOf(body) : undefined;
    const note = editing ? {} : noteOf(range === undefined ? body : range.note);
    const name = editing ? this.#stored(action as Edit, decoded(encoded)) : this.#known(decoded(encoded));
    const edit = editing ? editOf(action as Edit, name, body) : undefined;
    const spent = this.#budget.take(name);
    if (spent !== undefined) {
      response.header('Retry-After', String(spent.retryAfter));
      throw new HttpException(
        {
          ok: false,
          error: 'tooManyActions',
          message: `at most 10 actions a second on job ${describeValue(name)}: try again in ${spent.retryAfter} s`,
        },
        HttpStatus.TOO_MANY_REQUESTS,
      );
    }
    const actor = await this.options.actor(request);
    if (actor !== null && actor !== undefined && typeof actor !== 'string') {
      throw new Error(
        `PeriodicDashboardModule: actor(request) returned ${describeValue(actor)}; it must return a string or null`,
      );
    }
    const by = actor === null || actor === undefined || actor === '' ? {} : { by: actor };
    if (edit !== undefined) return this.#edit(name, action as Edit, edit, by);
    if (action === 'backfill') {
      const { slots } = await answered(
        this.registry.backfill(name, { ...range!.range, ...by, ...note }),
      ).catch((error: unknown) => storeDown(action, name, error));
      return { ok: true, slots };
    }
    if (action === 'cancelBackfill') {
      const dropped = await answered(this.registry.cancelBackfill(name, { ...by, ...note })).catch(
        (error: unknown) => storeDown(action, name, error),
      );
      return { ok: true, dropped };
    }
    type Outcome = { ok: true } | { ok: false; error: string; message?: string };
    const result: Outcome = await answered<Outcome>(
      action === 'trigger'
        ? this.registry.trigger(name, { ...by, ...note })
        : this.registry[action as 'pause' | 'resume'](name, { ...by, ...note }).then(
            () => ({ ok: true }) as const,
          ),
    ).catch((error: unknown) => storeDown(action, name, error));
    if (result.ok) return result;
    if (result.error === 'storeUnreachable') storeDown(action, name);
    throw new HttpException(
      {
        ok: false,
        error: result.error,
        message: `${action} of job ${describeValue(name)} started nothing: ${REFUSALS[result.error] ?? result.error}`,
      },
      HttpStatus.CONFLICT,
    );
  }

  /**
   * A change of a stored schedule's timing, or its removal, refused when the schedule changed since the page
   * that asks was read: 409 `{ ok: false, error: 'conflict', currentVersion, message }`.
   */
  async #edit(
    name: string,
    action: Edit,
    edit: ScheduleEdit,
    by: { by?: string },
  ): Promise<{ ok: true; version: number | null }> {
    const { schedules } = this.registry;
    if (!schedules.has(name)) {
      throw new BadRequestException(
        `job ${describeValue(name)} is not a stored schedule: its timing is set in the application's code, ` +
          'and only the schedules of registry.schedules can be changed or removed here',
      );
    }
    const change = { ...by, ifVersion: edit.ifVersion };
    try {
      if (action === 'remove') {
        if (!(await schedules.remove(name, change))) throw new PeriodicConflictError('removed since', null);
        return { ok: true, version: null };
      }
      const current = await schedules.get(name);
      if (current === null) throw new PeriodicConflictError('removed since', null);
      // The definition as stored (read back, it can be written as it is), with the new timing for the old one.
      const kept: PeriodicScheduleDefinition = { ...current };
      for (const timing of ['every', 'cron', 'timezone', 'at'] as const) delete kept[timing];
      const saved = await answered(schedules.upsert({ ...kept, ...edit.timing }, change));
      return { ok: true, version: saved.version };
    } catch (error) {
      if (!(error instanceof PeriodicConflictError)) return storeDown(action, name, error);
      throw conflictOf(action, name, error.currentVersion, edit.ifVersion);
    }
  }

  /**
   * What the request may do. 'none' is answered as the platform answers a path where nothing is mounted; the
   * others get the dashboard's security headers (and the API's `Cache-Control: no-store`).
   */
  async #allowed(
    request: AnyRequest,
    response: AnyResponse,
    headers: Readonly<Record<string, string>>,
  ): Promise<Exclude<PeriodicDashboardAccess, 'none'>> {
    const access: unknown = await this.options.access(request);
    if (access === 'none') this.#nothingHere(request);
    if (access !== 'operate' && access !== 'read') {
      throw new Error(
        `PeriodicDashboardModule: access(request) returned ${describeValue(access)}; it must return 'operate', ` +
          "'read' or 'none'",
      );
    }
    // Set here, not by Nest's @Header(), which sets them before the handler runs, on a 404 for 'none' too.
    for (const [header, value] of Object.entries({ ...SECURITY_HEADERS, ...headers })) {
      response.header(header, value);
    }
    return access;
  }

  /**
   * The platform's own answer for a path where nothing is mounted: Nest's 404 (its not-found handler says the
   * same), or, for a path that is not valid percent-encoding (which the dashboard repaired to answer it), what
   * the platform answers such a path: Fastify a 400 wherever it is; Express a 400 below a global prefix (whose
   * not-found route decodes the rest of the path), and elsewhere the 404.
   */
  #nothingHere(request: AnyRequest): never {
    const { httpAdapter } = this.adapterHost;
    const url: string = httpAdapter.getRequestUrl?.(request) ?? request.originalUrl ?? request.url ?? '';
    const path = url.split('?')[0];
    const broken = path.split('/').find((segment: string) => decoded(segment) === undefined);
    const prefixed = !path.startsWith(`${this.options.path}/`);
    if (broken !== undefined && httpAdapter.getType() === 'fastify') {
      throw new HttpException(
        {
          statusCode: 400,
          code: 'FST_ERR_BAD_URL',
          error: 'Bad Request',
          message: `'${path}' is not a valid url component`,
        },
        HttpStatus.BAD_REQUEST,
      );
    }
    if (broken !== undefined && prefixed) throw new BadRequestException(`Failed to decode param '${broken}'`);
    throw new NotFoundException(`Cannot ${httpAdapter.getRequestMethod?.(request) ?? request.method} ${url}`);
  }

  /** A job there is: an unknown name (or one that is not valid percent-encoding) is 404. */
  #known(name: string | undefined): string {
    if (name === undefined || !this.registry.has(name)) {
      throw new NotFoundException(`no job named ${name === undefined ? 'so' : describeValue(name)}`);
    }
    return name;
  }

  /**
   * The job an edit names: one that is gone was removed since the page that sends the edit was read (or never
   * was), which is the edit's conflict, as a stale version is.
   */
  #stored(action: Edit, name: string | undefined): string {
    if (name === undefined) this.#known(name);
    if (!this.registry.has(name!)) throw conflictOf(action, name!, null);
    return name!;
  }

  /** What the store answered, or undefined when it did not answer (the page and the API say so). */
  async #unlessStoreDown<T>(read: Promise<T>): Promise<T | undefined> {
    try {
      return await read;
    } catch (error) {
      if (error instanceof PeriodicStoreError) return undefined;
      throw error;
    }
  }

  /**
   * The raw segments of the request's path below a wildcard route's fixed part: the name still percent-encoded,
   * so that `a%2Fb` is one name and `a/b` two segments.
   */
  #below(request: AnyRequest, route: string): string[] {
    const url = request.originalUrl ?? request.raw?.originalUrl ?? request.url ?? '';
    const query = url.indexOf('?');
    const segments = (query < 0 ? url : url.slice(0, query)).split('/');
    const pattern = String(request.route?.path ?? request.routeOptions?.url ?? '');
    const fixed = pattern.slice(0, pattern.lastIndexOf(route) + route.length).split('/').length - 1;
    // An Express application mounted in another: its route's path lacks the outer part, counted from the end.
    const offset = Math.max(
      0,
      segments.length - (this.#wildcardSegments(request) ?? segments.length - fixed),
    );
    return segments.slice(offset);
  }

  /** The segments the wildcard matched, where the platform counts them (Express gives them as an array). */
  #wildcardSegments(request: AnyRequest): number | undefined {
    const params = (request as { params?: Record<string, unknown> }).params;
    const matched = params?.address;
    return Array.isArray(matched) ? matched.length : undefined;
  }

  /** The page's context; `route`: the page's route below the dashboard's path. */
  #page(request: AnyRequest, access: 'operate' | 'read', route: string): PageContext {
    const depth = route === '' ? 0 : 2;
    const url = request.originalUrl ?? request.raw?.originalUrl ?? request.url ?? '/';
    const path = url.split('?')[0];
    const pattern = String(request.route?.path ?? request.routeOptions?.url ?? this.options.path);
    const mount = route === '' ? pattern : pattern.slice(0, pattern.lastIndexOf(route));
    return {
      root: rootOf(mount, depth, depth === 0 && path.length > 1 && path.endsWith('/')),
      access,
      replica: servingReplica(this.registry),
      store: storeOf(this.registry),
      now: Date.now(),
    };
  }
}

/**
 * The dashboard's root relative to a page `depth` segments below it, from where the dashboard is mounted (the
 * route's own path, global prefix included), never from the request's address: relative, so that it holds behind
 * a proxy that mounts the application under a path of its own. `trailing`: the page was asked with a trailing
 * slash, from which a browser resolves one level deeper.
 */
export function rootOf(mount: string, depth: number, trailing: boolean): string {
  const name =
    mount
      .split('/')
      .filter((segment) => segment !== '')
      .pop() ?? '';
  const up = depth + (trailing ? 1 : 0);
  // Mounted at the application's root: the root is a folder, `/`, one level less up.
  if (name === '') return up <= 1 ? '.' : '../'.repeat(up - 1).slice(0, -1);
  return `${'../'.repeat(up)}${encodeURIComponent(decoded(name) ?? name)}`;
}

/** A call of the registry whose refusals are answers: an unknown job 404, a bad value 400. */
async function answered<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (error) {
    if (error instanceof PeriodicNotFoundError) throw new NotFoundException(error.message);
    if (error instanceof PeriodicConfigError) throw new BadRequestException(error.message);
    throw error;
  }
}

/** An edit of a stored schedule that changed or went since the page was read: 409, with its version now. */
function conflictOf(action: Edit, name: string, now: number | null, read?: number): HttpException {
  const what = `${action === 'remove' ? 'removal' : 'change'} of schedule ${describeValue(name)} refused`;
  return new HttpException(
    {
      ok: false,
      error: 'conflict',
      currentVersion: now,
      message:
        now === null
          ? `${what}: it was removed since the page was read (or never was). Go back to the list.`
          : `${what}: it was changed since the page was read (version ${read}, now ${now}). Read it again, then edit it.`,
    },
    HttpStatus.CONFLICT,
  );
}

/**
 * A store that did not answer an action (`error`, a PeriodicStoreError, or the action's own answer when none):
 * 503 with `{ ok: false, error: 'storeUnreachable', message }`. Any other error is thrown as it is.
 */
function storeDown(action: string, name: string, error?: unknown): never {
  if (error !== undefined && !(error instanceof PeriodicStoreError)) throw error;
  throw new HttpException(
    {
      ok: false,
      error: 'storeUnreachable',
      message:
        error?.message ??
        `${action} of job ${describeValue(name)} failed: the coordinator's store did not answer. Try again once it answers.`,
    },
    HttpStatus.SERVICE_UNAVAILABLE,
  );
}

/** What the list's address may say. */
const LIST_PARAMETERS = ['state', 'q', 'handler', 'cursor', 'limit'];

/**
 * The list's query, `?state&q&handler&cursor&limit`, each optional; a value it cannot take, or a parameter it does not
 * know (`state[]` too), is a 400 that says why.
 */
function listQuery(query: Record<string, unknown> | undefined): PeriodicDashboardQuery {
  const unknown = Object.keys(query ?? {}).find((key) => !LIST_PARAMETERS.includes(key));
  if (unknown !== undefined) {
    throw new BadRequestException(
      `the list takes only ?${LIST_PARAMETERS.join('=, ?')}=, got ${describeValue(unknown)}: remove it`,
    );
  }
  const given = (key: string): string | null => {
    const value = query?.[key];
    if (value === undefined || value === '') return null;
    if (typeof value !== 'string') {
      throw new BadRequestException(
        `?${key}= must be given once, as plain text, got ${describeValue(value)}`,
      );
    }
    return value;
  };
  const state = given('state');
  if (state !== null && !(LIST_STATES as readonly string[]).includes(state)) {
    throw new BadRequestException(
      `?state= must be one of ${LIST_STATES.join(', ')}, got ${describeValue(state)}: leave it out for every job`,
    );
  }
  const q = given('q');
  if (q !== null && [...q].length > LONGEST_SEARCH) {
    throw new BadRequestException(
      `?q= is a part of a job's name, at most ${LONGEST_SEARCH} characters, got ${[...q].length}`,
    );
  }
  const handler = given('handler');
  if (handler !== null && [...handler].length > LONGEST_SEARCH) {
    throw new BadRequestException(
      `?handler= is the name of a @PeriodicHandler(), at most ${LONGEST_SEARCH} characters, got ${[...handler].length}`,
    );
  }
  const cursor = given('cursor');
  const after = cursor === null ? null : readCursor(cursor);
  if (after === undefined) {
    throw new BadRequestException(
      `?cursor= must be a nextCursor the dashboard answered, got ${describeValue(cursor)}: leave it out for the first page`,
    );
  }
  const limitText = given('limit');
  const limit = limitText === null ? PAGE_ROWS : integer('limit', limitText);
  if (limit < 1 || limit > PAGE_ROWS) {
    throw new BadRequestException(`?limit= must be 1 to ${PAGE_ROWS} rows, got ${limit}`);
  }
  return { state: state as PeriodicDashboardState | null, q, handler, after, limit };
}

/** A query parameter that must be an integer. */
function integer(key: string, text: string): number {
  if (!/^\d+$/.test(text)) {
    throw new BadRequestException(
      `?${key}= must be a whole number, such as ?${key}=20, got ${describeValue(text)}`,
    );
  }
  return Number(text);
}

/** A query parameter that must be a date. */
function date(key: string, text: string): Date {
  const parsed = new Date(text);
  if (Number.isNaN(parsed.getTime())) {
    throw new BadRequestException(
      `?${key}= must be a date, such as ?${key}=2026-12-01T03:00:00Z, got ${describeValue(text)}`,
    );
  }
  return parsed;
}

/** A change of a stored schedule as the page sends it: the version it was read at, and for `schedule` its timing. */
interface ScheduleEdit {
  ifVersion: number;
  /** Of `schedule` only. */
  timing?: { every: number } | { cron: string; timezone?: string };
}

/** A body of each edit, as the messages show it. */
const EXAMPLES: Record<Edit, string> = {
  remove: '{"ifVersion":3}',
  schedule: '{"ifVersion":3,"cron":"0 8 * * 1-5","timezone":"Europe/Paris"}',
};

/**
 * The body of an edit of schedule `name`: `remove` `{ "ifVersion": 3 }`; `schedule` `{ "ifVersion": 3, "every":
 * 60000 }` or `{ "ifVersion": 3, "cron": "0 8 * * 1-5", "timezone"?: "Europe/Paris" }`. The values themselves
 * are checked by `registry.schedules.upsert`, as any schedule's.
 */
function editOf(action: Edit, name: string, body: unknown): ScheduleEdit {
  const where = `${action} of schedule ${describeValue(name)}`;
  const example = `for example ${EXAMPLES[action]}`;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequestException(
      `${where}: the body must be a JSON object, ${example}; got ${describeValue(body)}`,
    );
  }
  const fields = action === 'remove' ? ['ifVersion'] : ['ifVersion', 'every', 'cron', 'timezone'];
  const unknown = Object.keys(body).find((key) => !fields.includes(key));
  if (unknown !== undefined) {
    throw new BadRequestException(
      `${where}: unknown field ${describeValue(unknown)} in the body; it may hold only ${fields.join(', ')}`,
    );
  }
  const { ifVersion, every, cron, timezone } = body as Record<string, unknown>;
  if (!Number.isSafeInteger(ifVersion) || (ifVersion as number) < 1) {
    throw new BadRequestException(
      `${where}: "ifVersion" must be the schedule's version as the page read it, an integer ≥ 1; got ${describeValue(ifVersion)} (${example})`,
    );
  }
  if (action === 'remove') return { ifVersion: ifVersion as number };
  if ((every === undefined) === (cron === undefined)) {
    throw new BadRequestException(
      `${where}: the body must give "every" or "cron", not both nor neither (${example})`,
    );
  }
  if (every !== undefined) {
    if (timezone !== undefined) {
      throw new BadRequestException(
        `${where}: "timezone" goes with "cron" only; got ${describeValue(timezone)} with "every": leave it out`,
      );
    }
    return { ifVersion: ifVersion as number, timing: { every: every as number } };
  }
  const zone = timezone === undefined || timezone === '' ? {} : { timezone: timezone as string };
  return { ifVersion: ifVersion as number, timing: { cron: cron as string, ...zone } };
}

const BACKFILL_EXAMPLE = '{"from":"2026-12-01T00:00:00Z","to":"2026-12-02T00:00:00Z","note":"the outage"}';

/**
 * The body of a backfill: `{ "from", "to", "note"? }`, the instants as ISO 8601 text (checked by the job); the
 * note apart, as the other actions take it.
 */
function rangeOf(body: unknown): { range: { from: string; to: string }; note: { note?: unknown } } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequestException(
      `the body must be a JSON object such as ${BACKFILL_EXAMPLE}, got ${describeValue(body)}`,
    );
  }
  const { from, to, ...rest } = body as Record<string, unknown>;
  for (const [key, value] of [
    ['from', from],
    ['to', to],
  ] as const) {
    if (typeof value !== 'string') {
      throw new BadRequestException(
        `"${key}" must be an instant as ISO 8601 text with its offset, such as ${BACKFILL_EXAMPLE}; got ${describeValue(value)}`,
      );
    }
  }
  return { range: { from: from as string, to: to as string }, note: rest };
}

/** The note of an action, for the audit trail, from the JSON body: `{}` or `{ "note": "…" }`. */
function noteOf(body: unknown): { note?: string } {
  // An empty body is `{}` (Express), but `null` is a body that is not an object, on every platform.
  const given = body === undefined ? {} : body;
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new BadRequestException(
      `the body must be a JSON object such as {"note":"maintenance"}, got ${describeValue(given)}`,
    );
  }
  const { note, ...rest } = given as { note?: unknown };
  const unknown = Object.keys(rest);
  if (unknown.length > 0) {
    throw new BadRequestException(`unknown field "${unknown[0]}" in the body: it may hold only "note"`);
  }
  if (note === undefined) return {};
  if (typeof note !== 'string') {
    throw new BadRequestException(`"note" must be a string, got ${describeValue(note)}`);
  }
  return { note };
}
