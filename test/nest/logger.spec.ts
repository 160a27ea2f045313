import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Periodic, type PeriodicContext, PeriodicModule } from '../../lib/index.js';
import { deferred, honouringRun, stuckRun } from '../scheduler/helpers.js';
import { useApps } from './helpers.js';

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

  it("logs every event but nextTick through Nest's Logger, context Periodic, in the original's words", async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })], providers: [Jobs] });
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

    expect(app.logs.periodic()).toEqual([
      'debug: job Jobs.quick#1 started',
      expect.stringMatching(/^debug: job Jobs\.quick#1 finished, duration=\d+ms$/),
      'debug: job Jobs.fail#1 started',
      'error: job Jobs.fail#1 failed: disk full',
      'debug: job Jobs.slow#1 started',
      'error: job Jobs.slow#1 timed out after 10ms',
      'debug: job Jobs.single#1 started',
      'log: skipped Jobs.single: the previous run #1 is still running',
      'debug: job Jobs.latest#1 started',
      'warn: job Jobs.latest#1 killed',
      'warn: stopped previous run Jobs.latest#1',
      'debug: job Jobs.latest#2 started',
      'warn: Jobs.guarded missed 1 ticks',
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

  it('logger: false logs no event', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })],
      providers: [Jobs],
    });
    await app.registry.syncTick('Jobs.quick');
    await app.registry.syncTick('Jobs.fail');
    expect(app.seen.length).toBeGreaterThan(0);
    expect(app.logs.periodic()).toEqual([]);
  });
});
