import { describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Periodic, type PeriodicContext, PeriodicModule } from '../../lib/index.js';
import { useApps } from './helpers.js';

@Injectable()
class Repo {
  deleteExpired(_options: { signal: AbortSignal }): Promise<number> {
    return Promise.resolve(0);
  }
}

@Injectable()
class Cleanup {
  constructor(private readonly repo: Repo) {}

  @Periodic({ every: 60_000, initialDelay: 5000, onOverlap: 'ignore', timeout: 30_000 })
  async purge(ctx: PeriodicContext): Promise<void> {
    await this.repo.deleteExpired({ signal: ctx.signal });
  }
}

describe('testing a job, as docs/testing.md shows it', () => {
  const createApp = useApps();

  it('manual mode: syncTick runs the job once against a fake dependency', async () => {
    const fakeRepo = { deleteExpired: jest.fn((_options: { signal: AbortSignal }) => Promise.resolve(3)) };
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual' })],
      providers: [Cleanup, { provide: Repo, useValue: fakeRepo }],
    });
    expect(await app.registry.syncTick('Cleanup.purge')).toMatchObject({ ok: true, reason: 'normal' });
    expect(fakeRepo.deleteExpired).toHaveBeenCalledTimes(1);
    expect(fakeRepo.deleteExpired).toHaveBeenCalledWith({ signal: expect.any(AbortSignal) });
  });

  it('a spy installed on the instance after bootstrap sees the runs', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual' })],
      providers: [Cleanup, Repo],
    });
    const purge = jest.spyOn(app.moduleRef.get(Cleanup), 'purge');
    await app.registry.syncTick('Cleanup.purge');
    expect(purge).toHaveBeenCalledWith(expect.objectContaining({ name: 'Cleanup.purge', jobId: 1 }));
  });

  it('manual mode reports nextTick, so initialDelay can be checked without timers', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual' })],
      providers: [Cleanup, Repo],
    });
    expect(app.seen.filter((event) => event.type === 'nextTick')).toEqual([
      { type: 'nextTick', name: 'Cleanup.purge', in: 5000 },
    ]);
  });

  it('auto mode under fake timers: advancing by every is exactly one tick', async () => {
    jest.useFakeTimers();
    try {
      const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Cleanup, Repo] });
      const repo = app.moduleRef.get(Repo);
      const deleteExpired = jest.spyOn(repo, 'deleteExpired');
      await jest.advanceTimersByTimeAsync(4999);
      expect(deleteExpired).not.toHaveBeenCalled();
      await jest.advanceTimersByTimeAsync(1);
      expect(deleteExpired).toHaveBeenCalledTimes(1);
      await jest.advanceTimersByTimeAsync(60_000);
      expect(deleteExpired).toHaveBeenCalledTimes(2);
      await app.close();
      expect(jest.getTimerCount()).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });
});

@Injectable()
class Nightly {
  readonly slots: string[] = [];

  @Periodic({ cron: '30 2 * * *', timezone: 'Europe/Berlin', onOverlap: 'ignore' })
  report(ctx: PeriodicContext): void {
    this.slots.push(ctx.scheduledDate.toISOString());
  }
}

describe('a cron job in an application', () => {
  const createApp = useApps();

  it('under fake timers with setSystemTime: runs the slots that fall in between, once each, DST included', async () => {
    jest.useFakeTimers({ now: new Date('2026-03-27T12:00:00Z') });
    try {
      const app = await createApp({ imports: [PeriodicModule.forRoot()], providers: [Nightly] });
      await jest.advanceTimersByTimeAsync(3 * 24 * 3_600_000);
      // 02:30 does not exist on 29 March in Berlin: that day's run is at 03:00 CEST, 01:00 UTC.
      expect(app.moduleRef.get(Nightly).slots).toEqual([
        '2026-03-28T01:30:00.000Z',
        '2026-03-29T01:00:00.000Z',
        '2026-03-30T00:30:00.000Z',
      ]);
      await app.close();
      expect(jest.getTimerCount()).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });

  it('manual mode: syncTick runs it at once; registry.add takes cron too', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual' })],
      providers: [Nightly],
    });
    expect(await app.registry.syncTick('Nightly.report')).toMatchObject({ ok: true, reason: 'normal' });
    expect(app.moduleRef.get(Nightly).slots).toHaveLength(1);
    const added = app.registry.add('weekly', () => undefined, { cron: '@weekly', timezone: 'UTC' });
    expect(added.options).toMatchObject({ cron: '@weekly', timezone: 'UTC', every: 0 });
    expect(await app.registry.syncTick('weekly')).toMatchObject({ ok: true, reason: 'normal' });
  });

  it('a pattern that never matches fails the bootstrap, naming the method', async () => {
    @Injectable()
    class Broken {
      @Periodic({ cron: '0 0 31 4 *' })
      never(): void {}
    }
    await expect(createApp({ imports: [PeriodicModule.forRoot()], providers: [Broken] })).rejects.toThrow(
      '@Periodic() on Broken.never: "cron" never matches: no instant fits "0 0 31 4 *"',
    );
  });
});

describe('a dependency whose bootstrap fails', () => {
  const createApp = useApps();

  it('keeps the job from starting', async () => {
    @Injectable()
    class Broken {
      onApplicationBootstrap(): void {
        throw new Error('cannot connect');
      }
    }
    @Injectable()
    class Host {
      constructor(readonly broken: Broken) {}

      @Periodic({ every: 1000, initialDelay: 0 })
      work(): void {}
    }
    const app = await createApp(
      { imports: [PeriodicModule.forRoot()], providers: [Host, Broken] },
      { init: false },
    );
    await expect(app.init()).rejects.toThrow('cannot connect');
    expect(app.registry.get('Host.work').state).toBe('idle');
    expect(app.seen.filter((event) => event.type === 'started')).toEqual([]);
  });
});
