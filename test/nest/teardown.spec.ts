// How jobs start and end with the application: module classes that open and close resources, closing that
// stops every job at once, a failed init(), and the objects the package wraps while the application runs.
import { runInNewContext } from 'node:vm';
import { setFlagsFromString } from 'node:v8';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, jest } from '@jest/globals';
import { Inject, Injectable, Module, type ModuleMetadata } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  InMemoryCoordinator,
  Periodic,
  type PeriodicContext,
  type PeriodicCoordinator,
  PeriodicModule,
  PostgresCoordinator,
  RedisCoordinator,
} from '../../lib/index.js';
import { armedDeadlines } from '../../lib/scheduler/deadline-timer.js';
import { honouringRun } from '../scheduler/helpers.js';
import { describeWithPostgres, dropTable, postgresPool, uniqueTable } from '../postgres/postgres.js';
import { describeWithRedis, dropKeys, redisClient, uniquePrefix } from '../redis/redis.js';
import { useApps } from './helpers.js';

type Describe = (name: string, tests: () => void) => void;

/** A pool as a module provides it with `useFactory`, opened and closed by the module class's own hooks. */
class Pool {
  connected = false;
  closed = false;
}

/** The hooks of a module class that provides a pool. */
class OwnsPool {
  constructor(@Inject(Pool) private readonly pool: Pool) {}

  async onApplicationBootstrap(): Promise<void> {
    await sleep(50);
    this.pool.connected = true;
  }

  async onModuleDestroy(): Promise<void> {
    this.pool.closed = true;
  }
}

@Module({ providers: [{ provide: Pool, useFactory: () => new Pool() }], exports: [Pool] })
class PoolModule extends OwnsPool {}

/** Records whether the pool was connected at each run, and open while the run cleaned up after its signal. */
@Injectable()
class Reader {
  readonly connectedAtRun: boolean[] = [];
  openDuringCleanup: boolean | undefined;
  constructor(@Inject(Pool) private readonly pool: Pool) {}

  @Periodic({ every: 5, initialDelay: 0, onOverlap: 'ignore' })
  async read(context: PeriodicContext): Promise<void> {
    this.connectedAtRun.push(this.pool.connected);
    await honouringRun(context);
    await sleep(30);
    this.openDuringCleanup = !this.pool.closed;
  }
}

@Module({
  imports: [PoolModule],
  providers: [{ provide: Pool, useFactory: () => new Pool() }, Reader],
  exports: [Pool],
})
class ReaderInPoolModule extends OwnsPool {}

describe('a module class that opens a resource in its hooks', () => {
  const createApp = useApps();

  it.each<[string, ModuleMetadata]>([
    ['the host sits in a module that imports it', { imports: [PoolModule], providers: [Reader] }],
    ['the host sits in that module', { imports: [ReaderInPoolModule] }],
  ])('%s: the resource is ready at the first tick and open while the job drains', async (_, metadata) => {
    const app = await createApp({ ...metadata, imports: [PeriodicModule.forRoot(), ...metadata.imports!] });
    await app.events.once('started');
    await app.close();
    const reader = app.moduleRef.get(Reader, { strict: false });
    expect(reader.connectedAtRun).toEqual([true]);
    expect(reader.openDuringCleanup).toBe(true);
    expect(app.seen.find((event) => event.type === 'finished')).toMatchObject({ reason: 'shutdown' });
  });
});

describe('once app.close() has begun, no job starts a run', () => {
  const createApp = useApps();

  it('a host without hooks stops ticking while a sibling provider takes its time to be destroyed', async () => {
    let destroying = false;
    @Injectable()
    class SlowToClose {
      async onModuleDestroy(): Promise<void> {
        destroying = true;
        await sleep(200);
      }
    }
    @Injectable()
    class Ticker {
      readonly runsWhileClosing: number[] = [];
      @Periodic({ every: 5, initialDelay: 0 })
      tick({ jobId }: PeriodicContext): void {
        if (destroying) this.runsWhileClosing.push(jobId);
      }
    }
    @Module({ providers: [Ticker] })
    class TickerModule {}
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ logger: false }), TickerModule],
      providers: [SlowToClose],
    });
    await app.events.once('finished');
    await app.close();
    expect(destroying).toBe(true);
    expect(app.moduleRef.get(Ticker, { strict: false }).runsWhileClosing).toEqual([]);
  });
});

describe('a failed init() leaves no job ticking', () => {
  const createApp = useApps();

  it("another provider's onApplicationBootstrap throws: no job starts, no timer is left", async () => {
    @Injectable()
    class Ready {
      async onApplicationBootstrap(): Promise<void> {}
    }
    @Injectable()
    class Job {
      constructor(readonly ready: Ready) {}
      @Periodic({ every: 5, initialDelay: 0 })
      work(): void {}
    }
    @Injectable()
    class Broken {
      async onApplicationBootstrap(): Promise<void> {
        await sleep(30);
        throw new Error('cannot connect');
      }
    }
    // Nest bootstraps the farthest modules first: the job's module is done before the root's Broken fails.
    @Module({ providers: [Ready, Job] })
    class JobModule {}
    const app = await createApp(
      { imports: [PeriodicModule.forRoot({ logger: false }), JobModule], providers: [Broken] },
      { init: false },
    );
    await expect(app.init()).rejects.toThrow('cannot connect');
    await sleep(50);
    expect(app.seen.filter((event) => event.type === 'started')).toEqual([]);
    expect(app.registry.get('Job.work').state).toBe('idle');
    expect(armedDeadlines()).toBe(0);
  });
});

describe('the package leaves no trace on user objects once the application is closed', () => {
  const createApp = useApps();

  @Injectable()
  class Db {
    closes = 0;
    async onModuleDestroy(): Promise<void> {
      this.closes++;
    }
  }

  @Injectable()
  class UsesDb {
    constructor(readonly db: Db) {}
    @Periodic({ every: 5, initialDelay: 0 })
    work(context: PeriodicContext): Promise<void> {
      return honouringRun(context);
    }
  }

  it('a hook spied on after init() is the one that runs, after the job has drained', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ logger: false })],
      providers: [Db, UsesDb],
    });
    await app.events.once('started');
    const spy = jest.spyOn(Db.prototype, 'onModuleDestroy');
    try {
      let drained = false;
      app.events.on('finished', () => (drained = true));
      spy.mockImplementation(async () => {
        expect(drained).toBe(true);
      });
      await app.close();
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });

  it('an object shared by 20 applications one after another keeps none of them alive', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const db = new Db();
    const hosts: WeakRef<object>[] = [];
    for (let i = 0; i < 20; i++) {
      const moduleRef = await Test.createTestingModule({
        imports: [PeriodicModule.forRoot({ logger: false })],
        providers: [{ provide: Db, useValue: db }, UsesDb],
      }).compile();
      await moduleRef.init();
      hosts.push(new WeakRef(moduleRef.get(UsesDb)));
      await moduleRef.close();
    }
    expect(db.closes).toBe(20);
    expect(Object.getOwnPropertyNames(db)).toEqual(['closes']);
    await sleep(10);
    gc();
    await sleep(10);
    gc();
    // Nest itself keeps the last application it compiled (so it does without this package): the others are gone.
    expect(hosts.slice(0, -1).filter((host) => host.deref() !== undefined)).toEqual([]);
  });

  it('an object two running applications share: closing one drains the jobs that need it, in both', async () => {
    @Injectable()
    class Independent {
      @Periodic({ every: 5, initialDelay: 0 })
      work(): void {}
    }
    const db = new Db();
    const metadata = {
      imports: [PeriodicModule.forRoot({ logger: false })],
      providers: [{ provide: Db, useValue: db }, UsesDb, Independent],
    };
    const first = await createApp(metadata);
    const second = await createApp(metadata);
    await Promise.all([first.events.once('started'), second.events.once('started')]);
    await first.close();
    expect(db.closes).toBe(1);
    // The object cannot tell which application destroys it: the jobs that need it stop in both, since it is
    // gone for both; the second application is not closing, and its other jobs go on.
    expect(second.registry.get('UsesDb.work').state).toBe('stopped');
    expect(second.registry.get('Independent.work').state).toBe('ticking');
    await second.events.once('started', (event) => event.name === 'Independent.work');
    await second.close();
    expect(db.closes).toBe(2);
    expect(Object.getOwnPropertyNames(db)).toEqual(['closes']);
  });
});

const stores: {
  name: string;
  describe: Describe;
  open(): { coordinator: PeriodicCoordinator; clean(): Promise<void> };
}[] = [
  {
    name: 'InMemoryCoordinator',
    describe,
    open: () => ({ coordinator: new InMemoryCoordinator(), clean: async () => undefined }),
  },
  {
    name: 'RedisCoordinator',
    describe: await describeWithRedis(),
    open: () => {
      const [client, keyPrefix] = [redisClient(), uniquePrefix()];
      return {
        coordinator: new RedisCoordinator({ client, keyPrefix }),
        clean: async () => {
          await dropKeys(client, keyPrefix);
          await client.quit();
        },
      };
    },
  },
  {
    name: 'PostgresCoordinator',
    describe: await describeWithPostgres(),
    open: () => {
      const [pool, table] = [postgresPool(), uniqueTable()];
      return {
        coordinator: new PostgresCoordinator({ pool, table }),
        clean: async () => {
          await dropTable(pool, table);
          await pool.end();
        },
      };
    },
  },
];

for (const store of stores) {
  store.describe(
    `a closed application leaves no timer armed, so that its process can exit: ${store.name}`,
    () => {
      const createApp = useApps();

      it('exclusive jobs whose slots the replica watched for lateness (docs/alerts.md)', async () => {
        @Injectable()
        class Reports {
          @Periodic({ every: 20, exclusive: true })
          send(): void {}
        }
        const { coordinator, clean } = store.open();
        try {
          const app = await createApp({
            imports: [PeriodicModule.forRoot({ coordinator, logger: false })],
            providers: [Reports],
          });
          // Each slot of the holder is watched, and looked at once a second until the job stops.
          await app.events.once('finished');
          await app.events.once('finished');
          expect(armedDeadlines()).toBeGreaterThan(0);
          await app.close();
          expect(armedDeadlines()).toBe(0);
        } finally {
          await clean();
        }
      });
    },
  );
}
