// The one table of a job's options (lib/scheduler/options.ts): every option reaches the engine from @Periodic(),
// from PeriodicRegistry.add() and from the module's `jobs` alike, and the README's table of options is the one
// the table makes.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { format } from 'prettier';
import { InMemoryCoordinator, Periodic, type PeriodicContext, PeriodicModule } from '../lib/index.js';
import { JOB_OPTION_NAMES, JOB_OPTIONS, type PeriodicOptions } from '../lib/scheduler/options.js';
import type { PeriodicScheduler } from '../lib/scheduler/periodic-scheduler.js';
import { useApps } from './nest/helpers.js';

type Option = keyof PeriodicOptions;

/** Whether the scheduler holds what the example gave: equal values, or a guard that answers as the example's. */
function expectOptionsOf(scheduler: PeriodicScheduler, example: Partial<PeriodicOptions>): void {
  for (const [key, value] of Object.entries(example) as [Option, unknown][]) {
    const held: unknown = scheduler.options[key];
    if (typeof value === 'function') {
      expect([key, typeof held]).toEqual([key, 'function']);
      expect((held as () => unknown)()).toBe((value as () => unknown)());
    } else {
      expect([key, held]).toEqual([key, value]);
    }
  }
}

describe('every option of the table reaches the engine', () => {
  const createApp = useApps();
  const coordinator = new InMemoryCoordinator();

  it.each(JOB_OPTION_NAMES)('%s, from @Periodic()', async (option) => {
    const example: Partial<PeriodicOptions> = JOB_OPTIONS[option].example;
    @Injectable()
    class Host {
      @Periodic(example)
      job(_: PeriodicContext): void {}
    }
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ coordinator, logger: false })],
      providers: [Host],
    });
    expectOptionsOf(app.registry.get(example.name ?? 'Host.job'), example);
  });

  it.each(JOB_OPTION_NAMES.filter((option) => option !== 'name'))(
    '%s, from PeriodicRegistry.add()',
    async (option) => {
      const example: Partial<PeriodicOptions> = JOB_OPTIONS[option].example;
      const app = await createApp({ imports: [PeriodicModule.forRoot({ coordinator, logger: false })] });
      // The examples' guards take no argument, as a guard of an added job does.
      expectOptionsOf(
        app.registry.add('added', () => undefined, example as never),
        example,
      );
    },
  );

  it.each(JOB_OPTION_NAMES.filter((option) => option !== 'name'))(
    "%s, from the module's jobs",
    async (option) => {
      const { example } = JOB_OPTIONS[option];
      @Injectable()
      class Host {
        @Periodic({ every: 60_000 })
        job(_: PeriodicContext): void {}
      }
      const app = await createApp({
        imports: [PeriodicModule.forRoot({ coordinator, logger: false, jobs: { 'Host.job': example } })],
        providers: [Host],
      });
      expectOptionsOf(app.registry.get('Host.job'), example);
    },
  );
});

describe("the README's table of options", () => {
  it('is the one the table makes', async () => {
    const rows = JOB_OPTION_NAMES.map((option) => {
      const { valid, default: byDefault, meaning } = JOB_OPTIONS[option];
      return `| \`${option}\` | ${valid} | ${byDefault} | ${meaning} |`;
    });
    const table = [
      '| option | valid values | default | meaning |',
      '| --- | --- | --- | --- |',
      ...rows,
    ].join('\n');
    const formatted = await format(table, { parser: 'markdown', printWidth: 110, proseWrap: 'preserve' });
    const readme = readFileSync(join(import.meta.dirname, '..', 'README.md'), 'utf8');
    expect(readme).toContain(formatted);
  });
});
