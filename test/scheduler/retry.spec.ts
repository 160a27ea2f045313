// Retries (SPEC 19): a run that ends 'error' or 'timeout' runs again as the same slot, after a backoff, up to
// `attempts` more times; a slot that fails after its last attempt counts once; a pending retry is the slot's work
// for the overlap policy, and stop, pause and a lost lease cancel it.
import { describe, expect, it, jest } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/coordinators/in-memory.js';
import { PeriodicConfigError } from '../../lib/scheduler/errors.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import { StoreLog } from '../../lib/scheduler/store-log.js';
import { Replica } from '../../lib/scheduler/replica.js';
import { spreadOver } from '../../lib/scheduler/spread.js';
import { advance, EventLog, flush, startScheduler, useFakeTimers } from './helpers.js';

useFakeTimers();

const fails = (times: number) => {
  let calls = 0;
  return (context: PeriodicContext) => {
    calls++;
    if (calls <= times) throw new Error(`attempt ${context.attempt} failed`);
  };
};

describe('retries', () => {
  it('run again as the same slot after initial · factor^(n−1) ms ±10%, with ctx.attempt; the slot ends on success', async () => {
    const contexts: { attempt: number; slot: number; jobId: number }[] = [];
    const failing = fails(2);
    const { scheduler, log } = startScheduler({
      every: 60_000,
      retry: { attempts: 3, backoff: { initial: 1000, factor: 2, max: 30_000 } },
      run: (context) => {
        contexts.push({
          attempt: context.attempt,
          slot: context.scheduledDate.getTime(),
          jobId: context.jobId,
        });
        failing(context);
      },
    });
    await advance(60_000);
    const [first] = log.of('retrying');
    expect(first).toMatchObject({
      type: 'retrying',
      name: 'job',
      jobId: 1,
      attempt: 2,
      error: expect.any(Error),
    });
    expect(first.inMs).toBeGreaterThanOrEqual(900);
    expect(first.inMs).toBeLessThanOrEqual(1100);
    await advance(first.inMs);
    const second = log.of('retrying')[1];
    expect(second).toMatchObject({ jobId: 2, attempt: 3 });
    expect(second.inMs).toBeGreaterThanOrEqual(1800);
    expect(second.inMs).toBeLessThanOrEqual(2200);
    await advance(second.inMs);
    expect(contexts.map(({ attempt, jobId }) => [jobId, attempt])).toEqual([
      [1, 1],
      [2, 2],
      [3, 3],
    ]);
    expect(new Set(contexts.map(({ slot }) => slot)).size).toBe(1);
    expect(log.types().filter((type) => type !== 'nextTick')).toEqual([
      'started',
      'finished',
      'retrying',
      'started',
      'finished',
      'retrying',
      'started',
      'finished',
    ]);
    expect(scheduler.status()).toMatchObject({
      consecutiveFailures: 0,
      counts: { started: 3, error: 2, normal: 1 },
    });
    const history = await scheduler.history();
    expect(history.map(({ origin, attempt, reason }) => [origin, attempt, reason])).toEqual([
      ['retry', 3, 'normal'],
      ['retry', 2, 'error'],
      ['schedule', 1, 'error'],
    ]);
    expect(new Set(history.map(({ slot }) => slot?.getTime())).size).toBe(1);
    await scheduler.stop();
  });

  it("a slot that fails after its last attempt counts once; 'timeout' retries, 'shutdown' does not", async () => {
    const { scheduler, log } = startScheduler({
      every: 60_000,
      timeout: 100,
      jobShutdown: 'brutalKill',
      retry: { attempts: 2, backoff: { initial: 10, factor: 1, max: 10 } },
      run: () => new Promise(() => undefined),
    });
    await advance(60_000 + 100 + 11 + 100 + 11 + 100);
    expect(log.of('finished').map((event) => event.reason)).toEqual(['timeout', 'timeout', 'timeout']);
    expect(log.of('retrying')).toHaveLength(2);
    // A run that timed out without throwing: its signal's reason.
    expect(log.of('retrying')[0].error).toMatchObject({ name: 'PeriodicAbortError', reason: 'timeout' });
    expect(scheduler.status()).toMatchObject({ consecutiveFailures: 1, counts: { started: 3, timeout: 3 } });
    await advance(60_000 + 400);
    expect(scheduler.status().consecutiveFailures).toBe(2);
    // A run stopped by the shutdown is not retried: the third slot's first run is in flight at 180,022 ms.
    await advance(59_300);
    expect(scheduler.running).toBe(1);
    await scheduler.stop();
    expect(log.of('finished').at(-1)?.reason).toBe('killed');
    expect(log.of('retrying')).toHaveLength(4);
  });

  it("an exclusive job's slot that fails after its last attempt counts once across the fleet too", async () => {
    const { scheduler, log } = startScheduler({
      every: 60_000,
      exclusive: true,
      coordinator: new InMemoryCoordinator(),
      retry: { attempts: 2, backoff: { initial: 10, factor: 1, max: 10 } },
      run: fails(100),
    });
    await advance(60_000 + 11 + 11);
    expect(log.of('finished').map((event) => event.reason)).toEqual(['error', 'error', 'error']);
    await flush();
    expect(scheduler.status().consecutiveFailures).toBe(1);
    expect((await scheduler.fleetStatus()).consecutiveFailures).toBe(1);
    await advance(60_000 + 11 + 11);
    await flush();
    expect((await scheduler.fleetStatus()).consecutiveFailures).toBe(2);
    await scheduler.stop();
  });

  it('the wait is capped at max', async () => {
    const { scheduler, log } = startScheduler({
      every: 600_000,
      retry: { attempts: 4, backoff: { initial: 1000, factor: 10, max: 5000 } },
      run: fails(10),
    });
    await advance(600_000);
    for (let i = 0; i < 4; i++) await advance(log.of('retrying').at(-1)!.inMs);
    const waits = log.of('retrying').map((event) => event.inMs);
    expect(waits).toHaveLength(4);
    expect(waits.slice(1).every((wait) => wait >= 4500 && wait <= 5500)).toBe(true);
    await scheduler.stop();
  });

  it("with 'ignore', a tick that comes while a retry waits is skipped: the slot's work still runs", async () => {
    const { scheduler, log } = startScheduler({
      every: 1000,
      onOverlap: 'ignore',
      retry: { attempts: 1, backoff: { initial: 1500, factor: 1, max: 1500 } },
      run: fails(1),
    });
    await advance(1000);
    expect(log.of('retrying')).toHaveLength(1);
    await advance(1000);
    expect(log.of('skipped')).toEqual([{ type: 'skipped', name: 'job', stillRunning: 1 }]);
    await advance(700);
    expect(log.of('started').map((event) => event.jobId)).toEqual([1, 2]);
    await scheduler.stop();
  });

  it("with 'stopPrevious', a tick cancels the retry that waits; the slot counts as failed", async () => {
    const attempts: number[] = [];
    let calls = 0;
    const { scheduler, log } = startScheduler({
      every: 10_000,
      onOverlap: 'stopPrevious',
      retry: { attempts: 1, backoff: { initial: 800, factor: 1, max: 800 } },
      run: ({ attempt }) => {
        attempts.push(attempt);
        if (++calls !== 2) throw new Error('failed');
      },
    });
    await advance(10_000);
    expect(log.of('retrying')).toHaveLength(1);
    // A triggered tick, while the retry waits: the retry is cancelled, and never runs.
    expect(await scheduler.trigger()).toEqual({ ok: true, jobId: 2 });
    await advance(2000);
    expect(attempts).toEqual([1, 1]);
    expect(scheduler.status()).toMatchObject({
      consecutiveFailures: 0,
      counts: { started: 2, error: 1, normal: 1 },
    });
    await scheduler.stop();
  });

  it("with 'stopPrevious', a run in its timeout's grace that the next slot replaces is not retried", async () => {
    const attempts: number[] = [];
    const { scheduler, log } = startScheduler({
      every: 1000,
      timeout: 300,
      jobShutdown: 2000,
      onOverlap: 'stopPrevious',
      retry: { attempts: 1, backoff: { initial: 100, factor: 1, max: 100 } },
      // Runs that ignore their signal: the first is still in its grace when the next slot comes.
      run: ({ attempt }) => {
        attempts.push(attempt);
        return new Promise(() => undefined);
      },
    });
    await advance(2000);
    expect(log.of('finished')).toMatchObject([{ jobId: 1, reason: 'timeout' }]);
    expect(log.of('retrying')).toEqual([]);
    await advance(200);
    // No retry of the first slot came to kill the second slot's run.
    expect(attempts).toEqual([1, 1]);
    expect(log.of('finished')).toHaveLength(1);
    expect(scheduler.status().consecutiveFailures).toBe(1);
    const stopped = scheduler.stop();
    await advance(2000);
    await stopped;
  });

  it("with 'run', the next slot runs beside a retry that waits", async () => {
    const { scheduler, log } = startScheduler({
      every: 1000,
      retry: { attempts: 1, backoff: { initial: 1500, factor: 1, max: 1500 } },
      run: fails(1),
    });
    await advance(2700);
    expect(log.of('started').map((event) => event.jobId)).toEqual([1, 2, 3]);
    expect(log.of('skipped')).toEqual([]);
    await scheduler.stop();
  });

  it('pause and stop cancel a retry that waits', async () => {
    const paused = startScheduler({ every: 60_000, retry: { attempts: 3 }, run: fails(10) });
    await advance(60_000);
    await paused.scheduler.pause();
    await advance(5000);
    expect(paused.log.of('started')).toHaveLength(1);
    expect(paused.scheduler.status().consecutiveFailures).toBe(1);
    await paused.scheduler.stop();

    const stopped = startScheduler({ every: 60_000, retry: { attempts: 3 }, run: fails(10) });
    await advance(60_000);
    await stopped.scheduler.stop();
    await advance(5000);
    expect(stopped.log.of('started')).toHaveLength(1);
  });

  it("a fleet's pause that the store refuses leaves the retry that waits; one due while it was asked runs then", async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const { scheduler, log } = startScheduler({
      every: 60_000,
      exclusive: true,
      coordinator,
      retry: { attempts: 2, backoff: { initial: 500, factor: 1, max: 500 } },
      run: fails(2),
    });
    await advance(60_000);
    const operate = jest.spyOn(coordinator, 'operate').mockRejectedValueOnce(new Error('connection reset'));
    await expect(scheduler.pause()).rejects.toThrow('nothing changed');
    await advance(600);
    expect(log.of('started').map(({ jobId }) => jobId)).toEqual([1, 2]);
    // The second retry's wait ends while the store is asked, which refuses the pause 800 ms later.
    operate.mockImplementationOnce(
      () => new Promise((_, reject) => setTimeout(() => reject(new Error('connection reset')), 800)),
    );
    const refused = expect(scheduler.pause()).rejects.toThrow('nothing changed');
    await advance(700);
    expect(log.of('started')).toHaveLength(2);
    await advance(100);
    await refused;
    expect(log.of('started')).toHaveLength(3);
    expect(scheduler.status()).toMatchObject({ state: 'ticking', consecutiveFailures: 0 });
    await scheduler.stop();
  });

  it("a fleet's pause asked by a retrying listener, and refused, leaves the retry to come", async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const log = new EventLog();
    let pausing: Promise<void> | undefined;
    const scheduler = new PeriodicScheduler(
      {
        name: 'job',
        every: 60_000,
        exclusive: true,
        coordinator,
        retry: { attempts: 1, backoff: { initial: 500, factor: 1, max: 500 } },
        run: fails(1),
      },
      (event) => {
        log.sink(event);
        if (event.type === 'retrying') pausing = scheduler.pause().catch(() => undefined);
      },
    );
    scheduler.start();
    jest.spyOn(coordinator, 'operate').mockRejectedValueOnce(new Error('connection reset'));
    await advance(60_000);
    await pausing;
    await advance(600);
    expect(log.of('started').map(({ jobId }) => jobId)).toEqual([1, 2]);
    expect(scheduler.status()).toMatchObject({ state: 'ticking', consecutiveFailures: 0 });
    await scheduler.stop();
  });

  it('a lease handed over to a replica that joins waits for the retry of its slot, which runs before it goes', async () => {
    const store = new InMemoryCoordinator({ leaseMs: 3000 });
    const replicas = ['r1', 'r2'].map(
      (name) => new Replica(new StoreLog(store, { error: () => undefined, log: () => undefined }), name),
    );
    // The first replica to start is the one the spread does not give the job: the other takes it on joining.
    if (spreadOver(['job'], [replicas[0].owner, replicas[1].owner]).get('job') === replicas[0].owner) {
      replicas.reverse();
    }
    const runs: { replica: string; attempt: number; slot: number }[] = [];
    const [first, joining] = replicas.map((replica) => {
      const log = new EventLog();
      const scheduler = new PeriodicScheduler(
        {
          name: 'job',
          every: 60_000,
          exclusive: true,
          coordinator: store,
          retry: { attempts: 1, backoff: { initial: 5000, factor: 1, max: 5000 } },
          run: ({ attempt, scheduledDate }) => {
            runs.push({ replica: replica.name, attempt, slot: scheduledDate.getTime() });
            if (attempt === 1 && runs.length === 1) throw new Error('failed');
          },
        },
        log.sink,
        { replica },
      );
      return { scheduler, log, name: replica.name };
    });
    first.scheduler.start();
    await advance(60_000);
    expect(first.log.of('retrying')).toHaveLength(1);
    joining.scheduler.start();
    await advance(2000);
    // The lease waits for the retry, which runs where its slot failed.
    expect(joining.scheduler.status().lease?.held).toBe(false);
    await advance(4000);
    expect(runs.map(({ replica, attempt }) => [replica, attempt])).toEqual([
      [first.name, 1],
      [first.name, 2],
    ]);
    expect(runs[1].slot).toBe(runs[0].slot);
    expect(first.scheduler.status().consecutiveFailures).toBe(0);
    // Then the joining replica holds it, and runs the next slot.
    await advance(2000);
    expect(joining.scheduler.status().lease?.held).toBe(true);
    await advance(60_000);
    expect(runs.slice(2)).toEqual([{ replica: joining.name, attempt: 1, slot: runs[0].slot + 60_000 }]);
    await Promise.all([first.scheduler.stop(), joining.scheduler.stop()]);
  });

  it('a lost lease cancels the retry of an exclusive job', async () => {
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const { scheduler, log } = startScheduler({
      every: 60_000,
      exclusive: true,
      coordinator,
      retry: { attempts: 3, backoff: { initial: 5000 } },
      run: fails(10),
    });
    await advance(60_000);
    expect(log.of('retrying')).toHaveLength(1);
    jest.spyOn(coordinator, 'heartbeat').mockRejectedValue(new Error('connection reset'));
    await advance(1000);
    expect(log.of('leaseLost')).toHaveLength(1);
    await advance(6000);
    expect(log.of('started')).toHaveLength(1);
    expect(scheduler.status().consecutiveFailures).toBe(1);
    await scheduler.stop();
  });

  it('refuses options that make no retry, naming the job, the option and the value', () => {
    for (const [retry, message] of [
      [
        { attempts: -1 },
        '"retry": "attempts" must be an integer from 0 to 100 (how many times a failed run runs again), got -1',
      ],
      [
        { attempts: 1.5 },
        '"retry": "attempts" must be an integer from 0 to 100 (how many times a failed run runs again), got 1.5',
      ],
      [
        { attempts: 1, backoff: { initial: 0 } },
        '"retry.backoff": "initial" must be an integer number of milliseconds ≥ 1, got 0',
      ],
      [
        { attempts: 1, backoff: { max: 500 } },
        '"retry.backoff.max" must be at least "initial" (1000ms, its default), got 500',
      ],
      [
        { attempts: 1, backoff: { initial: 70_000 } },
        '"retry.backoff.initial" must be at most "max" (60000ms, its default), got 70000',
      ],
      [
        { attempts: 101 },
        '"retry": "attempts" must be an integer from 0 to 100 (how many times a failed run runs again), got 101',
      ],
      [
        { attempts: 1e9 },
        '"retry": "attempts" must be an integer from 0 to 100 (how many times a failed run runs again), got 1000000000',
      ],
      [
        { attempts: 1, backoff: { factor: 0.5 } },
        '"retry.backoff": "factor" must be a number from 1 to 100, got 0.5',
      ],
      [
        { attempts: 1, backoff: { factor: 101 } },
        '"retry.backoff": "factor" must be a number from 1 to 100, got 101',
      ],
      [{ attempts: 1, attemps: 2 }, '"retry": unknown option "attemps"; did you mean "attempts"?'],
      [
        { attempts: 1, backoff: { inital: 5 } },
        '"retry.backoff": unknown option "inital"; did you mean "initial"?',
      ],
      [3, '"retry" must be an object { attempts, backoff?: { initial, factor, max } }, got 3'],
    ] as const) {
      const make = () =>
        new PeriodicScheduler({ name: 'job', every: 1000, retry: retry as never, run: () => undefined });
      expect(make).toThrow(PeriodicConfigError);
      expect(make).toThrow(`job "job": ${message}`);
    }
    // The next slot would cancel every retry.
    expect(
      () =>
        new PeriodicScheduler({
          name: 'job',
          every: 1000,
          onOverlap: 'stopPrevious',
          retry: { attempts: 1, backoff: { initial: 1000 } },
          run: () => undefined,
        }),
    ).toThrow(
      /"retry" with onOverlap 'stopPrevious' waits 1000ms \(backoff.initial\) before its first retry/,
    );
    // A cron job: its shortest gap between slots.
    expect(
      () =>
        new PeriodicScheduler({
          name: 'job',
          cron: '* * * * * *',
          timezone: 'UTC',
          onOverlap: 'stopPrevious',
          retry: { attempts: 1 },
          run: () => undefined,
        }),
    ).toThrow(/not less than the shortest gap between the slots of "cron" \(1000ms\)/);
    // attempts defaults to 0, as the SPEC says.
    expect(
      new PeriodicScheduler({ name: 'job', every: 1000, retry: {}, run: () => undefined }).options.retry,
    ).toEqual({
      attempts: 0,
      backoff: { initial: 1000, factor: 2, max: 60_000 },
    });
  });
});

describe('the context and the trace', () => {
  it('ctx.attempt is 1 for the first run of a slot', async () => {
    const attempts: number[] = [];
    const { scheduler } = startScheduler({ every: 100, run: ({ attempt }) => void attempts.push(attempt) });
    await advance(300);
    await flush();
    expect(attempts).toEqual([1, 1, 1]);
    await scheduler.stop();
  });
});

describe("delivery: 'atLeastOnce'", () => {
  /** A replica's way to the shared store, which can freeze: its steps then never answer, as from a dead process. */
  function wayTo(
    store: InMemoryCoordinator,
    historyDelay = 0,
  ): { coordinator: InMemoryCoordinator; freeze(): void } {
    let frozen = false;
    const coordinator = new Proxy(store, {
      get(target, key) {
        const value: unknown = Reflect.get(target, key);
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          if (frozen) return new Promise(() => undefined);
          if (key === 'readHistory' && historyDelay > 0) {
            await new Promise((resolve) => setTimeout(resolve, historyDelay));
          }
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    return { coordinator, freeze: () => (frozen = true) };
  }

  /** Stops every replica; a frozen one gives up on the store after `leaseMs / 3`. */
  async function stopAll(schedulers: { scheduler: PeriodicScheduler }[]): Promise<void> {
    const stopped = Promise.all(schedulers.map(({ scheduler }) => scheduler.stop()));
    await advance(3000);
    await stopped;
  }

  /** Two replicas of a job every 10 s whose first run never ends; the first `started` of them started. */
  function replicas(
    delivery: 'atLeastOnce' | 'atMostOnce',
    {
      onOverlap,
      started = 2,
      historyDelay,
    }: { onOverlap?: 'run' | 'ignore' | 'stopPrevious'; started?: number; historyDelay?: number } = {},
  ) {
    const store = new InMemoryCoordinator({ leaseMs: 3000 });
    const ways = [wayTo(store, historyDelay), wayTo(store, historyDelay)];
    const contexts: { replica: number; attempt: number; slot: number; fencingToken: number }[] = [];
    const schedulers = ways.map(({ coordinator }, replica) => {
      const log = new EventLog();
      const scheduler = new PeriodicScheduler(
        {
          name: 'job',
          every: 10_000,
          exclusive: true,
          delivery,
          onOverlap,
          coordinator,
          jobShutdown: 'brutalKill',
          run: (context) => {
            contexts.push({
              replica,
              attempt: context.attempt,
              slot: context.scheduledDate.getTime(),
              fencingToken: context.fencingToken!,
            });
            // The first run never ends; the others take 500 ms.
            if (contexts.length === 1) return new Promise(() => undefined);
            return new Promise((resolve) => setTimeout(resolve, 500));
          },
        },
        log.sink,
        {
          replica: new Replica(
            new StoreLog(coordinator, { error: () => undefined, log: () => undefined }),
            `r${replica}`,
          ),
        },
      );
      if (replica < started) scheduler.start();
      return { scheduler, log };
    });
    return { ways, contexts, schedulers };
  }

  it('the next holder runs again, at once, the slot whose holder died mid-run: the next attempt, a greater token', async () => {
    const { ways, contexts, schedulers } = replicas('atLeastOnce');
    await advance(10_100);
    expect(contexts).toHaveLength(1);
    const [{ replica: holder, slot, fencingToken }] = contexts;
    // The holder's process is gone: nothing it does reaches the store any more.
    ways[holder].freeze();
    await advance(4000);
    expect(contexts).toHaveLength(2);
    expect(contexts[1]).toEqual({ replica: 1 - holder, attempt: 2, slot, fencingToken: expect.any(Number) });
    expect(contexts[1].fencingToken).toBeGreaterThan(fencingToken);
    const [recovered] = await schedulers[1 - holder].scheduler.history({ limit: 1 });
    expect(recovered).toMatchObject({
      origin: 'recovery',
      attempt: 2,
      reason: 'normal',
      replica: `r${1 - holder}`,
    });
    // The next slot runs as usual, once.
    await advance(10_000);
    expect(contexts.slice(2).map(({ attempt, slot: next }) => [attempt, next - slot])).toEqual([[1, 10_000]]);
    await stopAll(schedulers);
  });

  it("after the whole fleet was down across slots, the recovery comes first, then the latest slot's tick as onOverlap says", async () => {
    for (const onOverlap of ['ignore', 'run'] as const) {
      // A store that takes 100 ms to read a history: the latest slot's tick comes meanwhile, and waits.
      const { ways, contexts, schedulers } = replicas('atLeastOnce', {
        onOverlap,
        started: 1,
        historyDelay: 100,
      });
      await advance(10_100);
      expect(contexts).toHaveLength(1);
      const [{ slot }] = contexts;
      ways[0].freeze();
      // Down across two more slots; then the other replica starts, and takes the lease at once: the recovery
      // runs, and the latest slot's tick comes while it does.
      await advance(25_000);
      const [, second] = schedulers;
      second.scheduler.start();
      await advance(1000);
      const ran = contexts.slice(1).map(({ attempt, slot: of }) => [attempt, of - slot]);
      if (onOverlap === 'ignore') {
        expect(ran).toEqual([[2, 0]]);
        expect(second.log.of('skipped')).toHaveLength(1);
      } else
        expect(ran).toEqual([
          [2, 0],
          [1, 20_000],
        ]);
      expect(second.log.of('missed')).toEqual([{ type: 'missed', name: 'job', count: 1 }]);
      await stopAll(schedulers);
    }
  });

  it("with 'atMostOnce' (the default), the slot is not run again", async () => {
    const { ways, contexts, schedulers } = replicas('atMostOnce');
    await advance(10_100);
    ways[contexts[0].replica].freeze();
    await advance(4000);
    expect(contexts).toHaveLength(1);
    await stopAll(schedulers);
  });

  it('needs an exclusive job and the run history', () => {
    expect(
      () =>
        new PeriodicScheduler({ name: 'job', every: 1000, delivery: 'atLeastOnce', run: () => undefined }),
    ).toThrow(/job "job": "delivery" 'atLeastOnce' applies to exclusive jobs only/);
    const coordinator = new InMemoryCoordinator();
    expect(
      () =>
        new PeriodicScheduler(
          {
            name: 'job',
            every: 1000,
            exclusive: true,
            coordinator,
            delivery: 'atLeastOnce',
            run: () => undefined,
          },
          undefined,
          { history: false },
        ),
    ).toThrow(/"delivery" 'atLeastOnce' needs the fleet's run history.*history: false/);
    expect(
      () =>
        new PeriodicScheduler({
          name: 'job',
          every: 1000,
          delivery: 'always' as never,
          run: () => undefined,
        }),
    ).toThrow(/"delivery" must be 'atMostOnce' or 'atLeastOnce', got "always"/);
  });
});
