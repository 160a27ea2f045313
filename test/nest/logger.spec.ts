import { describe, expect, it, jest } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { InMemoryCoordinator, Periodic, type PeriodicContext, PeriodicModule } from '../../lib/index.js';
import { deferred, honouringRun, stuckRun } from '../scheduler/helpers.js';
import { type TestApp, useApps } from './helpers.js';

@Injectable()
class Jobs {
  guard = deferred<boolean>();

  @Periodic({ every: 1000 })
  quick(): void {}

  @Periodic({ every: 1000 })
  fail(): void {
    throw new Error('disk full');
  }

  @Periodic({ every: 1000, timeout: 10, jobShutdown: 'brutalKill' })
  slow(): Promise<void> {
    return stuckRun();
  }

  @Periodic({ every: 1000, onOverlap: 'ignore' })
  single(context: PeriodicContext): Promise<void> {
    return honouringRun(context);
  }

  @Periodic({ every: 1000, onOverlap: 'stopPrevious', jobShutdown: 'brutalKill' })
  latest(): Promise<void> {
    return stuckRun();
  }

  @Periodic({ every: 1000, when: (self: Jobs) => self.guard.promise })
  guarded(): void {}

  @Periodic({
    every: 1000,
    when: () => {
      throw new Error('no config');
    },
  })
  broken(): void {}
}

describe('the logger', () => {
  const createApp = useApps();

  /** Ticks each job of `Jobs` the way that makes each kind of line once, then closes the application. */
  async function tickEveryKind(app: TestApp): Promise<void> {
    const { registry } = app;
    await registry.syncTick('Jobs.quick');
    await registry.syncTick('Jobs.fail');
    await registry.syncTick('Jobs.slow');
    await registry.tick('Jobs.single');
    await registry.tick('Jobs.single');
    await registry.tick('Jobs.latest');
    await registry.tick('Jobs.latest');
    const pending = registry.tick('Jobs.guarded');
    await registry.tick('Jobs.guarded');
    app.moduleRef.get(Jobs).guard.resolve(false);
    await pending;
    await registry.tick('Jobs.broken');
    await app.close();
  }

  it("logs each kind of event at its default level through Nest's Logger, context Periodic, in the original's words", async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Jobs] });
    await tickEveryKind(app);
    expect(app.logs.periodic()).toEqual([
      'error: job Jobs.fail#1 failed: disk full',
      'error: job Jobs.slow#1 timed out after 10ms',
      'debug: skipped Jobs.single: the previous run #1 is still running',
      'warn: job Jobs.latest#1 killed',
      'warn: stopped previous run Jobs.latest#1',
      'warn: Jobs.guarded missed 1 tick',
      'error: guard of Jobs.broken failed: no config',
      'warn: job Jobs.latest#2 killed',
      'log: job Jobs.single#1 shut down',
    ]);
    const stacks = app.logs.lines.filter((line) => line.level === 'error').map((line) => line.stack);
    expect(stacks).toEqual([
      expect.stringContaining('Error: disk full'),
      undefined,
      expect.stringContaining('Error: no config'),
    ]);
  });

  it('a healthy application logs nothing by default: runs that start and end normally make no line', async () => {
    jest.useFakeTimers();
    try {
      const app = await createApp({ imports: [PeriodicModule.forRoot()] });
      app.registry.add('fast', () => undefined, { every: 10 });
      app.registry.add('slow', () => new Promise((resolve) => setTimeout(resolve, 5)), { every: 10 });
      // Ten ticks of each; the last run of 'slow' ends at 105.
      await jest.advanceTimersByTimeAsync(105);
      await app.close();
      expect(app.seen.filter((event) => event.type === 'finished')).toHaveLength(20);
      expect(app.logs.periodic()).toEqual([]);
    } finally {
      jest.useRealTimers();
    }
  });

  it("a level per kind: the kinds named change, the others keep their defaults; { started, finished: 'debug' } brings back the run lines", async () => {
    const app = await createApp({
      imports: [
        PeriodicModule.forRoot({
          mode: 'manual',
          logger: {
            started: 'debug',
            finished: 'verbose',
            error: 'fatal',
            timeout: 'warn',
            killed: false,
            skipped: 'log',
            guardFailed: 'warn',
          },
        }),
      ],
      providers: [Jobs],
    });
    await tickEveryKind(app);
    expect(app.logs.periodic()).toEqual([
      'debug: job Jobs.quick#1 started',
      expect.stringMatching(/^verbose: job Jobs\.quick#1 finished, duration=\d+ms$/),
      'debug: job Jobs.fail#1 started',
      'fatal: job Jobs.fail#1 failed: disk full',
      'debug: job Jobs.slow#1 started',
      'warn: job Jobs.slow#1 timed out after 10ms',
      'debug: job Jobs.single#1 started',
      'log: skipped Jobs.single: the previous run #1 is still running',
      'debug: job Jobs.latest#1 started',
      'warn: stopped previous run Jobs.latest#1',
      'debug: job Jobs.latest#2 started',
      'warn: Jobs.guarded missed 1 tick',
      'warn: guard of Jobs.broken failed: no config',
      'log: job Jobs.single#1 shut down',
    ]);
    // The error levels of Nest's Logger take the stack; the others take the message alone.
    const fatal = app.logs.lines.find((line) => line.level === 'fatal');
    expect(fatal).toMatchObject({ context: 'Periodic', stack: expect.stringContaining('Error: disk full') });
    const guard = app.logs.lines.find((line) => line.message.startsWith('guard of'));
    expect(guard).toEqual({
      level: 'warn',
      message: 'guard of Jobs.broken failed: no config',
      context: 'Periodic',
    });
  });

  it('the lease kinds: acquired at log, lost (the event and the run it stopped) at warn, or as configured', async () => {
    for (const logger of [true, { leaseAcquired: 'debug', leaseLost: 'error' }] as const) {
      const coordinator = new RefusingCoordinator({ leaseMs: 3000 });
      const app = await createApp({
        imports: [PeriodicModule.forRoot({ coordinator, mode: 'manual', logger })],
      });
      app.registry.add('lease', honouringRun, { every: 1000, exclusive: true });
      const acquired = await app.events.once('leaseAcquired');
      await app.registry.tick('lease');
      coordinator.refusing = true;
      await app.events.once('finished');
      await app.close();
      const [acquiredAt, lostAt] = logger === true ? ['log', 'warn'] : ['debug', 'error'];
      expect(app.logs.periodic()).toEqual([
        `${acquiredAt}: lease acquired its lease, fencing token ${acquired.fencingToken}`,
        expect.stringMatching(new RegExp(`^${lostAt}: lease lost its lease: the store refused the renewal`)),
        `${lostAt}: job lease#1 stopped: the lease was lost`,
      ]);
    }
  });

  it('an incident is one line at error level, its recovery one at log level, each after the run that made it', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', incidents: { failedSlots: 2 } })],
    });
    const outcomes = ['full', 'full', 'full', 'ok'];
    app.registry.add(
      'cleanup',
      () => {
        if (outcomes.shift() === 'full') throw new Error('disk\nfull');
      },
      { every: 1000 },
    );
    for (let run = 0; run < 4; run++) await app.registry.syncTick('cleanup');
    expect(app.logs.periodic()).toEqual([
      'error: job cleanup#1 failed: disk\\nfull',
      'error: job cleanup#2 failed again (2nd in a row): disk\\nfull',
      // The incident's detail is one line of its own making: the line feed became a space.
      'error: incident: cleanup is failing: 2 slots in a row failed after their retries; the last: Error: disk full',
      'error: job cleanup#3 failed again (3rd in a row): disk\\nfull',
      expect.stringMatching(/^log: recovered: cleanup is no longer failing, after \d+ms$/),
    ]);
  });

  it('a job that fails again the same way logs its stack once, then one line per failure, until it succeeds or fails differently', async () => {
    // Without incidents, which have lines of their own (above).
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual', incidents: false })] });
    const outcomes = ['full', 'full', 'full', 'full', 'ok', 'full', 'other', 'other'];
    app.registry.add(
      'cleanup',
      () => {
        const outcome = outcomes.shift();
        if (outcome === 'full') throw new Error('disk full');
        if (outcome === 'other') throw new TypeError('disk full');
      },
      { every: 1000 },
    );
    for (let run = 0; run < 8; run++) await app.registry.syncTick('cleanup');
    expect(app.logs.periodic()).toEqual([
      'error: job cleanup#1 failed: disk full',
      'error: job cleanup#2 failed again (2nd in a row): disk full',
      'error: job cleanup#3 failed again (3rd in a row): disk full',
      'error: job cleanup#4 failed again (4th in a row): disk full',
      'error: job cleanup#6 failed: disk full',
      'error: job cleanup#7 failed: disk full',
      'error: job cleanup#8 failed again (2nd in a row): disk full',
    ]);
    const stacks = app.logs.lines.filter((line) => line.level === 'error').map((line) => line.stack);
    expect(stacks).toEqual([
      expect.stringContaining('Error: disk full'),
      undefined,
      undefined,
      undefined,
      expect.stringContaining('Error: disk full'),
      expect.stringContaining('TypeError: disk full'),
      undefined,
    ]);
  });

  it('counts read "1 tick", "2 ticks"', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })] });
    app.events.emit({ type: 'missed', name: 'job', count: 1 });
    app.events.emit({ type: 'missed', name: 'job', count: 2 });
    expect(app.logs.periodic()).toEqual(['warn: job missed 1 tick', 'warn: job missed 2 ticks']);
  });

  it('a value thrown that is not an Error is shown as it is', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })] });
    app.registry.add(
      'odd',
      () => {
        throw { code: 42 };
      },
      { every: 1000 },
    );
    await app.registry.syncTick('odd');
    expect(app.logs.periodic()).toContain('error: job odd#1 failed: { code: 42 }');
  });

  it('an Error without a message is named by its class', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })] });
    app.registry.add(
      'blank',
      () => {
        throw new RangeError('');
      },
      { every: 1000 },
    );
    await app.registry.syncTick('blank');
    expect(app.logs.periodic()).toEqual(['error: job blank#1 failed: RangeError']);
  });

  it('logger: false logs no event', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })],
      providers: [Jobs],
    });
    await tickEveryKind(app);
    expect(app.seen.length).toBeGreaterThan(0);
    expect(app.logs.periodic()).toEqual([]);
  });
});

/** Refuses every renewal once told to, as a store where another replica took the lease would. */
class RefusingCoordinator extends InMemoryCoordinator {
  refusing = false;

  override renew(name: string, token: string): Promise<boolean> {
    return this.refusing ? Promise.resolve(false) : super.renew(name, token);
  }
}
