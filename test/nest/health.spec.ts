// The health indicator of nestjs-periodic/terminus (docs/health-and-telemetry.md), in a real HTTP
// application with TerminusModule, requested over HTTP.
import { afterEach, describe, expect, it } from '@jest/globals';
import { Controller, Get, type INestApplication, Injectable, Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test, type TestingModule } from '@nestjs/testing';
import {
  InMemoryCoordinator,
  Periodic,
  PeriodicConfigError,
  PeriodicModule,
  PeriodicRegistry,
} from 'nestjs-periodic';
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
    // The incident the failures opened (docs/alerts.md), without its detail, which holds the error's message.
    expect(down.body.details.periodic.jobs['Jobs.sync'].incidents).toEqual([
      { kind: 'failing', since: expect.stringMatching(/^\d{4}-/) },
    ]);
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
    expect(again.body.details.periodic.jobs['Jobs.sync']).not.toHaveProperty('incidents');
  });

  it('counts slots with retries: down after three slots failed their last attempt, and says so', async () => {
    const { registry, get } = await start();
    const failing = registry.add(
      'Jobs.retried',
      () => {
        throw new Error('still down');
      },
      { every: 60_000, retry: { attempts: 1, backoff: { initial: 1 } } },
    );
    for (let slot = 1; slot <= 3; slot++) {
      await registry.trigger('Jobs.retried');
      // The retry comes a millisecond after the first attempt's end.
      while (failing.status().consecutiveFailures < slot)
        await new Promise((resolve) => setTimeout(resolve, 5));
    }
    expect(failing.status().counts.error).toBe(6);
    const down = await get();
    expect(down.body.details.periodic.jobs['Jobs.retried']).toMatchObject({
      status: 'down',
      reason: '3 slots in a row failed their last attempt (the limit is 3)',
      consecutiveFailures: 3,
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
    for (const limit of [0, 1.5, '3', 1_000_001]) {
      expect(() => indicator.isHealthy('jobs', { maxConsecutiveFailures: limit as number })).toThrow(
        new PeriodicConfigError(
          `PeriodicHealthIndicator.isHealthy(): "maxConsecutiveFailures" must be an integer from 1 to 1,000,000, got ${JSON.stringify(limit)}`,
        ),
      );
    }
    expect(() => indicator.isHealthy('jobs', { maxConsecutiveFailure: 1 } as never)).toThrow(
      'unknown option "maxConsecutiveFailure"; did you mean "maxConsecutiveFailures"?',
    );
  });
});

describe("an exclusive job's health is the fleet's", () => {
  const LEASE_MS = 600;

  /** A store that can be down (`beats`: heartbeats and reads fail), or fail only the claims of slots. */
  class Store extends InMemoryCoordinator {
    beats = true;
    claims = true;

    constructor() {
      super({ leaseMs: LEASE_MS });
    }

    override async heartbeat(...args: Parameters<InMemoryCoordinator['heartbeat']>) {
      if (!this.beats) throw new Error('connect ECONNREFUSED');
      return super.heartbeat(...args);
    }

    override async readFleet(...args: Parameters<InMemoryCoordinator['readFleet']>) {
      if (!this.beats) throw new Error('connect ECONNREFUSED');
      return super.readFleet(...args);
    }

    override async writeSchedules(...args: Parameters<InMemoryCoordinator['writeSchedules']>) {
      if (!this.claims) throw new Error('connect ECONNREFUSED');
      return super.writeSchedules(...args);
    }
  }

  @Injectable()
  class Report {
    @Periodic({ every: 100, exclusive: true, name: 'report' })
    send(): void {}
  }

  const apps: TestingModule[] = [];
  afterEach(async () => {
    for (const replica of apps.splice(0)) await replica.close();
  });

  /** Two replicas on `store`; each one's health of the job, asked until `done` holds (for at most 4 s). */
  async function replicas(store: Store) {
    for (const replica of ['a', 'b']) {
      const moduleRef = await Test.createTestingModule({
        imports: [
          TerminusModule.forRoot({ logger: false }),
          PeriodicModule.forRoot({ coordinator: store, replica, logger: false }),
        ],
        providers: [PeriodicHealthIndicator, Report],
      }).compile();
      await moduleRef.init();
      apps.push(moduleRef);
    }
    const health = (moduleRef: TestingModule) =>
      (moduleRef.get(PeriodicHealthIndicator).isHealthy() as { periodic: { jobs: Record<string, unknown> } })
        .periodic.jobs.report as { status: string; reason?: string };
    return async (done: (status: string, reason?: string) => boolean) => {
      const end = performance.now() + 4000;
      for (;;) {
        const seen = apps.map(health);
        if (seen.every(({ status, reason }) => done(status, reason)) || performance.now() > end) return seen;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
  }

  it('down on every replica once it has not reached the store for leaseMs; up again when it answers', async () => {
    const store = new Store();
    const ask = await replicas(store);
    expect(await ask((status) => status === 'up')).toMatchObject([{ status: 'up' }, { status: 'up' }]);
    store.beats = false;
    // The fleet stops handling slots at once (no replica holds the lease); the store is silent after leaseMs.
    const down = await ask(
      (status, reason) => status === 'down' && /has not reached the coordinator's store/.test(reason!),
    );
    expect(down).toMatchObject(
      [0, 1].map(() => ({
        status: 'down',
        reason: expect.stringMatching(
          /^this replica has not reached the coordinator's store for \d+ms \(more than leaseMs\)$/,
        ),
        state: 'ticking',
      })),
    );
    store.beats = true;
    expect(await ask((status) => status === 'up')).toMatchObject([{ status: 'up' }, { status: 'up' }]);
  });

  it('down on every replica when the fleet has not handled a due slot for two intervals, though the store answers', async () => {
    const store = new Store();
    const ask = await replicas(store);
    expect(await ask((status) => status === 'up')).toMatchObject([{ status: 'up' }, { status: 'up' }]);
    // Heartbeats go on, every claim of a slot fails: no replica runs the job.
    store.claims = false;
    const down = await ask((status) => status === 'down');
    expect(down).toMatchObject(
      [0, 1].map(() => ({
        status: 'down',
        reason: expect.stringMatching(
          /^the fleet has not handled the slot due at \d{4}-.*Z for more than two intervals$/,
        ),
      })),
    );
    store.claims = true;
    expect(await ask((status) => status === 'up')).toMatchObject([{ status: 'up' }, { status: 'up' }]);
  });
});
