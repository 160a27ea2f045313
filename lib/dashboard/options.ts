// The dashboard's options, checked as every option of the package is: by rules that name the option, the value
// and what is accepted.
import { checkedOptions, type OptionRule } from '../scheduler/rules.js';

export const DASHBOARD_OPTIONS = Symbol('nestjs-periodic: the dashboard options');

/** What a request may see and do: everything and act, everything, or nothing (the dashboard answers 404). */
export type PeriodicDashboardAccess = 'operate' | 'read' | 'none';

/**
 * The options of {@link PeriodicDashboardModule.forRoot}. `Request` is the platform's request object, as a Nest
 * guard gets it: Express's `Request` or Fastify's `FastifyRequest`.
 */
// The request's type is the platform's, which the package does not depend on: `any` by default, so that
// `(req) => req.user` type-checks in an application that has not named it.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export interface PeriodicDashboardOptions<Request = any> {
  /** Where the dashboard is mounted, under the application's global prefix. @default '/periodic' */
  path?: string;
  /**
   * Decides, for every request, what it may see and do: `'operate'` (see and act), `'read'` (see; every action
   * is refused with 403), `'none'` (404). Required: the dashboard is closed unless the application opens it.
   */
  access: (request: Request) => PeriodicDashboardAccess | Promise<PeriodicDashboardAccess>;
  /** Who is acting, for the audit trail (`by`), e.g. the user's e-mail. @default nobody named (null) */
  actor?: (request: Request) => string | null | undefined | Promise<string | null | undefined>;
}

/** The options with their defaults. */
export interface ResolvedDashboardOptions {
  path: string;
  access: PeriodicDashboardOptions['access'];
  actor: NonNullable<PeriodicDashboardOptions['actor']>;
}

const isFunction = (value: unknown) => typeof value === 'function';

const RULES = {
  path: {
    accepts: (value) =>
      typeof value === 'string' && /^\/[\w\-./~]*$/.test(value) && !/\/\/|\/\.{1,2}(\/|$)/.test(value),
    expected:
      "a path that starts with '/', of letters, digits and - _ . ~ / (such as '/periodic' or '/admin/jobs')",
  },
  access: {
    accepts: isFunction,
    required: true,
    expected: "a function of the request that returns 'operate', 'read' or 'none'",
    because:
      'the dashboard shows every job and lets its callers pause them: the application decides who may, such as ' +
      "access: (req) => (req.user?.admin ? 'operate' : 'none')",
  },
  actor: {
    accepts: isFunction,
    expected: 'a function of the request that returns who acts (a string) or null',
  },
} satisfies Record<keyof PeriodicDashboardOptions, OptionRule>;

/** The options checked, with their defaults; a {@link PeriodicConfigError} names the first that is wrong. */
export function resolveDashboardOptions(options: PeriodicDashboardOptions): ResolvedDashboardOptions {
  const given = checkedOptions(
    'PeriodicDashboardModule.forRoot()',
    options,
    RULES,
    "{ access: (req) => (isAdmin(req) ? 'operate' : 'none') }",
  ) as unknown as PeriodicDashboardOptions;
  return {
    path: (given.path ?? '/periodic').replace(/\/+$/, ''),
    access: given.access,
    actor: given.actor ?? (() => null),
  };
}
