import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from '@jest/globals';
import { Global, Injectable, Module, type ModuleMetadata, Scope } from '@nestjs/common';
import { Periodic, type PeriodicContext, PeriodicModule } from '../../lib/index.js';
import { armedDeadlines } from '../../lib/scheduler/deadline-timer.js';
import { honouringRun, stuckRun } from '../scheduler/helpers.js';
import { useApps } from './helpers.js';

describe('a job starts only once its host and what the host depends on have bootstrapped', () => {
  const createApp = useApps();

  it('waits for a dependency whose onModuleInit resolves later', async () => {
    @Injectable()
    class Connection {
      ready = false;
      async onModuleInit(): Promise<void> {
        await sleep(50);
        this.ready = true;
      }
    }
    @Injectable()
    class Poller {
      readonly sawReady: boolean[] = [];
      constructor(private readonly connection: Connection) {}

      @Periodic({ every: 5, initialDelay: 0 })
      poll(): void {
        this.sawReady.push(this.connection.ready);
      }
    }
    const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Poller, Connection] });
    await app.events.once('finished');
    const { sawReady } = app.moduleRef.get(Poller);
    expect(sawReady.length).toBeGreaterThan(0);
    expect(sawReady.every(Boolean)).toBe(true);
  });

  it('waits for a dependency in another module whose onApplicationBootstrap resolves later', async () => {
    @Injectable()
    class Cache {
      warm = false;
      async onApplicationBootstrap(): Promise<void> {
        await sleep(50);
        this.warm = true;
      }
    }
    @Module({ providers: [Cache], exports: [Cache] })
    class CacheModule {}
    @Injectable()
    class Reporter {
      readonly sawWarm: boolean[] = [];
      constructor(private readonly cache: Cache) {}

      @Periodic({ every: 5, initialDelay: 0 })
      report(): void {
        this.sawWarm.push(this.cache.warm);
      }
    }
    const app = await createApp({ imports: [PeriodicModule.forRoot(), CacheModule], providers: [Reporter] });
    await app.events.once('finished');
    const { sawWarm } = app.moduleRef.get(Reporter);
    expect(sawWarm.length).toBeGreaterThan(0);
    expect(sawWarm.every(Boolean)).toBe(true);
  });

  it("waits for the host's own onApplicationBootstrap", async () => {
    @Injectable()
    class Host {
      prepared = false;
      readonly sawPrepared: boolean[] = [];
      async onApplicationBootstrap(): Promise<void> {
        await sleep(50);
        this.prepared = true;
      }

      @Periodic({ every: 5, initialDelay: 0 })
      work(): void {
        this.sawPrepared.push(this.prepared);
      }
    }
    const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Host] });
    await app.events.once('finished');
    expect(app.moduleRef.get(Host).sawPrepared.every(Boolean)).toBe(true);
  });

  it('a job of an application that never initialises never starts, and close() still resolves', async () => {
    @Injectable()
    class Host {
      @Periodic({ every: 5, initialDelay: 0 })
      work(): void {}
    }
    const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Host] }, { init: false });
    await app.close();
    expect(app.seen).toEqual([]);
  });
});

@Injectable()
class Db {
  open = true;
  async onModuleDestroy(): Promise<void> {
    this.open = false;
  }
}

@Injectable()
class Repo {
  constructor(readonly db: Db) {}
}

/** A job that honours its signal, then needs the database for its cleanup. */
@Injectable()
class Exporter {
  dbOpenDuringCleanup: boolean | undefined;
  constructor(private readonly repo: Repo) {}

  @Periodic({ every: 60_000, initialDelay: 0 })
  async export(context: PeriodicContext): Promise<void> {
    await honouringRun(context);
    await sleep(30);
    this.dbOpenDuringCleanup = this.repo.db.open;
  }
}

@Module({ providers: [Db], exports: [Db] })
class DbModule {}

@Global()
@Module({ providers: [Db], exports: [Db] })
class GlobalDbModule {}

describe('a job is drained before any provider it depends on is destroyed', () => {
  const createApp = useApps();

  it.each<[string, ModuleMetadata]>([
    ['in the same module', { providers: [Db, Repo, Exporter] }],
    ['in an imported module', { imports: [DbModule], providers: [Repo, Exporter] }],
    ['in a global module', { imports: [GlobalDbModule], providers: [Repo, Exporter] }],
  ])('the database %s is still open while the run cleans up after its signal', async (_, metadata) => {
    const app = await createApp({
      ...metadata,
      imports: [PeriodicModule.forRoot(), ...(metadata.imports ?? [])],
    });
    await app.events.once('started');
    await app.close();
    expect(app.moduleRef.get(Exporter).dbOpenDuringCleanup).toBe(true);
    expect(app.seen.find((event) => event.type === 'finished')).toMatchObject({ reason: 'shutdown' });
    expect(app.moduleRef.get(Db).open).toBe(false);
  });

  it('a transient dependency, of which the host has its own instance, is still open during the cleanup', async () => {
    @Injectable({ scope: Scope.TRANSIENT })
    class Session {
      open = true;
      onModuleDestroy(): void {
        this.open = false;
      }
    }
    @Injectable()
    class Host {
      sessionOpenDuringCleanup: boolean | undefined;
      constructor(readonly session: Session) {}

      @Periodic({ every: 60_000, initialDelay: 0 })
      async work(context: PeriodicContext): Promise<void> {
        await honouringRun(context);
        await sleep(20);
        this.sessionOpenDuringCleanup = this.session.open;
      }
    }
    const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Host, Session] });
    await app.events.once('started');
    await app.close();
    const host = app.moduleRef.get(Host);
    expect(host.sessionOpenDuringCleanup).toBe(true);
    expect(host.session.open).toBe(false);
  });

  it("the host's own onModuleDestroy runs after its runs have ended", async () => {
    @Injectable()
    class Host {
      readonly steps: string[] = [];

      @Periodic({ every: 60_000, initialDelay: 0 })
      async work(context: PeriodicContext): Promise<void> {
        await honouringRun(context);
        await sleep(20);
        this.steps.push('run ended');
      }

      onModuleDestroy(): void {
        this.steps.push('host destroyed');
      }
    }
    const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Host] });
    await app.events.once('started');
    await app.close();
    expect(app.moduleRef.get(Host).steps).toEqual(['run ended', 'host destroyed']);
  });

  it('close() resolves after every run has ended, abandoning those that ignore their signal after jobShutdown', async () => {
    @Injectable()
    class Host {
      @Periodic({ every: 60_000, initialDelay: 0, jobShutdown: 20 })
      ignores(): Promise<void> {
        return stuckRun();
      }

      @Periodic({ every: 60_000, initialDelay: 0 })
      honours(context: PeriodicContext): Promise<void> {
        return honouringRun(context);
      }
    }
    const app = await createApp({ imports: [PeriodicModule.forRoot({ logger: false })], providers: [Host] });
    await Promise.all([
      app.events.once('started', (event) => event.name === 'Host.ignores'),
      app.events.once('started', (event) => event.name === 'Host.honours'),
    ]);
    await app.close();
    const finished = app.seen.filter((event) => event.type === 'finished');
    expect(finished.map((event) => [event.name, event.reason]).sort()).toEqual([
      ['Host.honours', 'shutdown'],
      ['Host.ignores', 'killed'],
    ]);
    expect(app.registry.getAll().map((job) => [job.state, job.running])).toEqual([
      ['stopped', 0],
      ['stopped', 0],
    ]);
  });
});

describe('close() racing with itself and with bootstrap', () => {
  const createApp = useApps();

  it('close() called twice at once: both resolve once the run in flight has cleaned up, which happens once', async () => {
    const steps: string[] = [];
    @Injectable()
    class Exporter {
      @Periodic({ every: 60_000, initialDelay: 0 })
      async export({ signal }: PeriodicContext): Promise<void> {
        await new Promise((resolve) => signal.addEventListener('abort', resolve));
        await sleep(50);
        steps.push('cleaned up');
      }
    }
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ logger: false })],
      providers: [Exporter],
    });
    await app.events.once('started');
    const both = [app.moduleRef.close(), app.moduleRef.close()].map((closing, i) =>
      closing.then(() => steps.push(`close ${i + 1} resolved`)),
    );
    await Promise.all(both);
    expect(steps.slice(0, 1)).toEqual(['cleaned up']);
    expect(steps.sort()).toEqual(['cleaned up', 'close 1 resolved', 'close 2 resolved']);
    expect(app.seen.filter((event) => event.type === 'finished').map((event) => event.reason)).toEqual([
      'shutdown',
    ]);
    expect(armedDeadlines()).toBe(0);
  });

  it('close() while a dependency is still bootstrapping: no run outlives close(), and nothing starts after it', async () => {
    let release!: () => void;
    let entered!: () => void;
    const bootstrapping = new Promise<void>((resolve) => (entered = resolve));
    @Injectable()
    class Store {
      async onApplicationBootstrap(): Promise<void> {
        entered();
        await new Promise<void>((resolve) => (release = resolve));
      }
    }
    @Injectable()
    class Poller {
      constructor(readonly store: Store) {}

      @Periodic({ every: 5, initialDelay: 0 })
      poll(context: PeriodicContext): Promise<void> {
        return honouringRun(context);
      }
    }
    const app = await createApp(
      { imports: [PeriodicModule.forRoot({ logger: false })], providers: [Store, Poller] },
      { init: false },
    );
    const init = app.moduleRef.init().then(
      () => 'initialised',
      () => 'init failed',
    );
    await bootstrapping;
    const closing = app.moduleRef.close();
    release();
    await Promise.all([init, closing]);
    const closedAt = app.seen.length;
    await sleep(50);
    const started = app.seen.filter((event) => event.type === 'started');
    const finished = app.seen.filter((event) => event.type === 'finished');
    expect(app.seen.length).toBe(closedAt);
    expect(finished.map((event) => event.jobId)).toEqual(started.map((event) => event.jobId));
    expect(app.registry.get('Poller.poll').state).not.toBe('ticking');
    expect(app.registry.get('Poller.poll').running).toBe(0);
    expect(armedDeadlines()).toBe(0);
  });
});
