// The dashboard as a Nest module: its options, checked, and a controller mounted at their path. Routes go through
// Nest's own router, so the dashboard works wherever the application's controllers do: Express or Fastify, behind
// a global prefix, under the application's guards, interceptors and filters.
import { Controller, type DynamicModule, Module } from '@nestjs/common';
import { DashboardController } from './controller.js';
import { DASHBOARD_OPTIONS, type PeriodicDashboardOptions, resolveDashboardOptions } from './options.js';

/**
 * A web page of every job, its history and audit trail, with "Trigger", "Pause" and "Resume" for operators, and
 * the JSON API it uses, under `path`. Import it beside `PeriodicModule`:
 *
 * ```ts
 * PeriodicDashboardModule.forRoot({ access: (req) => (req.user?.admin ? 'operate' : 'none') })
 * ```
 */
@Module({})
export class PeriodicDashboardModule {
  static forRoot(options: PeriodicDashboardOptions): DynamicModule {
    const resolved = resolveDashboardOptions(options);
    const { path } = resolved;
    // A controller class of its own per import, mounted at its path.
    class PeriodicDashboardController extends DashboardController {}
    Controller(path === '' ? '/' : path)(PeriodicDashboardController);
    return {
      module: PeriodicDashboardModule,
      controllers: [PeriodicDashboardController],
      providers: [{ provide: DASHBOARD_OPTIONS, useValue: resolved }],
    };
  }
}
