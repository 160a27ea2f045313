import { describe, expect, it } from '@jest/globals';
import { Global, Injectable, Module } from '@nestjs/common';
import {
  Periodic,
  type PeriodicContext,
  PeriodicModule,
  PeriodicNotFoundError,
  PeriodicRegistry,
  PeriodicScheduler,
  PeriodicTimeoutError,
  RedisCoordinator,
} from '../../lib/index.js';
import { honouringRun, stuckRun } from '../scheduler/helpers.js';
import { useApps } from './helpers.js';

@Injectable()
class Jobs {
  runs = 0;

  @Periodic({ every: 1000 })
  cleanup(): void {
    this.runs++;
  }

  @Periodic({ every: 1000, name: 'reports' })
  report(): void {}
}

describe('PeriodicRegistry: get, has, getAll', () => {
  const createApp = useApps();

  it('finds jobs by name', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Jobs] });
    expect(app.registry.has('Jobs.cleanup')).toBe(true);
    expect(app.registry.has('nothing')).toBe(false);
    expect(app.registry.get('reports')).toBeInstanceOf(PeriodicScheduler);
    expect(app.registry.get('reports').name).toBe('reports');
    expect(app.registry.getAll().map((job) => job.name)).toEqual(['Jobs.cleanup', 'reports']);
  });

  it('get() of an unknown name throws a PeriodicNotFoundError that lists the names and suggests one', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Jobs] });
    expect(() => app.registry.get('report')).toThrow(PeriodicNotFoundError);
    expect(() => app.registry.get('report')).toThrow(
      'PeriodicRegistry.get("report"): no job has this name; did you mean "reports"? ' +
        'The jobs are: "Jobs.cleanup", "reports".',
    );
  });

  it('with no name near the one asked for, the message lists the names after a full stop', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Jobs] });
    expect(() => app.registry.get('zzz')).toThrow(
      'PeriodicRegistry.get("zzz"): no job has this name. The jobs are: "Jobs.cleanup", "reports".',
    );
  });

  it('before the application initialises, get() says that jobs are discovered by init()', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Jobs] }, { init: false });
    expect(() => app.registry.get('reports')).toThrow(
      'PeriodicRegistry.get("reports"): no job is registered yet: jobs are discovered when the application initialises (init())',
    );
  });
});

describe('PeriodicRegistry: tick and syncTick', () => {
  const createApp = useApps();

  it('tick() starts a run and resolves with its jobId; syncTick() resolves when it has ended', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Jobs] });
    expect(await app.registry.tick('Jobs.cleanup')).toEqual({ ok: true, jobId: 1 });
    expect(await app.registry.syncTick('Jobs.cleanup')).toEqual({
      ok: true,
      reason: 'normal',
      durationMs: expect.any(Number),
    });
    expect(app.moduleRef.get(Jobs).runs).toBe(2);
  });

  it('in auto mode both answer notInManualMode and start nothing', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Jobs] });
    expect(await app.registry.tick('Jobs.cleanup')).toEqual({ ok: false, error: 'notInManualMode' });
    expect(await app.registry.syncTick('Jobs.cleanup')).toEqual({ ok: false, error: 'notInManualMode' });
    expect(app.moduleRef.get(Jobs).runs).toBe(0);
  });

  it('syncTick() gives up with a PeriodicTimeoutError after its timeout; the run goes on', async () => {
    @Injectable()
    class Stuck {
      @Periodic({ every: 1000, jobShutdown: 'brutalKill' })
      hang(): Promise<void> {
        return stuckRun();
      }
    }
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })],
      providers: [Stuck],
    });
    await expect(app.registry.syncTick('Stuck.hang', { timeout: 20 })).rejects.toThrow(PeriodicTimeoutError);
    expect(app.registry.get('Stuck.hang').running).toBe(1);
  });
});

describe('PeriodicRegistry: add and remove', () => {
  const createApp = useApps();

  it('add() after bootstrap starts the job at once, in the module mode, with a guard that takes no argument', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })] });
    const contexts: PeriodicContext[] = [];
    const guardArguments: unknown[][] = [];
    const job = app.registry.add('import', (context) => contexts.push(context), {
      every: 5000,
      when: (...args: unknown[]) => {
        guardArguments.push(args);
        return true;
      },
    });
    expect(job.state).toBe('ticking');
    expect(job.options.mode).toBe('manual');
    expect(app.registry.get('import')).toBe(job);
    expect(await app.registry.syncTick('import')).toMatchObject({ ok: true, reason: 'normal' });
    expect(contexts).toEqual([expect.objectContaining({ name: 'import', jobId: 1 })]);
    expect(guardArguments).toEqual([[]]);
  });

  it('add() before bootstrap starts the job when the application bootstraps', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })] }, { init: false });
    const job = app.registry.add('early', () => undefined, { every: 5000 });
    expect(job.state).toBe('idle');
    await app.init();
    expect(job.state).toBe('ticking');
  });

  it('a job added at run time is drained on close', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })] });
    let cleanedUp = false;
    app.registry.add(
      'import',
      async (context) => {
        await honouringRun(context);
        cleanedUp = true;
      },
      { every: 5000 },
    );
    await app.registry.tick('import');
    await app.close();
    expect(cleanedUp).toBe(true);
    expect(app.seen.find((event) => event.type === 'finished')).toMatchObject({
      name: 'import',
      reason: 'shutdown',
    });
  });

  it('remove() stops the job as on shutdown, then forgets it', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Jobs] });
    const job = app.registry.add('import', honouringRun, {
      every: 5000,
    });
    await app.registry.tick('import');
    const removing = app.registry.remove('import');
    expect(job.state).toBe('stopped');
    await removing;
    expect(app.registry.has('import')).toBe(false);
    expect(app.seen.filter((event) => event.type === 'finished')).toEqual([
      expect.objectContaining({ name: 'import', reason: 'shutdown' }),
    ]);
    await app.registry.remove('Jobs.cleanup');
    expect(app.registry.getAll().map((remaining) => remaining.name)).toEqual(['reports']);
    await expect(app.registry.remove('import')).rejects.toThrow(PeriodicNotFoundError);
  });

  it('a name can be used again once its job is removed', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })] });
    const first = app.registry.add('import', () => undefined, { every: 5000 });
    await app.registry.remove('import');
    const second = app.registry.add('import', () => undefined, { every: 5000 });
    expect(second).not.toBe(first);
    expect(await app.registry.syncTick('import')).toMatchObject({ ok: true });
  });
});

describe('add() before the module has initialised takes the module options', () => {
  const createApp = useApps();
  const hangingClient = {
    eval: () => new Promise(() => undefined),
    evalsha: () => new Promise(() => undefined),
  };

  it("from a provider's constructor, under forRoot({ mode: 'manual' })", async () => {
    @Injectable()
    class Adds {
      constructor(registry: PeriodicRegistry) {
        registry.add('early', () => undefined, { every: 1000 });
      }
    }
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Adds] });
    expect(app.registry.get('early').options.mode).toBe('manual');
    expect(await app.registry.syncTick('early')).toMatchObject({ ok: true, reason: 'normal' });
  });

  it("from a factory in a global module listed before forRoot(): the module's coordinator", async () => {
    const coordinator = new RedisCoordinator({ client: hangingClient });
    @Global()
    @Module({
      providers: [
        {
          provide: 'EARLY',
          inject: [PeriodicRegistry],
          useFactory: (registry: PeriodicRegistry) =>
            registry.add('early', () => undefined, { every: 1000, exclusive: true }),
        },
      ],
    })
    class EarlyModule {}
    const app = await createApp({
      imports: [EarlyModule, PeriodicModule.forRoot({ mode: 'manual', coordinator })],
    });
    const job = app.registry.get('early');
    expect([job.options.mode, job.options.exclusive, job.state]).toEqual(['manual', true, 'ticking']);
  });

  it('under forRootAsync(), whose factory resolves later', async () => {
    @Injectable()
    class Adds {
      constructor(registry: PeriodicRegistry) {
        registry.add('early', () => undefined, { every: 1000 });
      }
    }
    const app = await createApp({
      imports: [
        PeriodicModule.forRootAsync({
          useFactory: async () => {
            await new Promise((resolve) => setTimeout(resolve, 10));
            return { mode: 'manual' };
          },
        }),
      ],
      providers: [Adds],
    });
    expect(app.registry.get('early').options.mode).toBe('manual');
  });
});

describe('a job that removes itself', () => {
  const createApp = useApps();

  it('calls remove() without awaiting it: its signal is aborted, and it ends shutdown as it returns', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ logger: false })] });
    let removed: Promise<void> | undefined;
    const aborted: boolean[] = [];
    app.registry.add(
      'once',
      async (context) => {
        await new Promise((resolve) => setTimeout(resolve, 5));
        removed = app.registry.remove(context.name);
        aborted.push(context.signal.aborted);
      },
      // One run only, however loaded the machine: the next tick is a minute away.
      { every: 60_000, initialDelay: 0 },
    );
    const finished = await app.events.once('finished');
    await removed;
    expect(aborted).toEqual([true]);
    expect(finished).toMatchObject({ name: 'once', reason: 'shutdown' });
    expect(app.registry.has('once')).toBe(false);
    expect(app.seen.filter((event) => event.type === 'started')).toHaveLength(1);
  });
});

describe('options given through a prototype', () => {
  const createApp = useApps();

  it('@Periodic() and add() both read inherited options, as any property', async () => {
    const defaults = { every: 1000, initialDelay: 0 };
    @Injectable()
    class Inheriting {
      @Periodic(Object.assign(Object.create(defaults) as object, { name: 'decorated' }) as never)
      work(): void {}
    }
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual' })],
      providers: [Inheriting],
    });
    const added = app.registry.add('added', () => undefined, Object.create(defaults) as never);
    for (const job of [app.registry.get('decorated'), added]) {
      expect([job.options.every, job.options.initialDelay]).toEqual([1000, 0]);
    }
  });
});
