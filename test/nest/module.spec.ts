import { describe, expect, it } from '@jest/globals';
import { Injectable, Module } from '@nestjs/common';
import { InMemoryCoordinator, Periodic, PeriodicModule, PeriodicRegistry } from '../../lib/index.js';
import { typesOf, useApps } from './helpers.js';

@Injectable()
class Counter {
  runs = 0;

  @Periodic({ every: 1000 })
  count(): void {
    this.runs++;
  }
}

describe('PeriodicModule.forRoot()', () => {
  const createApp = useApps();

  it('is global: a feature module injects PeriodicRegistry without importing the module', async () => {
    @Injectable()
    class Reader {
      constructor(readonly registry: PeriodicRegistry) {}
    }
    @Module({ providers: [Reader, Counter] })
    class FeatureModule {}

    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' }), FeatureModule] });
    const reader = app.moduleRef.get(Reader);
    expect(reader.registry).toBe(app.registry);
    expect(reader.registry.has('Counter.count')).toBe(true);
  });

  it('imported twice with different options: each job runs once per tick, the first import applies, with a warning', async () => {
    @Module({ imports: [PeriodicModule.forRoot({ mode: 'auto', logger: false })], providers: [Counter] })
    class FeatureModule {}

    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' }), FeatureModule] });
    expect(app.registry.getAll().map((job) => job.name)).toEqual(['Counter.count']);
    expect(app.registry.get('Counter.count').options.mode).toBe('manual');
    expect(await app.registry.syncTick('Counter.count')).toMatchObject({ ok: true, reason: 'normal' });
    expect(app.moduleRef.get(Counter).runs).toBe(1);
    expect(typesOf(app.seen)).toEqual(['started', 'finished']);
    expect(app.logs.periodic()).toContain(
      "warn: PeriodicModule is imported 2 times with different options; the first import's apply: " +
        "{ mode: 'manual', logger: true }",
    );
  });

  it("forRootAsync in the root, whose factory awaits I/O, and a feature module's forRoot(): the root's options apply", async () => {
    @Injectable()
    class Exclusive {
      @Periodic({ every: 1000, exclusive: true })
      run(): void {}
    }
    @Module({ imports: [PeriodicModule.forRoot({ logger: false })], providers: [Exclusive] })
    class FeatureModule {}
    const coordinator = new InMemoryCoordinator();

    const app = await createApp({
      imports: [
        PeriodicModule.forRootAsync({
          useFactory: async () => {
            await new Promise((resolve) => setTimeout(resolve, 20));
            return { mode: 'manual' as const, coordinator, jobs: { 'Counter.count': { every: 5000 } } };
          },
        }),
        FeatureModule,
      ],
      providers: [Counter],
    });
    expect(app.registry.get('Counter.count').options).toMatchObject({ mode: 'manual', every: 5000 });
    expect(app.registry.get('Exclusive.run').options).toMatchObject({ mode: 'manual', exclusive: true });
    expect(app.logs.periodic()).toContainEqual(
      expect.stringMatching(
        /^warn: PeriodicModule is imported 2 times with different options; the first import's apply: \{ mode: 'manual', logger: true, coordinator/,
      ),
    );
  });

  it('the import nearest the root applies, wherever the root lists it: after a feature module that imports forRoot() too', async () => {
    @Module({ imports: [PeriodicModule.forRoot({ logger: false })], providers: [Counter] })
    class FeatureModule {}
    @Module({
      imports: [
        FeatureModule,
        PeriodicModule.forRoot({ mode: 'manual', jobs: { 'Counter.count': { every: 1234 } } }),
      ],
    })
    class AppModule {}

    const app = await createApp({ imports: [AppModule] });
    expect(app.registry.get('Counter.count').options).toMatchObject({ mode: 'manual', every: 1234 });
  });

  it('imported twice with the same options: no warning, no job twice', async () => {
    @Module({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Counter] })
    class FeatureModule {}

    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' }), FeatureModule] });
    await app.registry.syncTick('Counter.count');
    expect(app.moduleRef.get(Counter).runs).toBe(1);
    expect(app.logs.periodic().filter((line) => line.startsWith('warn'))).toEqual([]);
  });

  it("the module's mode applies to the jobs that do not set their own; a job's own mode wins", async () => {
    @Injectable()
    class Jobs {
      @Periodic({ every: 1000 })
      inherits(): void {}

      @Periodic({ every: 1000, mode: 'auto' })
      own(): void {}
    }
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Jobs] });
    expect(app.registry.get('Jobs.inherits').options.mode).toBe('manual');
    expect(app.registry.get('Jobs.own').options.mode).toBe('auto');
    expect(await app.registry.tick('Jobs.own')).toEqual({ ok: false, error: 'notInManualMode' });
  });
});

describe('PeriodicModule.forRootAsync()', () => {
  const createApp = useApps();

  @Injectable()
  class Settings {
    readonly testing = true;
  }
  @Module({ providers: [Settings], exports: [Settings] })
  class SettingsModule {}

  it('builds the options with a factory that injects a provider of an imported module', async () => {
    const app = await createApp({
      imports: [
        PeriodicModule.forRootAsync({
          imports: [SettingsModule],
          inject: [Settings],
          useFactory: async (settings: Settings) => ({ mode: settings.testing ? 'manual' : 'auto' }),
        }),
      ],
      providers: [Counter],
    });
    expect(app.registry.get('Counter.count').options.mode).toBe('manual');
    expect(await app.registry.syncTick('Counter.count')).toMatchObject({ ok: true, reason: 'normal' });
  });

  it('fails the bootstrap with a clear error when the factory returns invalid options', async () => {
    const app = createApp({
      imports: [PeriodicModule.forRootAsync({ useFactory: () => ({ mode: 'sometimes' as 'auto' }) })],
    });
    await expect(app).rejects.toThrow(
      `PeriodicModule.forRootAsync(): the options returned by useFactory: "mode" must be 'auto' or 'manual', got "sometimes"`,
    );
  });

  it('refuses a missing factory at once', () => {
    expect(() => PeriodicModule.forRootAsync({} as never)).toThrow(
      'PeriodicModule.forRootAsync(): "useFactory" must be a function that returns the module\'s options, got undefined',
    );
  });

  it.each<[string, unknown, string]>([
    [
      'a misspelt key',
      { useFactory: () => ({}), injetc: [] },
      'PeriodicModule.forRootAsync(): unknown option "injetc"; did you mean "inject"? The options are: imports, inject, useFactory.',
    ],
    [
      'useClass',
      { useClass: class {} },
      'PeriodicModule.forRootAsync(): unknown option "useClass". The options are: imports, inject, useFactory.',
    ],
    ['imports not an array', { useFactory: () => ({}), imports: 5 }, '"imports" must be an array, got 5'],
    [
      'inject not an array',
      { useFactory: () => ({}), inject: 'ConfigService' },
      '"inject" must be an array, got "ConfigService"',
    ],
    ['no options', undefined, 'PeriodicModule.forRootAsync(): the options must be an object such as'],
  ])('refuses %s at once', (_, options, message) => {
    expect(() => PeriodicModule.forRootAsync(options as never)).toThrow(message);
  });

  it.each<[string, () => unknown, string]>([
    [
      'undefined (a factory with braces and no return)',
      () => undefined,
      "useFactory returned undefined; it must return the module's options, such as { mode: 'manual' } (an arrow function with braces needs a return)",
    ],
    [
      'null',
      () => null,
      "the options returned by useFactory: the options must be an object such as { mode: 'manual' }, got null",
    ],
    [
      'an array',
      () => [],
      "the options returned by useFactory: the options must be an object such as { mode: 'manual' }, got []",
    ],
  ])('fails the bootstrap when the factory returns %s', async (_, useFactory, message) => {
    const app = createApp({ imports: [PeriodicModule.forRootAsync({ useFactory: useFactory as never })] });
    await expect(app).rejects.toThrow(message);
  });
});
