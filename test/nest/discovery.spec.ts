import { describe, expect, it } from '@jest/globals';
import { Controller, Injectable, Module, Scope } from '@nestjs/common';
import { LazyModuleLoader } from '@nestjs/core';
import { Periodic, PeriodicConfigError, type PeriodicContext, PeriodicModule } from '../../lib/index.js';
import { typesOf, useApps } from './helpers.js';

const manual = PeriodicModule.forRoot({ mode: 'manual' });

@Injectable()
class Cleanup {
  readonly contexts: PeriodicContext[] = [];

  @Periodic({ every: 60_000 })
  purge(context: PeriodicContext): void {
    this.contexts.push(context);
  }
}

describe('discovery', () => {
  const createApp = useApps();

  it('gives every decorated method of providers and controllers a scheduler, named Class.method', async () => {
    @Controller()
    class StatusController {
      @Periodic({ every: 1000 })
      refresh(): void {}
    }
    @Injectable()
    class Two {
      @Periodic({ every: 1000 })
      first(): void {}

      @Periodic({ every: 2000, name: 'second-job' })
      second(): void {}

      notAJob(): void {}
    }
    const app = await createApp({
      imports: [manual],
      providers: [Cleanup, Two],
      controllers: [StatusController],
    });
    expect(
      app.registry
        .getAll()
        .map((job) => job.name)
        .sort(),
    ).toEqual(['Cleanup.purge', 'StatusController.refresh', 'Two.first', 'second-job']);
    expect(app.registry.get('second-job').options.every).toBe(2000);
  });

  it('finds a method named by a symbol too, which Nest’s MetadataScanner would not list', async () => {
    const purge = Symbol('purge');
    @Injectable()
    class Keyed {
      runs = 0;

      @Periodic({ every: 1000, name: 'keyed' })
      [purge](): void {
        this.runs += 1;
      }
    }
    const app = await createApp({ imports: [manual], providers: [Keyed] });
    expect(await app.registry.syncTick('keyed')).toMatchObject({ ok: true, reason: 'normal' });
    expect(app.moduleRef.get(Keyed).runs).toBe(1);
  });

  it('calls the method on the provider instance with the run context', async () => {
    const app = await createApp({ imports: [manual], providers: [Cleanup] });
    await app.registry.syncTick('Cleanup.purge');
    const [context] = app.moduleRef.get(Cleanup).contexts;
    expect(context).toMatchObject({ name: 'Cleanup.purge', jobId: 1 });
    expect(context.signal).toBeInstanceOf(AbortSignal);
  });

  it('names a job after the class of the instance, also for an inherited method', async () => {
    @Injectable()
    class NightlyCleanup extends Cleanup {}
    const app = await createApp({ imports: [manual], providers: [NightlyCleanup] });
    expect(app.registry.has('NightlyCleanup.purge')).toBe(true);
    await app.registry.syncTick('NightlyCleanup.purge');
    expect(app.moduleRef.get(NightlyCleanup).contexts).toHaveLength(1);
  });

  it('an overriding method without @Periodic() is not a job', async () => {
    @Injectable()
    class Quiet extends Cleanup {
      override purge(): void {}
    }
    const app = await createApp({ imports: [manual], providers: [Quiet] });
    expect(app.registry.getAll()).toEqual([]);
  });

  it('an alias (useExisting) is not scanned twice: one job, one run per tick', async () => {
    const app = await createApp({
      imports: [manual],
      providers: [Cleanup, { provide: 'CLEANUP_ALIAS', useExisting: Cleanup }],
    });
    expect(app.registry.getAll().map((job) => job.name)).toEqual(['Cleanup.purge']);
    await app.registry.syncTick('Cleanup.purge');
    expect(app.moduleRef.get(Cleanup).contexts).toHaveLength(1);
    expect(typesOf(app.seen)).toEqual(['started', 'finished']);
  });

  it('finds jobs on useValue and useFactory providers', async () => {
    const value = new Cleanup();
    @Injectable()
    class Other {
      @Periodic({ every: 1000 })
      work(): void {}
    }
    const app = await createApp({
      imports: [manual],
      providers: [
        { provide: 'VALUE', useValue: value },
        { provide: 'FACTORY', useFactory: () => new Other() },
      ],
    });
    expect(
      app.registry
        .getAll()
        .map((job) => job.name)
        .sort(),
    ).toEqual(['Cleanup.purge', 'Other.work']);
    await app.registry.syncTick('Cleanup.purge');
    expect(value.contexts).toHaveLength(1);
  });

  it('one object provided by two modules is one job', async () => {
    const shared = new Cleanup();
    @Module({ providers: [{ provide: 'IN_A', useValue: shared }] })
    class A {}
    const app = await createApp({
      imports: [manual, A],
      providers: [{ provide: 'IN_ROOT', useValue: shared }],
    });
    expect(app.registry.getAll()).toHaveLength(1);
    await app.registry.syncTick('Cleanup.purge');
    expect(shared.contexts).toHaveLength(1);
  });

  it('runs the guard with the provider instance', async () => {
    @Injectable()
    class Guarded {
      enabled = false;
      runs = 0;

      @Periodic({ every: 1000, when: (self: Guarded) => self.enabled })
      work(): void {
        this.runs++;
      }
    }
    const app = await createApp({ imports: [manual], providers: [Guarded] });
    const guarded = app.moduleRef.get(Guarded);
    expect(await app.registry.tick('Guarded.work')).toEqual({ ok: false, error: 'jobNotStarted' });
    guarded.enabled = true;
    expect(await app.registry.syncTick('Guarded.work')).toMatchObject({ ok: true, reason: 'normal' });
    expect(guarded.runs).toBe(1);
  });
});

describe('discovery refuses what it cannot run, at bootstrap, naming the class and the method', () => {
  const createApp = useApps();

  it.each([
    ['request-scoped', Scope.REQUEST, 'Scoped is request-scoped (Scope.REQUEST)'],
    ['transient', Scope.TRANSIENT, 'Scoped is transient (Scope.TRANSIENT)'],
  ])('a %s host', async (_, scope, why) => {
    @Injectable({ scope })
    class Scoped {
      @Periodic({ every: 1000 })
      work(): void {}
    }
    const app = createApp({ imports: [manual], providers: [Scoped] });
    await expect(app).rejects.toThrow(PeriodicConfigError);
    await expect(app).rejects.toThrow(
      `@Periodic() on Scoped.work: ${why}, so there is no single instance to run the job on; ` +
        'put the job on a provider of the default (singleton) scope',
    );
  });

  it('a host that depends on a request-scoped provider', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {}
    @Injectable()
    class Host {
      constructor(readonly perRequest: PerRequest) {}

      @Periodic({ every: 1000 })
      work(): void {}
    }
    await expect(createApp({ imports: [manual], providers: [Host, PerRequest] })).rejects.toThrow(
      '@Periodic() on Host.work: Host depends on a request-scoped provider, which makes it request-scoped too',
    );
  });

  it('starts nothing when the bootstrap fails', async () => {
    @Injectable()
    class Broken {
      @Periodic({ every: 0 })
      work(): void {}
    }
    const app = await createApp(
      { imports: [PeriodicModule.forRoot()], providers: [Cleanup, Broken] },
      { init: false },
    );
    await expect(app.init()).rejects.toThrow('@Periodic() on Broken.work: "every"');
    expect(app.registry.getAll().map((job) => job.state)).toEqual(['idle']);
  });
});

describe('modules loaded lazily', () => {
  const createApp = useApps();

  it('the jobs of a module loaded through LazyModuleLoader after bootstrap start when it is loaded, and drain on close', async () => {
    @Injectable()
    class Report {
      @Periodic({ every: 5, initialDelay: 0, onOverlap: 'ignore' })
      build(context: PeriodicContext): Promise<void> {
        return new Promise((resolve) => context.signal.addEventListener('abort', () => resolve()));
      }
    }
    @Module({ providers: [Report] })
    class ReportModule {}
    const app = await createApp({ imports: [PeriodicModule.forRoot({ logger: false })] });
    expect(app.registry.has('Report.build')).toBe(false);
    await app.moduleRef.get(LazyModuleLoader).load(() => ReportModule);
    expect(app.registry.get('Report.build').state).toBe('ticking');
    await app.events.once('started');
    // Loading it again finds nothing new.
    await app.moduleRef.get(LazyModuleLoader).load(() => ReportModule);
    await app.close();
    expect(app.seen.filter((event) => event.type === 'finished')).toEqual([
      expect.objectContaining({ name: 'Report.build', reason: 'shutdown' }),
    ]);
  });
});
