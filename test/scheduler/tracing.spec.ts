// The tracing channel `nestjs-periodic:run` (docs/health-and-telemetry.md): what a subscriber sees of runs
// that return, resolve, throw and reject, and an AsyncLocalStorage bound to it inside the run.
import { AsyncLocalStorage } from 'node:async_hooks';
import { tracingChannel } from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import type { PeriodicRunTrace } from '../../lib/scheduler/run.js';
import { PeriodicAbortError } from '../../lib/scheduler/errors.js';
import { flush, honouringRun, runsInTurn, startScheduler, stuckRun } from './helpers.js';

// Stores bound to it here hold strings.
const runs = tracingChannel<string, PeriodicRunTrace>('nestjs-periodic:run');

/** Every message of the channel, as `[channel, { ...context }]`, copied when published. */
function record(): { seen: [string, PeriodicRunTrace][]; stop: () => void } {
  const seen: [string, PeriodicRunTrace][] = [];
  const on = (name: string) => (message: PeriodicRunTrace) => seen.push([name, { ...message }]);
  const handlers = {
    start: on('start'),
    end: on('end'),
    asyncStart: on('asyncStart'),
    asyncEnd: on('asyncEnd'),
    error: on('error'),
  };
  runs.subscribe(handlers);
  return { seen, stop: () => runs.unsubscribe(handlers) };
}

let stop = (): void => undefined;
afterEach(() => stop());

describe("the tracing channel 'nestjs-periodic:run'", () => {
  it('a run that returns: start, end, with the run as context and its result', async () => {
    const recorded = record();
    stop = recorded.stop;
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual', run: () => 42 });
    await scheduler.syncTick();
    const [[, start]] = recorded.seen;
    expect(recorded.seen.map(([name]) => name)).toEqual(['start', 'end']);
    expect(start).toEqual({
      name: 'job',
      jobId: 1,
      scheduledAt: expect.any(Number),
      fencingToken: undefined,
    });
    expect(recorded.seen[1][1].result).toBe(42);
  });

  it('a run that resolves: start, end, then asyncStart and asyncEnd with its value', async () => {
    const recorded = record();
    stop = recorded.stop;
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual', run: async () => 'done' });
    await scheduler.syncTick();
    expect(recorded.seen.map(([name]) => name)).toEqual(['start', 'end', 'asyncStart', 'asyncEnd']);
    expect(recorded.seen[3][1].result).toBe('done');
  });

  it('a run that rejects: error with the reason, then asyncStart and asyncEnd', async () => {
    const recorded = record();
    stop = recorded.stop;
    const failure = new Error('disk full');
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual', run: () => Promise.reject(failure) });
    expect(await scheduler.syncTick()).toMatchObject({ reason: 'error', error: failure });
    expect(recorded.seen.map(([name]) => name)).toEqual(['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
    expect(recorded.seen[2][1].error).toBe(failure);
  });

  it('a run that throws: error, end; the run still ends as an error', async () => {
    const recorded = record();
    stop = recorded.stop;
    const failure = new Error('disk full');
    const { scheduler } = startScheduler({
      every: 1000,
      mode: 'manual',
      run: () => {
        throw failure;
      },
    });
    expect(await scheduler.syncTick()).toMatchObject({ reason: 'error', error: failure });
    expect(recorded.seen.map(([name]) => name)).toEqual(['start', 'error', 'end']);
  });

  it("a thenable's then is called once: a query builder that runs on then runs once", async () => {
    const recorded = record();
    stop = recorded.stop;
    let executions = 0;
    const query = {
      then(resolve: (rows: string) => unknown, reject: (error: unknown) => unknown) {
        executions++;
        return Promise.resolve('rows').then(resolve, reject);
      },
    };
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual', run: () => query });
    expect(await scheduler.syncTick()).toMatchObject({ reason: 'normal' });
    expect(executions).toBe(1);
    expect(recorded.seen.at(-1)).toEqual(['asyncEnd', expect.objectContaining({ result: 'rows' })]);
  });

  it('a run stopped as a failure and abandoned ends its trace then: error (its abort reason), asyncStart, asyncEnd', async () => {
    const recorded = record();
    stop = recorded.stop;
    const { scheduler } = startScheduler({
      every: 1000,
      mode: 'manual',
      timeout: 5,
      jobShutdown: 'brutalKill',
      run: stuckRun,
    });
    expect(await scheduler.syncTick()).toMatchObject({ reason: 'timeout' });
    expect(recorded.seen.map(([name]) => name)).toEqual(['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
    const [, ended] = recorded.seen[4];
    expect(ended.exitReason).toBe('timeout');
    expect(ended.error).toBeInstanceOf(PeriodicAbortError);
    expect((ended.error as PeriodicAbortError).reason).toBe('timeout');
  });

  it('a run killed by stopPrevious ends its trace when killed, once, however it settles later', async () => {
    const recorded = record();
    stop = recorded.stop;
    const { runs, run } = runsInTurn(2);
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual', onOverlap: 'stopPrevious', run });
    await scheduler.tick();
    await scheduler.tick();
    runs[0].resolve();
    await flush();
    const first = recorded.seen.filter(([, trace]) => trace.jobId === 1);
    expect(first.map(([name]) => name)).toEqual(['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
    expect(first[4][1]).toMatchObject({ exitReason: 'killed', error: expect.any(PeriodicAbortError) });
    expect(first[4][1]).not.toHaveProperty('result');
    runs[1].resolve();
    await flush();
  });

  it('a run shut down within its grace ends its trace with no error', async () => {
    const recorded = record();
    stop = recorded.stop;
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual', run: honouringRun });
    await scheduler.tick();
    await scheduler.stop();
    expect(recorded.seen.map(([name]) => name)).toEqual(['start', 'end', 'asyncStart', 'asyncEnd']);
    expect(recorded.seen[3][1]).toMatchObject({ exitReason: 'shutdown' });
  });

  it('an AsyncLocalStorage bound with bindStore holds its value inside the run, after awaits too', async () => {
    const store = new AsyncLocalStorage<string>();
    runs.start.bindStore(store, (trace) => `${trace.name}#${trace.jobId}`);
    const recorded = record();
    stop = () => {
      recorded.stop();
      runs.start.unbindStore(store);
    };
    const inside: (string | undefined)[] = [];
    const { scheduler } = startScheduler({
      every: 1000,
      mode: 'manual',
      run: async () => {
        inside.push(store.getStore());
        await new Promise((resolve) => setTimeout(resolve, 1));
        inside.push(store.getStore());
      },
    });
    await scheduler.syncTick();
    await scheduler.syncTick();
    expect(inside).toEqual(['job#1', 'job#1', 'job#2', 'job#2']);
    expect(store.getStore()).toBeUndefined();
  });

  it('exclusive runs carry their fencing token', async () => {
    const recorded = record();
    stop = recorded.stop;
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const { scheduler, log } = startScheduler({ every: 1000, mode: 'manual', exclusive: true, coordinator });
    await flush();
    await scheduler.syncTick();
    expect(recorded.seen[0][1].fencingToken).toBe(log.of('leaseAcquired')[0].fencingToken);
    await scheduler.stop();
  });

  it('without subscribers nothing is published, and runs are not wrapped', async () => {
    expect(runs.hasSubscribers).toBe(false);
    const { scheduler } = startScheduler({ every: 1000, mode: 'manual', run: () => undefined });
    expect(await scheduler.syncTick()).toMatchObject({ ok: true, reason: 'normal' });
  });
});
