// Operating jobs in an application (docs/operations.md): the registry's status, trigger, pause and
// resume; options from configuration (the module's `jobs`); the HTTP recipe of docs/operations.md.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it, jest } from '@jest/globals';
import {
  ConflictException,
  type ExecutionContext,
  Injectable,
  Module,
  NotFoundException,
} from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ConfigModule, ConfigService } from '@nestjs/config';
import {
  InMemoryCoordinator,
  Periodic,
  PeriodicConfigError,
  type PeriodicContext,
  PeriodicModule,
  PeriodicNotFoundError,
  type PeriodicOptions,
  PeriodicRegistry,
} from '../../lib/index.js';
import { deferred, honouringRun } from '../scheduler/helpers.js';
import { JobsController, OperationsGuard } from './fixtures/jobs.controller.js';
import { useApps } from './helpers.js';

@Injectable()
class Cleanup {
  runs: PeriodicContext[] = [];
  open = true;

  @Periodic({ every: 60_000 })
  purge(context: PeriodicContext): void {
    this.runs.push(context);
  }

  @Periodic({ cron: '0 3 * * *', timezone: 'Europe/Berlin', name: 'nightly' })
  nightly(): void {}
}

describe('PeriodicRegistry: status, trigger, pause, resume', () => {
  const createApp = useApps();

  it('statusAll() lists every job in order; trigger() runs one now in auto mode; pause and resume', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Cleanup] });
    const { registry } = app;
    expect(registry.statusAll().map(({ name, state, schedule }) => ({ name, state, schedule }))).toEqual([
      { name: 'Cleanup.purge', state: 'ticking', schedule: { every: 60_000 } },
      { name: 'nightly', state: 'ticking', schedule: { cron: '0 3 * * *', timezone: 'Europe/Berlin' } },
    ]);
    const nextTickAt = registry.status('Cleanup.purge').nextTickAt!.getTime();
    expect(nextTickAt - Date.now()).toBeGreaterThan(50_000);
    expect(await registry.trigger('Cleanup.purge')).toEqual({ ok: true, jobId: 1 });
    expect(app.moduleRef.get(Cleanup).runs).toHaveLength(1);
    expect(registry.status('Cleanup.purge')).toMatchObject({
      counts: { started: 1, normal: 1 },
      lastFinished: { reason: 'normal' },
      nextTickAt: new Date(nextTickAt),
    });
    registry.pause('Cleanup.purge');
    expect(registry.status('Cleanup.purge').state).toBe('paused');
    expect(await registry.trigger('Cleanup.purge')).toEqual({ ok: false, error: 'paused' });
    registry.resume('Cleanup.purge');
    expect(await registry.trigger('Cleanup.purge')).toEqual({ ok: true, jobId: 2 });
  });

  it.each(['status', 'trigger', 'pause', 'resume'] as const)(
    '%s() of an unknown name: a PeriodicNotFoundError with the nearest name',
    async (method) => {
      const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Cleanup] });
      const call = async () => app.registry[method]('Cleanup.prge');
      await expect(call()).rejects.toThrow(PeriodicNotFoundError);
      await expect(call()).rejects.toThrow(
        `PeriodicRegistry.${method}("Cleanup.prge"): no job has this name; did you mean "Cleanup.purge"?`,
      );
    },
  );

  it('adding a job again while remove() still drains it: an error that says to await the removal', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot()] });
    app.registry.add('re', honouringRun, { every: 60_000 });
    await app.registry.trigger('re');
    const removed = app.registry.remove('re');
    expect(() => app.registry.add('re', () => undefined, { every: 60_000 })).toThrow(
      'PeriodicRegistry.add("re"): the job "re" is still being removed (its runs are draining); await ' +
        'registry.remove("re") before adding a job of this name again',
    );
    await removed;
    expect(app.registry.add('re', () => undefined, { every: 60_000 }).name).toBe('re');
  });

  it('a job stopped with remove() reads stopped, until it is forgotten', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot()] });
    const run = deferred();
    app.registry.add('once', () => run.promise, { every: 1000, jobShutdown: 'brutalKill' });
    await app.registry.trigger('once');
    const scheduler = app.registry.get('once');
    await app.registry.remove('once');
    expect(scheduler.status()).toMatchObject({ state: 'stopped', lastFinished: { reason: 'killed' } });
    expect(app.registry.statusAll()).toEqual([]);
  });
});

describe('options from configuration: the module\'s "jobs"', () => {
  const createApp = useApps();

  /** The resolved options of `Cleanup.purge` (or `name`) with `overrides`. */
  async function optionsWith(overrides: object, name = 'Cleanup.purge', coordinator?: InMemoryCoordinator) {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', coordinator, jobs: { [name]: overrides } })],
      providers: [Cleanup],
    });
    return app.registry.get(name).options;
  }

  it.each<[string, Partial<PeriodicOptions>, object]>([
    ['every', { every: 30_000 }, { every: 30_000, initialDelay: 30_000 }],
    ['initialDelay', { initialDelay: 0 }, { every: 60_000, initialDelay: 0 }],
    ['delayMode', { delayMode: 'shifted' }, { delayMode: 'shifted' }],
    ['onOverlap', { onOverlap: 'ignore' }, { onOverlap: 'ignore' }],
    ['timeout', { timeout: 5000 }, { timeout: 5000 }],
    ['jobShutdown', { jobShutdown: 'brutalKill' }, { jobShutdown: 'brutalKill' }],
    ['jitter', { jitter: 1000 }, { jitter: 1000 }],
    ['mode', { mode: 'auto' }, { mode: 'auto' }],
    [
      'cron: replaces every, initialDelay and delayMode',
      { cron: '*/5 * * * *', timezone: 'UTC' },
      { every: 0, cron: '*/5 * * * *', timezone: 'UTC', delayMode: 'regular' },
    ],
  ])('%s', async (_, overrides, expected) => {
    expect(await optionsWith(overrides)).toMatchObject(expected);
  });

  it('every on a cron job: replaces its cron and timezone', async () => {
    const options = await optionsWith({ every: 5000 }, 'nightly');
    expect(options).toMatchObject({ every: 5000 });
    // Options not given are left out of the resolved ones.
    expect(options.cron).toBeUndefined();
    expect(options.timezone).toBeUndefined();
  });

  it('exclusive, with the module coordinator', async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    expect(await optionsWith({ exclusive: true }, 'Cleanup.purge', coordinator)).toMatchObject({
      exclusive: true,
    });
  });

  it("when: given the provider instance, as the decorator's guard is", async () => {
    const when = jest.fn((cleanup: Cleanup) => cleanup.open);
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', jobs: { 'Cleanup.purge': { when } } })],
      providers: [Cleanup],
    });
    const cleanup = app.moduleRef.get(Cleanup);
    cleanup.open = false;
    expect(await app.registry.tick('Cleanup.purge')).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(when).toHaveBeenCalledWith(cleanup);
    cleanup.open = true;
    expect(await app.registry.tick('Cleanup.purge')).toEqual({ ok: true, jobId: 1 });
  });

  it("mode: 'manual' switches a job off: no timer; it runs only when triggered", async () => {
    jest.useFakeTimers();
    try {
      const app = await createApp({
        imports: [PeriodicModule.forRoot({ jobs: { 'Cleanup.purge': { every: 10, mode: 'manual' } } })],
        providers: [Cleanup],
      });
      jest.advanceTimersByTime(1000);
      expect(app.moduleRef.get(Cleanup).runs).toHaveLength(0);
      expect(app.registry.status('Cleanup.purge')).toMatchObject({ mode: 'manual', nextTickAt: null });
      expect(await app.registry.trigger('Cleanup.purge')).toEqual({ ok: true, jobId: 1 });
      await app.close();
    } finally {
      jest.useRealTimers();
    }
  });

  it('a name that matches no job fails the bootstrap, with the nearest name and the list', async () => {
    const app = createApp({
      imports: [PeriodicModule.forRoot({ jobs: { 'Cleanup.purg': { every: 1000 } } })],
      providers: [Cleanup],
    });
    await expect(app).rejects.toThrow(PeriodicConfigError);
    await expect(app).rejects.toThrow(
      'PeriodicModule: "jobs" has options for "Cleanup.purg", but no @Periodic() method has this name; did you ' +
        'mean "Cleanup.purge"? The decorated jobs are: "Cleanup.purge", "nightly".',
    );
  });

  it('a name parsed from JSON as "__proto__" is a name like any other: no job has it', async () => {
    const jobs = JSON.parse('{ "__proto__": { "every": 5 } }') as Record<string, object>;
    const app = createApp({ imports: [PeriodicModule.forRoot({ jobs })], providers: [Cleanup] });
    await expect(app).rejects.toThrow(
      'PeriodicModule: "jobs" has options for "__proto__", but no @Periodic() method has this name.',
    );
  });

  it("an override does not hide a mistake in the decorator's own options", async () => {
    @Injectable()
    class Broken {
      @Periodic({ every: -5 })
      run(): void {}
    }
    const app = createApp({
      imports: [PeriodicModule.forRoot({ jobs: { 'Broken.run': { every: 1000 } } })],
      providers: [Broken],
    });
    await expect(app).rejects.toThrow(
      '@Periodic() on Broken.run: "every" must be an integer number of milliseconds ≥ 1, got -5',
    );
  });

  it('an override that conflicts with the decorator names both', async () => {
    const app = createApp({
      imports: [PeriodicModule.forRoot({ jobs: { 'Cleanup.purge': { timezone: 'UTC' } } })],
      providers: [Cleanup],
    });
    await expect(app).rejects.toThrow(
      '@Periodic() on Cleanup.purge with jobs["Cleanup.purge"] of PeriodicModule: "timezone" applies to cron ' +
        'and "at" jobs only, got "UTC" with "every"',
    );
  });

  it('from ConfigService through forRootAsync, switched off per environment (the recipe of docs/operations.md)', async () => {
    const env = { PURGE_EVERY_MS: '30000', PURGE_ENABLED: 'false' };
    const app = await createApp({
      imports: [
        ConfigModule.forRoot({ ignoreEnvFile: true, load: [() => env] }),
        PeriodicModule.forRootAsync({
          imports: [ConfigModule],
          inject: [ConfigService],
          useFactory: (config: ConfigService) => ({
            jobs: {
              'Cleanup.purge': {
                every: Number(config.get('PURGE_EVERY_MS', 60_000)),
                // PURGE_ENABLED=false: no timer in this environment; the job still runs when triggered.
                mode: config.get('PURGE_ENABLED') === 'false' ? 'manual' : 'auto',
              },
            },
          }),
        }),
      ],
      providers: [Cleanup],
    });
    expect(app.registry.get('Cleanup.purge').options).toMatchObject({ every: 30_000, mode: 'manual' });
  });
});

describe('the HTTP recipe of docs/operations.md', () => {
  const createApp = useApps();
  const request = (headers: Record<string, unknown>) =>
    ({ switchToHttp: () => ({ getRequest: () => ({ headers }) }) }) as unknown as ExecutionContext;

  it('is the code of the guide', () => {
    const guide = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'operations.md'), 'utf8');
    const recipe = readFileSync(join(import.meta.dirname, 'fixtures', 'jobs.controller.ts'), 'utf8');
    expect(guide).toContain('```ts\n' + recipe + '```');
  });

  it('shows every status, with error messages; triggers, pauses and resumes jobs by name', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ logger: false })],
      controllers: [JobsController],
    });
    app.registry.add('failing', () => Promise.reject(new Error('disk full')), { every: 60_000 });
    app.registry.add('slow', honouringRun, { every: 60_000, onOverlap: 'ignore' });
    // A value thrown that JSON cannot show: a BigInt, in an object without a prototype.
    const odd = Object.assign(Object.create(null) as object, { code: 42n });
    app.registry.add('odd', () => Promise.reject(odd), { every: 60_000 });
    app.registry.add('fine', () => undefined, { every: 60_000 });
    const controller = app.moduleRef.get(JobsController);
    for (const name of ['failing', 'odd', 'fine']) {
      const finished = app.events.once('finished', (event) => event.name === name);
      await expect(controller.trigger(name, {})).resolves.toEqual({ ok: true, jobId: 1 });
      await finished;
    }
    await controller.pause('slow', { by: 'alice', note: 'too slow' });
    await expect(controller.trigger('slow', {})).rejects.toThrow(ConflictException);
    await controller.resume('slow', {});
    await expect(controller.trigger('slow', { by: 'bob' })).resolves.toEqual({ ok: true, jobId: 1 });
    const shown = JSON.parse(JSON.stringify(controller.status())) as Record<string, unknown>[];
    expect(shown).toEqual([
      expect.objectContaining({
        name: 'failing',
        lastFinished: expect.objectContaining({ error: 'disk full' }),
      }),
      expect.objectContaining({ name: 'slow', running: 1, lastFinished: null }),
      expect.objectContaining({
        name: 'odd',
        lastFinished: expect.objectContaining({ error: '[Object: null prototype] { code: 42n }' }),
      }),
      expect.objectContaining({ name: 'fine', lastFinished: expect.objectContaining({ reason: 'normal' }) }),
    ]);
    expect(shown[3].lastFinished).not.toHaveProperty('error');
    await expect(controller.pause('nothing', {})).rejects.toThrow(NotFoundException);
    expect((await app.registry.audit('slow')).map(({ action, by, note }) => [action, by, note])).toEqual([
      ['trigger', 'bob', null],
      ['resume', null, null],
      ['pause', 'alice', 'too slow'],
    ]);
  });

  it('over HTTP: 200 for a run, 409 for a trigger that started none, 204 for pause and resume, 404 with the nearest name', async () => {
    @Module({
      imports: [PeriodicModule.forRoot({ logger: false })],
      controllers: [JobsController],
    })
    class OperationsModule {}
    const saved = process.env.OPERATIONS_TOKEN;
    process.env.OPERATIONS_TOKEN = 's3cret';
    const http = await NestFactory.create(OperationsModule, { logger: false });
    try {
      await http.listen(0, '127.0.0.1');
      const registry = http.get(PeriodicRegistry);
      registry.add('Cleanup.purge', () => undefined, { every: 60_000, delayMode: 'shifted' });
      registry.add('Reports.send', () => undefined, { cron: '0 3 * * *', timezone: 'UTC' });
      const base = await http.getUrl();
      const call = (method: string, path: string) =>
        fetch(`${base}/jobs${path}`, { method, headers: { 'x-operations-token': 's3cret' } });

      const triggered = await call('POST', '/Cleanup.purge/trigger');
      expect([triggered.status, await triggered.json()]).toEqual([200, { ok: true, jobId: 1 }]);
      expect((await call('POST', '/Cleanup.purge/pause')).status).toBe(204);
      const refused = await call('POST', '/Cleanup.purge/trigger');
      expect([refused.status, await refused.json()]).toEqual([409, { ok: false, error: 'paused' }]);
      expect((await call('POST', '/Cleanup.purge/resume')).status).toBe(204);
      const unknown = await call('POST', '/Cleanup.purg/trigger');
      expect(unknown.status).toBe(404);
      expect(((await unknown.json()) as { message: string }).message).toContain(
        'did you mean "Cleanup.purge"?',
      );

      const jobs = (await (await call('GET', '')).json()) as Record<string, unknown>[];
      expect(jobs).toEqual([
        expect.objectContaining({
          name: 'Cleanup.purge',
          schedule: { every: 60_000, delayMode: 'shifted' },
          exclusive: false,
          lastFinished: expect.objectContaining({ reason: 'normal' }),
        }),
        expect.objectContaining({
          name: 'Reports.send',
          schedule: { cron: '0 3 * * *', timezone: 'UTC' },
          exclusive: false,
        }),
      ]);
      const history = (await (await call('GET', '/Cleanup.purge/history')).json()) as Record<
        string,
        unknown
      >[];
      expect(history).toEqual([
        expect.objectContaining({ jobId: 1, origin: 'trigger', reason: 'normal', slot: null }),
      ]);
      const later = await call(
        'GET',
        `/Cleanup.purge/history?before=${encodeURIComponent(history[0].startedAt as string)}`,
      );
      expect(await later.json()).toEqual([]);
      const fleet = (await (await call('GET', '/fleet')).json()) as Record<string, unknown>[];
      expect(fleet).toEqual([
        expect.objectContaining({
          name: 'Cleanup.purge',
          holder: null,
          lastRun: expect.objectContaining({ jobId: 1 }),
        }),
        expect.objectContaining({
          name: 'Reports.send',
          lastRun: null,
          store: expect.objectContaining({ reachable: true }),
        }),
      ]);
      expect((await fetch(`${base}/jobs`)).status).toBe(403);
    } finally {
      await http.close();
      if (saved === undefined) delete process.env.OPERATIONS_TOKEN;
      else process.env.OPERATIONS_TOKEN = saved;
    }
  });

  it('lets a request through with the token only, and none while no token is set', () => {
    const guard = new OperationsGuard();
    const saved = process.env.OPERATIONS_TOKEN;
    try {
      delete process.env.OPERATIONS_TOKEN;
      expect(guard.canActivate(request({}))).toBe(false);
      process.env.OPERATIONS_TOKEN = 's3cret';
      expect(guard.canActivate(request({}))).toBe(false);
      expect(guard.canActivate(request({ 'x-operations-token': 'guess' }))).toBe(false);
      expect(guard.canActivate(request({ 'x-operations-token': 's3cret' }))).toBe(true);
    } finally {
      if (saved === undefined) delete process.env.OPERATIONS_TOKEN;
      else process.env.OPERATIONS_TOKEN = saved;
    }
  });
});

describe('the fleet in the module: replica names, pause and audit of exclusive jobs', () => {
  const createApp = useApps();

  it("an exclusive job's pause goes to the store, named after forRoot({ replica }); logged, and emitted as operated", async () => {
    const coordinator = new InMemoryCoordinator();
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ coordinator, replica: 'pod-7' })],
    });
    app.registry.add('report', () => undefined, { every: 60_000, exclusive: true });
    await app.registry.pause('report', { by: 'alice', note: 'the billing API is down' });
    expect(await coordinator.readPause('report')).toMatchObject({
      action: 'pause',
      by: 'alice',
      replica: 'pod-7',
    });
    expect(app.registry.status('report').state).toBe('paused');
    await app.registry.resume('report');
    expect(await coordinator.readPause('report')).toBeNull();
    expect((await app.registry.audit('report')).map(({ action, replica }) => [action, replica])).toEqual([
      ['resume', 'pod-7'],
      ['pause', 'pod-7'],
    ]);
    expect(app.seen.filter((event) => event.type === 'operated')).toHaveLength(2);
    expect(app.logs.periodic()).toEqual(
      expect.arrayContaining([
        'log: report paused by alice on pod-7: the billing API is down',
        'log: report resumed on pod-7',
      ]),
    );
  });

  it('replica must be a non-empty string', async () => {
    expect(() => PeriodicModule.forRoot({ replica: ' ' })).toThrow(PeriodicConfigError);
    expect(() => PeriodicModule.forRoot({ replica: 7 as never })).toThrow(/"replica".*7/);
  });

  it('a coordinator without operate(), readPause() and readAudit() keeps pauses local, and the module says so once', async () => {
    const store = new InMemoryCoordinator();
    const { heartbeat, writeSchedules, releaseAll } = store;
    const coordinator = {
      leaseMs: store.leaseMs,
      acquire: store.acquire.bind(store),
      renew: store.renew.bind(store),
      release: store.release.bind(store),
      readSchedule: store.readSchedule.bind(store),
      writeSchedule: store.writeSchedule.bind(store),
      heartbeat: heartbeat.bind(store),
      writeSchedules: writeSchedules.bind(store),
      releaseAll: releaseAll.bind(store),
    };
    const app = await createApp({ imports: [PeriodicModule.forRoot({ coordinator })] });
    app.registry.add('a', () => undefined, { every: 60_000, exclusive: true });
    app.registry.add('b', () => undefined, { every: 60_000, exclusive: true });
    await app.registry.pause('a', { by: 'alice' });
    expect(app.registry.status('a').state).toBe('paused');
    expect(await store.readPause('a')).toBeNull();
    expect(await app.registry.audit('a')).toMatchObject([{ action: 'pause', by: 'alice' }]);
    const said = app.logs.periodic().filter((line) => line.includes('no operate()'));
    expect(said).toHaveLength(1);
  });
});
