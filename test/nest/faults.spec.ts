// Faults: jobs and callers that misbehave. Every call answers with a clear result or error, and the
// application goes on and closes.
import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Periodic, PeriodicModule, PeriodicNotFoundError, PeriodicTimeoutError } from '../../lib/index.js';
import { armedDeadlines } from '../../lib/scheduler/deadline-timer.js';
import { deferred } from '../scheduler/helpers.js';
import { useApps } from './helpers.js';

const thrownValues: [string, unknown][] = [
  ['a string', 'no connection'],
  ['undefined', undefined],
  ['an object', { code: 'E_DOWN' }],
  ['null', null],
];

describe('faults in runs and guards', () => {
  const createApp = useApps();

  it.each(thrownValues)(
    'a run that throws %s ends as error and passes the value on as it was',
    async (_, value) => {
      const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })] });
      app.registry.add(
        'throws',
        () => {
          throw value;
        },
        { every: 1000 },
      );
      app.registry.add('rejects', () => Promise.reject(value), { every: 1000 });
      expect(await app.registry.syncTick('throws')).toEqual({
        ok: true,
        reason: 'error',
        error: value,
        durationMs: expect.any(Number),
      });
      expect(await app.registry.syncTick('rejects')).toMatchObject({
        ok: true,
        reason: 'error',
        error: value,
      });
    },
  );

  it('a run abandoned after its grace that rejects later is swallowed: one finished, and the job goes on', async () => {
    const late = deferred<void>();
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })] });
    let calls = 0;
    app.registry.add('late', () => (++calls === 1 ? late.promise : undefined), {
      every: 1000,
      timeout: 10,
      jobShutdown: 10,
    });
    expect(await app.registry.syncTick('late')).toMatchObject({ ok: true, reason: 'timeout' });
    late.reject(new Error('too late'));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(app.seen.filter((event) => event.type === 'finished')).toHaveLength(1);
    expect(await app.registry.syncTick('late')).toMatchObject({ ok: true, reason: 'normal' });
  });

  it('a guard that never settles: syncTick() gives up naming the guard, later ticks start nothing, close() resolves', async () => {
    @Injectable()
    class Jobs {
      @Periodic({ every: 1000, when: () => new Promise<boolean>(() => undefined) })
      work(): void {}
    }
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })],
      providers: [Jobs],
    });
    const waiting = app.registry.syncTick('Jobs.work', { timeout: 20 });
    await expect(waiting).rejects.toThrow(PeriodicTimeoutError);
    await expect(waiting).rejects.toThrow('its guard is still pending');
    expect(await app.registry.tick('Jobs.work')).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(app.seen.filter((event) => event.type === 'missed')).toEqual([
      { type: 'missed', name: 'Jobs.work', count: 1 },
    ]);
    await app.close();
    expect(armedDeadlines()).toBe(0);
  });
});

describe('calls at the wrong moment, twice at once, or for unknown names', () => {
  const createApp = useApps();

  async function appWithJob() {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })] });
    const running = deferred<void>();
    app.registry.add('sync', () => running.promise, { every: 1000, onOverlap: 'ignore' });
    return { app, running };
  }

  it('after close: tick() and syncTick() answer jobNotStarted, remove() resolves and forgets the job', async () => {
    const { app } = await appWithJob();
    await app.close();
    expect(await app.registry.tick('sync')).toEqual({ ok: false, error: 'jobNotStarted' });
    expect(await app.registry.syncTick('sync')).toEqual({ ok: false, error: 'jobNotStarted' });
    await app.registry.remove('sync');
    expect(app.registry.has('sync')).toBe(false);
  });

  it('two ticks at once with ignore: one starts the run, the other answers jobNotStarted', async () => {
    const { app, running } = await appWithJob();
    const results = await Promise.all([app.registry.tick('sync'), app.registry.tick('sync')]);
    expect(results).toEqual([
      { ok: true, jobId: 1 },
      { ok: false, error: 'jobNotStarted' },
    ]);
    running.resolve();
  });

  it('two syncTicks at once with ignore: one resolves with the run, the other at once with jobNotStarted', async () => {
    const { app, running } = await appWithJob();
    const first = app.registry.syncTick('sync');
    const second = await app.registry.syncTick('sync');
    expect(second).toEqual({ ok: false, error: 'jobNotStarted' });
    running.resolve();
    expect(await first).toMatchObject({ ok: true, reason: 'normal' });
  });

  it('two removes at once: both resolve once the stopped run has ended, and the job is gone', async () => {
    const { app, running } = await appWithJob();
    await app.registry.tick('sync');
    const both = Promise.all([app.registry.remove('sync'), app.registry.remove('sync')]);
    running.resolve();
    await both;
    expect(app.registry.has('sync')).toBe(false);
    expect(app.seen.filter((event) => event.type === 'finished')).toEqual([
      expect.objectContaining({ jobId: 1, reason: 'shutdown' }),
    ]);
  });

  it.each(['tick', 'syncTick', 'remove'] as const)(
    '%s() of an unknown name rejects with a PeriodicNotFoundError that suggests the nearest name',
    async (call) => {
      const { app } = await appWithJob();
      const answer = app.registry[call]('synk');
      await expect(answer).rejects.toThrow(PeriodicNotFoundError);
      await expect(answer).rejects.toThrow(
        `PeriodicRegistry.${call}("synk"): no job has this name; did you mean "sync"?`,
      );
    },
  );
});
