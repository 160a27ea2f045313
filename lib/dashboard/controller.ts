// The dashboard's routes: two pages, two assets and the JSON API, each asking `access` first. The module mounts a
// subclass of this controller at the dashboard's path.
import {
  BadRequestException,
  Body,
  ForbiddenException,
  Get,
  Header,
  HttpCode,
  Inject,
  NotFoundException,
  Param,
  Post,
  Query,
  Req,
  Res,
  UnsupportedMediaTypeException,
} from '@nestjs/common';
import { JobHealth } from '../nest/health.js';
import { PeriodicRegistry } from '../nest/registry.js';
import { describeValue, PeriodicConfigError, PeriodicNotFoundError } from '../scheduler/errors.js';
import { ASSETS } from './assets.js';
import { DASHBOARD_OPTIONS, type PeriodicDashboardAccess, type ResolvedDashboardOptions } from './options.js';
import { jobPage, listPage, notFoundPage, type PageContext } from './pages.js';
import { jobDetailOf, jobsOf, servingReplica } from './views.js';

const HTML = 'text/html; charset=utf-8';
const ACTIONS = ['trigger', 'pause', 'resume'] as const;

/** The request, as Express and Fastify both give it: what the dashboard reads of it. */
interface AnyRequest {
  originalUrl?: string;
  url?: string;
  headers: Record<string, string | string[] | undefined>;
}

export class DashboardController {
  readonly #health: JobHealth;

  constructor(
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly registry: PeriodicRegistry,
  ) {
    this.#health = new JobHealth(registry);
  }

  @Get()
  @Header('Content-Type', HTML)
  @Header('Cache-Control', 'no-store')
  async listPage(@Req() request: AnyRequest): Promise<string> {
    const access = await this.#allowed(request);
    const jobs = await jobsOf(this.registry, this.#health);
    return listPage(jobs, this.#page(request, access, 0));
  }

  @Get('jobs/:name')
  @Header('Content-Type', HTML)
  @Header('Cache-Control', 'no-store')
  async jobPage(
    @Req() request: AnyRequest,
    @Res({ passthrough: true }) response: { status(code: number): unknown },
    @Param('name') name: string,
  ): Promise<string> {
    const access = await this.#allowed(request);
    // A link kept from before the job was removed or renamed: a page that says so, and leads back to the list.
    if (!this.registry.has(name)) {
      response.status(404);
      return notFoundPage(name, this.#page(request, access, 2));
    }
    const [job, runs, audit] = await this.#read(name, () =>
      Promise.all([
        jobDetailOf(this.registry, this.#health, name),
        this.registry.history(name),
        this.registry.audit(name),
      ]),
    );
    const recorded = this.registry.get(name).recordsRuns;
    return jobPage(job, recorded ? runs : null, audit, this.#page(request, access, 2));
  }

  @Get('assets/dashboard.css')
  @Header('Content-Type', ASSETS['dashboard.css'].type)
  @Header('Cache-Control', 'no-cache')
  async style(@Req() request: AnyRequest): Promise<string> {
    await this.#allowed(request);
    return ASSETS['dashboard.css'].body;
  }

  @Get('assets/icon.svg')
  @Header('Content-Type', ASSETS['icon.svg'].type)
  @Header('Cache-Control', 'no-cache')
  async icon(@Req() request: AnyRequest): Promise<string> {
    await this.#allowed(request);
    return ASSETS['icon.svg'].body;
  }

  @Get('assets/dashboard.js')
  @Header('Content-Type', ASSETS['dashboard.js'].type)
  @Header('Cache-Control', 'no-cache')
  async script(@Req() request: AnyRequest): Promise<string> {
    await this.#allowed(request);
    return ASSETS['dashboard.js'].body;
  }

  @Get('api/jobs')
  @Header('Cache-Control', 'no-store')
  async jobs(@Req() request: AnyRequest) {
    await this.#allowed(request);
    return jobsOf(this.registry, this.#health);
  }

  @Get('api/jobs/:name')
  @Header('Cache-Control', 'no-store')
  async job(@Req() request: AnyRequest, @Param('name') name: string) {
    await this.#allowed(request);
    return this.#read(name, () => jobDetailOf(this.registry, this.#health, name));
  }

  @Get('api/jobs/:name/history')
  @Header('Cache-Control', 'no-store')
  async history(
    @Req() request: AnyRequest,
    @Param('name') name: string,
    @Query('limit') limit?: string,
    @Query('before') before?: string,
  ) {
    await this.#allowed(request);
    return this.#read(name, () =>
      this.registry.history(name, {
        ...(limit === undefined ? {} : { limit: integer('limit', limit) }),
        ...(before === undefined ? {} : { before: date('before', before) }),
      }),
    );
  }

  @Get('api/jobs/:name/audit')
  @Header('Cache-Control', 'no-store')
  async audit(@Req() request: AnyRequest, @Param('name') name: string, @Query('limit') limit?: string) {
    await this.#allowed(request);
    return this.#read(name, () =>
      this.registry.audit(name, limit === undefined ? {} : { limit: integer('limit', limit) }),
    );
  }

  @Post('api/jobs/:name/:action')
  @HttpCode(200)
  @Header('Cache-Control', 'no-store')
  async act(
    @Req() request: AnyRequest,
    @Param('name') name: string,
    @Param('action') action: string,
    @Body() body: unknown,
  ) {
    const access = await this.#allowed(request);
    if (!(ACTIONS as readonly string[]).includes(action)) {
      throw new NotFoundException(`no action "${action}": the actions are ${ACTIONS.join(', ')}`);
    }
    if (access !== 'operate') throw new ForbiddenException('read-only access: actions are refused');
    // A cross-site form can only send form or text bodies: JSON is proof enough that the page's script sent it.
    const type = String(request.headers['content-type'] ?? '');
    if (type.split(';')[0].trim().toLowerCase() !== 'application/json') {
      throw new UnsupportedMediaTypeException(
        `the actions take a JSON body such as {"note":"maintenance"}, with Content-Type: application/json; got ${type === '' ? 'no Content-Type' : type}`,
      );
    }
    if (crossSite(request)) throw new ForbiddenException('a request from another site is refused');
    const note = noteOf(body);
    const actor = await this.options.actor(request);
    if (actor !== null && actor !== undefined && typeof actor !== 'string') {
      throw new Error(
        `PeriodicDashboardModule: actor(request) returned ${describeValue(actor)}; it must return a string or null`,
      );
    }
    const by = actor === null || actor === undefined || actor === '' ? {} : { by: actor };
    return this.#read(name, async () => {
      if (action === 'trigger') return this.registry.trigger(name, { ...by, ...note });
      await this.registry[action as 'pause' | 'resume'](name, { ...by, ...note });
      return { ok: true };
    });
  }

  /** What the request may do: 'none' is answered 404, as if there were no dashboard. */
  async #allowed(request: AnyRequest): Promise<Exclude<PeriodicDashboardAccess, 'none'>> {
    const access: unknown = await this.options.access(request);
    if (access === 'none') throw new NotFoundException();
    if (access !== 'operate' && access !== 'read') {
      throw new Error(
        `PeriodicDashboardModule: access(request) returned ${describeValue(access)}; it must return 'operate', ` +
          "'read' or 'none'",
      );
    }
    return access;
  }

  /** Calls on a job, with its errors as answers: an unknown job 404, a bad value 400. */
  async #read<T>(name: string, read: () => Promise<T>): Promise<T> {
    if (!this.registry.has(name)) throw new NotFoundException(`no job named ${describeValue(name)}`);
    try {
      return await read();
    } catch (error) {
      if (error instanceof PeriodicNotFoundError) throw new NotFoundException(error.message);
      if (error instanceof PeriodicConfigError) throw new BadRequestException(error.message);
      throw error;
    }
  }

  /** The page's context; `depth`: segments of the page's address below the dashboard's own. */
  #page(request: AnyRequest, access: 'operate' | 'read', depth: number): PageContext {
    return {
      root: rootFrom(request.originalUrl ?? request.url ?? '/', depth),
      access,
      replica: servingReplica(this.registry),
      now: Date.now(),
    };
  }
}

/**
 * The dashboard's root relative to the page at `url`, whose path has `depth` segments below the root: relative,
 * so that it holds behind a global prefix and a proxy that mounts the application under a path of its own.
 */
export function rootFrom(url: string, depth: number): string {
  const segments = url.split('?')[0].split('/');
  // A trailing slash: the page's own segment is empty, and the browser resolves from one level deeper.
  const trailing = segments.length > 1 && segments[segments.length - 1] === '' ? 1 : 0;
  const root = segments.slice(0, segments.length - trailing - depth);
  const name = root[root.length - 1] ?? '';
  const up = depth + trailing;
  // Mounted at the application's root: the root is a folder, `/`, one level less up.
  if (name === '') return up <= 1 ? '.' : '../'.repeat(up - 1).slice(0, -1);
  return `${'../'.repeat(up)}${name}`;
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

/**
 * Whether a browser sent the request from another site: as its `Sec-Fetch-Site` says, or, from a browser that
 * sends none, as its `Origin` differs from the host it asked (`X-Forwarded-Host` behind a proxy).
 */
function crossSite({ headers }: AnyRequest): boolean {
  const site = headers['sec-fetch-site'];
  if (site !== undefined) return site === 'cross-site';
  const origin = headers.origin;
  if (typeof origin !== 'string' || origin === 'null') return origin === 'null';
  const host = String(headers['x-forwarded-host'] ?? headers.host ?? '')
    .split(',')[0]
    .trim();
  try {
    return new URL(origin).host !== host;
  } catch {
    return true;
  }
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
