import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import {
  Periodic,
  type PeriodicContext,
  PeriodicModule,
  PeriodicNotFoundError,
  PeriodicScheduler,
  PeriodicTimeoutError,
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
