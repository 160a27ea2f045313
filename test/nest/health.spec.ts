// The health indicator of nestjs-periodic/terminus (docs/health-and-telemetry.md), in a real HTTP
// application with TerminusModule, requested over HTTP.
import { afterEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Periodic, PeriodicConfigError, PeriodicModule, PeriodicRegistry } from 'nestjs-periodic';
import { PeriodicHealthIndicator } from 'nestjs-periodic/terminus';
import { cancel } from '../../lib/scheduler/deadline-timer.js';

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly periodic: PeriodicHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.periodic.isHealthy('periodic')]);
  }
}

/** Asks `check` while the application closes. */
@Injectable()
class Probe {
  check: () => void = () => undefined;

  onModuleDestroy(): void {
    this.check();
  }
}

@Injectable()
class Jobs {
  failing = true;

  @Periodic({ every: 60_000 })
  sync(): void {
    if (this.failing) throw new Error('password=hunter2 at db.internal');
  }

  @Periodic({ every: 60_000, mode: 'manual' })
  manual(): void {}
}

@Module({
  imports: [TerminusModule.forRoot({ logger: false }), PeriodicModule.forRoot({ logger: false })],
  controllers: [HealthController],
  providers: [PeriodicHealthIndicator, Jobs, Probe],
})
class AppModule {}

type Health = {
  status: number;
  body: {
    status: string;
    info?: object;
    error?: object;
    details: Record<string, { jobs: Record<string, Record<string, unknown>> }>;
  };
};

let app: INestApplication | undefined;

afterEach(async () => {
  await app?.close();
  app = undefined;
});

async function start(): Promise<{ registry: PeriodicRegistry; get: () => Promise<Health> }> {
  app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const url = `${await app.getUrl()}/health`;
  const get = async (): Promise<Health> => {
    const response = await fetch(url);
    return { status: response.status, body: (await response.json()) as Health['body'] };
  };
  return { registry: app.get(PeriodicRegistry), get };
}

/** Asks until `done` holds, for up to 4 s, within the test's 5 (a dead timer is noticed after two intervals). */
async function until(get: () => Promise<Health>, done: (health: Health) => boolean): Promise<Health> {
  const end = performance.now() + 4000;
  for (;;) {
    const health = await get();
    if (done(health) || performance.now() > end) return health;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('PeriodicHealthIndicator over HTTP', () => {
  it('up while healthy; down (503) after three failed runs in a row, with no error text; up again after a success', async () => {
    const { registry, get } = await start();
    const up = await get();
    expect(up.status).toBe(200);
    expect(up.body.details.periodic.jobs['Jobs.sync']).toEqual({
      status: 'up',
      state: 'ticking',
      lastSucceededAt: null,
      consecutiveFailures: 0,
      nextTickAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    for (let failed = 1; failed <= 3; failed++) {
      await registry.trigger('Jobs.sync');
      const health = await get();
      expect(health.status).toBe(failed < 3 ? 200 : 503);
    }
    const down = await get();
    expect(down.body.status).toBe('error');
    expect(down.body.details.periodic.jobs['Jobs.sync']).toMatchObject({
      status: 'down',
      reason: '3 runs in a row failed (the limit is 3)',
      consecutiveFailures: 3,
    });
    expect(JSON.stringify(down.body)).not.toMatch(/hunter2|db\.internal|Error/);
    app!.get(Jobs).failing = false;
    await registry.trigger('Jobs.sync');
    const again = await get();
    expect(again.status).toBe(200);
    expect(again.body.details.periodic.jobs['Jobs.sync']).toMatchObject({
      status: 'up',
      consecutiveFailures: 0,
      lastSucceededAt: expect.stringMatching(/^\d{4}-/),
    });
  });

  it('down when a job was stopped while the application runs', async () => {
    const { registry, get } = await start();
    app!.get(Jobs).failing = false;
    await registry.get('Jobs.sync').stop();
    const health = await get();
    expect(health.status).toBe(503);
    expect(health.body.details.periodic.jobs['Jobs.sync']).toMatchObject({
      status: 'down',
      reason: 'stopped while the application runs',
      state: 'stopped',
    });
  });

  it.each<[string, (registry: PeriodicRegistry) => void]>([
    [
      'its timer is dead',
      (registry) => {
        registry.add('late', () => undefined, { every: 50 });
        // What a dead timer looks like from outside: the job still reads ticking, but no tick comes.
        cancel(registry.get('late'));
      },
    ],
    [
      'a tick waits for a guard that never settles',
      (registry) =>
        registry.add('late', () => undefined, {
          every: 30,
          when: () => new Promise<boolean>(() => undefined),
        }),
    ],
  ])('down when no tick has come for more than two intervals: %s', async (_, make) => {
    const { registry, get } = await start();
    make(registry);
    const health = await until(get, (answer) => answer.status === 503);
    expect(health.status).toBe(503);
    expect(health.body.details.periodic.jobs.late).toMatchObject({
      status: 'down',
      reason:
        'no tick for more than two intervals: its timer is not running, or a tick is stuck (a guard that never settles)',
      state: 'ticking',
    });
  });

  it('paused and manual jobs are up', async () => {
    const { registry, get } = await start();
    registry.add('heartbeat', () => undefined, { every: 50 });
    registry.pause('heartbeat');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const health = await get();
    expect(health.status).toBe(200);
    expect(health.body.details.periodic.jobs).toMatchObject({
      heartbeat: { status: 'up', state: 'paused', nextTickAt: null },
      'Jobs.manual': { status: 'up', state: 'ticking', nextTickAt: null },
    });
  });

  it('paused and manual jobs are up whatever their runs did; every job is up while the application closes', async () => {
    const { registry, get } = await start();
    const fail = () => {
      throw new Error('x');
    };
    registry.add('paused', fail, { every: 60_000 });
    registry.add('manual', fail, { every: 60_000, mode: 'manual' });
    for (let run = 0; run < 3; run++) {
      await registry.trigger('paused');
      await registry.trigger('manual');
    }
    registry.pause('paused');
    await registry.get('manual').stop();
    expect((await get()).status).toBe(200);
    // Closing: a job stopped, or failing, is not down for it.
    registry.resume('paused');
    const indicator = app!.get(PeriodicHealthIndicator);
    let closing: unknown;
    app!.get(Probe).check = () => {
      closing = indicator.isHealthy('periodic');
    };
    await app!.close();
    app = undefined;
    expect(closing).toMatchObject({ periodic: { status: 'up' } });
  });

  it('the key must be a string: options given first are an error, not a check named [object Object]', async () => {
    await start();
    const indicator = app!.get(PeriodicHealthIndicator);
    for (const key of [{ maxConsecutiveFailures: 1 }, 42, '']) {
      expect(() => indicator.isHealthy(key as never)).toThrow(
        "PeriodicHealthIndicator.isHealthy(): the key must be a non-empty string, the name of the check in the result such as 'periodic'",
      );
    }
  });

  it('maxConsecutiveFailures sets the limit; an invalid one is a PeriodicConfigError', async () => {
    const { registry } = await start();
    await registry.trigger('Jobs.sync');
    const indicator = app!.get(PeriodicHealthIndicator);
    expect(indicator.isHealthy('jobs', { maxConsecutiveFailures: 1 })).toMatchObject({
      jobs: { status: 'down' },
    });
    expect(indicator.isHealthy('jobs', { maxConsecutiveFailures: 2 })).toMatchObject({
      jobs: { status: 'up' },
    });
    for (const limit of [0, 1.5, '3']) {
      expect(() => indicator.isHealthy('jobs', { maxConsecutiveFailures: limit as number })).toThrow(
        new PeriodicConfigError(
          `PeriodicHealthIndicator.isHealthy(): "maxConsecutiveFailures" must be an integer ≥ 1, got ${JSON.stringify(limit)}`,
        ),
      );
    }
    expect(() => indicator.isHealthy('jobs', { maxConsecutiveFailure: 1 } as never)).toThrow(
      'unknown option "maxConsecutiveFailure"; did you mean "maxConsecutiveFailures"?',
    );
  });
});
