// The dashboard as a Nest module: its options, checked, and a controller mounted at their path. Routes go through
// Nest's own router, so the dashboard works wherever the application's controllers do: Express or Fastify, behind
// a global prefix, under the application's guards, interceptors and filters.
import {
  Controller,
  type DynamicModule,
  Inject,
  type MiddlewareConsumer,
  Module,
  type NestModule,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { DashboardController, WILDCARD_ROUTES, wildcard } from './controller.js';
import { repairJobAddresses, type RequestServer } from './hardening.js';
import {
  DASHBOARD_OPTIONS,
  type PeriodicDashboardOptions,
  type ResolvedDashboardOptions,
  resolveDashboardOptions,
} from './options.js';

/** Where Nest keeps a route's path (`@nestjs/common`'s `PATH_METADATA`, the same in Nest 11 and 12). */
const PATH_METADATA = 'path';

const DASHBOARD_CONTROLLER = Symbol('nestjs-periodic: the dashboard controller');

/**
 * A web page of every job, its history and audit trail, with "Trigger", "Pause" and "Resume" for operators, and
 * the JSON API it uses, under `path`. Import it beside `PeriodicModule`:
 *
 * ```ts
 * PeriodicDashboardModule.forRoot({ access: (req) => (req.user?.admin ? 'operate' : 'none') })
 * ```
 */
@Module({})
export class PeriodicDashboardModule implements NestModule {
  constructor(
    @Inject(DASHBOARD_CONTROLLER) private readonly controller: typeof DashboardController,
    @Inject(DASHBOARD_OPTIONS) private readonly options: ResolvedDashboardOptions,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  static forRoot(options: PeriodicDashboardOptions): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    const { path } = resolved;
    // A controller class of its own per import, mounted at its path, whose routes below a job's name are methods
    // of its own: their paths end in the platform's wildcard, known once the application has its adapter.
    class PeriodicDashboardController extends DashboardController {}
    for (const key of Object.keys(WILDCARD_ROUTES) as (keyof typeof WILDCARD_ROUTES)[]) {
      const inherited = DashboardController.prototype[key] as (...args: unknown[]) => unknown;
      const own = {
        [key](this: DashboardController, ...args: unknown[]) {
          return inherited.apply(this, args);
        },
      }[key];
      for (const metadata of Reflect.getMetadataKeys(inherited)) {
        Reflect.defineMetadata(metadata, Reflect.getMetadata(metadata, inherited), own);
      }
      Object.defineProperty(PeriodicDashboardController.prototype, key, {
        value: own,
        writable: true,
        configurable: true,
      });
    }
    Controller(path === '' ? '/' : path)(PeriodicDashboardController);
    return {
      module: PeriodicDashboardModule,
      controllers: [PeriodicDashboardController],
      providers: [
        { provide: DASHBOARD_OPTIONS, useValue: resolved },
        { provide: DASHBOARD_CONTROLLER, useValue: PeriodicDashboardController },
      ],
    };
  }

  /**
   * Runs before Nest registers the routes: the routes below a job's name get the platform's wildcard, and the
   * HTTP server the repair of names that are not valid percent-encoding.
   */
  configure(_consumer: MiddlewareConsumer): void {
    const adapter = this.adapterHost.httpAdapter;
    const ending = wildcard(adapter?.getType() ?? 'express');
    for (const [key, route] of Object.entries(WILDCARD_ROUTES)) {
      const method = (this.controller.prototype as unknown as Record<string, object>)[key];
      Reflect.defineMetadata(PATH_METADATA, `${route}${ending}`, method);
    }
    const server = adapter?.getHttpServer() as RequestServer | undefined;
    if (typeof server?.prependListener === 'function') repairJobAddresses(server, this.options.path);
  }
}
