// An application with a dashboard, on Express or Fastify, listening on a free port: the jobs of every kind a
// dashboard shows (every, shifted, cron, exclusive, failing), and access decided by headers the tests send.
import 'reflect-metadata';
import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  InMemoryCoordinator,
  Periodic,
  type PeriodicContext,
  type PeriodicCoordinator,
  PeriodicHandler,
  PeriodicModule,
  PeriodicRegistry,
} from 'nestjs-periodic';
import { PeriodicDashboardModule, type PeriodicDashboardOptions } from 'nestjs-periodic/dashboard';

const berlinHour = Number(
  new Intl.DateTimeFormat('en-GB', { hour: 'numeric', hourCycle: 'h23', timeZone: 'Europe/Berlin' }).format(
    new Date(),
  ),
);
/** A daily job twelve hours away from now, so that it never fires on its own while the tests run. */
export const NIGHTLY_CRON = `0 ${(berlinHour + 12) % 24} * * *`;

@Injectable()
class Jobs {
  private imports = 0;

  @Periodic({ cron: NIGHTLY_CRON, timezone: 'Europe/Berlin', name: 'Reports.nightly' })
  nightly(): void {}

  @Periodic({ every: 300, name: 'Feeds.import' })
  async import(): Promise<void> {
    await new Promise((resolve) => setTimeout(resolve, 20 + ((this.imports * 37) % 60)));
    if (++this.imports % 4 === 0) throw new Error('the feed answered 503');
  }

  @Periodic({ every: 1000, name: 'Cleanup.purge', exclusive: true })
  purge(): void {}

  @Periodic({ every: 2000, delayMode: 'shifted', name: 'Search.reindex', mode: 'manual' })
  reindex(): void {}

  /** What each tenant's stored schedule (registry.schedules) runs; the tests add the schedules they need. */
  readonly reported: string[] = [];
  @PeriodicHandler('tenant-report')
  report(ctx: PeriodicContext<{ tenantId: string }>): void {
    this.reported.push(ctx.data.tenantId);
  }
}

export interface DashboardApp {
  app: INestApplication;
  registry: PeriodicRegistry;
  /** The dashboard's address, prefix included. */
  url: string;
  close(): Promise<void>;
}

/** Access as the headers `x-role` (default 'operate') and `x-user` say, as a proxy in front might set them. */
export const headerAccess: Pick<PeriodicDashboardOptions, 'access' | 'actor'> = {
  access: (request: { headers: Record<string, string | undefined> }) =>
    (request.headers['x-role'] ?? 'operate') as 'operate' | 'read' | 'none',
  actor: (request: { headers: Record<string, string | undefined> }) => request.headers['x-user'] ?? null,
};

export async function dashboardApp(
  options: {
    platform?: 'express' | 'fastify';
    prefix?: string;
    path?: string;
    history?: false;
    /** Whether the application trusts its proxy's X-Forwarded-* headers. */
    trustProxy?: boolean;
    /** @default an InMemoryCoordinator */
    coordinator?: PeriodicCoordinator;
  } = {},
): Promise<DashboardApp> {
  @Module({
    imports: [
      PeriodicModule.forRoot({
        logger: false,
        coordinator: options.coordinator ?? new InMemoryCoordinator(),
        replica: 'web-1',
        ...(options.history === undefined ? {} : { history: options.history }),
      }),
      PeriodicDashboardModule.forRoot({
        ...headerAccess,
        ...(options.path === undefined ? {} : { path: options.path }),
      }),
    ],
    providers: [Jobs],
  })
  class AppModule {}
  const app =
    options.platform === 'fastify'
      ? await NestFactory.create(AppModule, new FastifyAdapter({ trustProxy: options.trustProxy ?? false }), {
          logger: false,
        })
      : await NestFactory.create(AppModule, { logger: false });
  if (options.platform !== 'fastify' && options.trustProxy === true) {
    (app.getHttpAdapter().getInstance() as { set(key: string, value: unknown): void }).set(
      'trust proxy',
      true,
    );
  }
  if (options.prefix !== undefined) app.setGlobalPrefix(options.prefix);
  await app.listen(0, '127.0.0.1');
  const base = (await app.getUrl()).replace('[::1]', '127.0.0.1');
  const prefix = options.prefix === undefined ? '' : `/${options.prefix}`;
  return {
    app,
    registry: app.get(PeriodicRegistry),
    url: `${base}${prefix}${options.path ?? '/periodic'}`,
    close: () => app.close(),
  };
}
