// Stored schedules (SPEC 23) on the in-memory coordinator: replicas of an application in one process, sharing it.
// Created, edited and removed by any replica, seen by every one, each slot run once for the fleet with its data.
import { afterEach, describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import {
  InMemoryCoordinator,
  Periodic,
  PeriodicConfigError,
  PeriodicConflictError,
  type PeriodicContext,
  PeriodicHandler,
  PeriodicModule,
} from '../../lib/index.js';
import { until, useApps } from './helpers.js';
import { JobHealth } from '../../lib/nest/health.js';
import { listOf, PAGE_ROWS } from '../../lib/dashboard/views.js';

const LEASE_MS = 600;
/**
 * How long a test waits for a change to reach another replica: it comes within leaseMs (a notification, or the
 * count its heartbeat reads every leaseMs / 3), and a loaded machine's pauses come on top.
 */
const SEEN_WITHIN = 4 * LEASE_MS;

interface Ran {
  replica: string;
  name: string;
  data: unknown;
  jobId: number;
  slot: number;
}

describe('stored schedules on the in-memory coordinator', () => {
  const createApp = useApps();
  let coordinator: InMemoryCoordinator;
  let ran: Ran[];
  afterEach(() => {
    ran = [];
  });

  /** A replica named `replica` with the handlers `handlers` (by default 'tenant-report'). */
  async function replica(name: string, handlers: string[] = ['tenant-report']) {
    const runs = ran;
    @Injectable()
    class Reports {
      @PeriodicHandler('tenant-report')
      send(ctx: PeriodicContext<{ tenantId: string }>): void {
        runs.push({
          replica: name,
          name: ctx.name,
          data: ctx.data,
          jobId: ctx.jobId,
          slot: ctx.scheduledDate.getTime(),
        });
      }

      @Periodic({ every: 60_000, name: 'Reports.cleanup' })
      cleanup(ctx: PeriodicContext): void {
        runs.push({
          replica: name,
          name: ctx.name,
          data: ctx.data,
          jobId: ctx.jobId,
          slot: ctx.scheduledDate.getTime(),
        });
      }
    }
    @Injectable()
    class Other {
      @PeriodicHandler('sync')
      sync(): void {}
    }
    const providers = handlers.includes('tenant-report') ? [Reports, Other] : [Other];
    return createApp({
      imports: [PeriodicModule.forRoot({ coordinator, replica: name, logger: false })],
      providers,
    });
  }

  function fresh(): void {
    coordinator = new InMemoryCoordinator({ leaseMs: LEASE_MS });
    ran = [];
  }

  it('a schedule upserted on one replica runs once per slot for the fleet, with its data, and every replica has it', async () => {
    fresh();
    const [a, b] = [await replica('a'), await replica('b')];
    const stored = await a.registry.schedules.upsert(
      { name: 'report:acme', handler: 'tenant-report', every: 300, data: { tenantId: 'acme' } },
      { by: 'alice' },
    );
    expect(stored).toEqual({
      name: 'report:acme',
      handler: 'tenant-report',
      every: 300,
      data: { tenantId: 'acme' },
      version: 1,
      createdAt: expect.any(Date),
      updatedAt: stored.createdAt,
      updatedBy: 'alice',
    });
    // The replica that wrote it has it when upsert resolves; the other within leaseMs.
    expect(a.registry.has('report:acme')).toBe(true);
    await until(() => (b.registry.has('report:acme') ? true : undefined), SEEN_WITHIN);
    await until(() => (ran.filter((run) => run.name === 'report:acme').length >= 4 ? true : undefined));
    const runs = ran.filter((run) => run.name === 'report:acme');
    expect(runs.every((run) => (run.data as { tenantId: string }).tenantId === 'acme')).toBe(true);
    // Each run once: no jobId twice from one replica, and one holder at a time.
    const ids = runs.map((run) => `${run.replica}#${run.jobId}`);
    expect(new Set(ids).size).toBe(ids.length);
    expect(a.registry.status('report:acme').lease).not.toBeNull();
    expect(a.seen).toContainEqual(
      expect.objectContaining({
        type: 'operated',
        name: 'report:acme',
        action: 'create',
        by: 'alice',
        replica: 'a',
      }),
    );
    expect(await b.registry.audit('report:acme')).toEqual([
      expect.objectContaining({ action: 'create', by: 'alice', replica: 'a' }),
    ]);
    // A decorated job's ctx.data is undefined.
    await a.registry.trigger('Reports.cleanup');
    expect(ran.find((run) => run.name === 'Reports.cleanup')).toMatchObject({ data: undefined });
  });

  it("an unbounded timeout is stored and read back as Infinity; the data's own 'Infinity' text stays text", async () => {
    fresh();
    const a = await replica('a');
    const data = { timeout: 'Infinity', jobShutdown: 'Infinity', nested: { timeout: 'Infinity' } };
    await a.registry.schedules.upsert({
      name: 'report:acme',
      handler: 'tenant-report',
      every: 300,
      timeout: Infinity,
      jobShutdown: Infinity,
      data,
    });
    expect(await a.registry.schedules.get('report:acme')).toMatchObject({
      timeout: Infinity,
      jobShutdown: Infinity,
      data,
    });
    expect(a.registry.get('report:acme').options).toMatchObject({ timeout: Infinity, jobShutdown: Infinity });
    const run = await until(() => ran.find((one) => one.name === 'report:acme'));
    expect(run.data).toEqual(data);
  });

  it('ifVersion refuses a stale change with a PeriodicConflictError that says the version now', async () => {
    fresh();
    const a = await replica('a');
    const one = {
      name: 'report:acme',
      handler: 'tenant-report',
      cron: '0 8 * * 1-5',
      timezone: 'Europe/Paris',
    };
    await expect(a.registry.schedules.upsert(one, { ifVersion: 3 })).rejects.toMatchObject({
      name: 'PeriodicConflictError',
      currentVersion: null,
    });
    expect((await a.registry.schedules.upsert(one, { ifVersion: 0 })).version).toBe(1);
    expect((await a.registry.schedules.upsert({ ...one, data: { n: 1 } }, { ifVersion: 1 })).version).toBe(2);
    const stale = a.registry.schedules.upsert({ ...one, data: { n: 2 } }, { ifVersion: 1 });
    await expect(stale).rejects.toBeInstanceOf(PeriodicConflictError);
    await expect(stale).rejects.toMatchObject({ currentVersion: 2 });
    await expect(stale).rejects.toThrow(
      /"report:acme": version 1 was expected \(ifVersion\), but it is at version 2/,
    );
    await expect(a.registry.schedules.remove('report:acme', { ifVersion: 1 })).rejects.toMatchObject({
      currentVersion: 2,
    });
    const read = (await a.registry.schedules.get('report:acme'))!;
    expect(read).toMatchObject({ version: 2, data: { n: 1 } });
    // A schedule read back is written again as it is: what the store counts of it is left out.
    const moved = await a.registry.schedules.upsert(
      { ...read, cron: '0 9 * * 1-5' },
      { ifVersion: read.version },
    );
    expect(moved).toMatchObject({ version: 3, cron: '0 9 * * 1-5', createdAt: read.createdAt });
  });

  it('checks a definition before anything is stored: the schedule, the option, the value and the fix', async () => {
    fresh();
    const a = await replica('a');
    const upsert = (definition: unknown) => a.registry.schedules.upsert(definition as never);
    const base = { name: 'report:acme', handler: 'tenant-report', every: 1000 };
    await expect(upsert({ ...base, handler: 'tenant-reprot' })).rejects.toThrow(
      'PeriodicRegistry.schedules.upsert() of schedule "report:acme": no @PeriodicHandler("tenant-reprot") is in ' +
        'this application; did you mean "tenant-report"? The handlers are: "tenant-report", "sync".',
    );
    await expect(upsert({ ...base, name: 'Reports.cleanup' })).rejects.toThrow(
      /schedule "Reports.cleanup": the name is taken by @Periodic\(\) on Reports.cleanup/,
    );
    await expect(upsert({ ...base, data: { blob: 'x'.repeat(16 * 1024) } })).rejects.toThrow(
      /"data" is 16395 bytes as JSON, more than 16384 \(16 kB\)/,
    );
    await expect(upsert({ ...base, data: { at: new Date() } })).rejects.toThrow(
      /"data" must be a JSON value .* but data\.at is .*an object of a class/,
    );
    await expect(upsert({ ...base, every: -1 })).rejects.toThrow(/schedule "report:acme": "every" must be/);
    await expect(upsert({ ...base, every: undefined, cron: '0 25 * * *' })).rejects.toThrow(
      /schedule "report:acme": "cron"/,
    );
    await expect(upsert({ ...base, when: () => true })).rejects.toThrow(/"when" cannot be stored/);
    await expect(upsert({ ...base, exclude: () => false })).rejects.toThrow(
      /schedule "report:acme": "exclude" cannot be stored as a function; list the days/,
    );
    await expect(upsert({ ...base, checkIn: { send: () => undefined } })).rejects.toThrow(
      /schedule "report:acme": "checkIn" cannot be stored with a send function/,
    );
    await expect(upsert({ ...base, maxRuns: 0 })).rejects.toThrow(
      /schedule "report:acme": "maxRuns" must be/,
    );
    await expect(upsert({ ...base, exclusive: false })).rejects.toThrow(
      /"exclusive" must be true or left out/,
    );
    await expect(upsert({ ...base, evry: 5 })).rejects.toThrow(
      /unknown option "evry"; did you mean "every"\?/,
    );
    await expect(upsert({ ...base, name: 'a\nb' })).rejects.toThrow(PeriodicConfigError);
    // A name is written on one line, its control characters escaped, whatever the message.
    await expect(upsert({ ...base, name: 'x\u009b31mRED' })).rejects.toThrow(
      'PeriodicRegistry.schedules.upsert() of schedule "x\\u009b31mRED": "name" must be',
    );
    const circular: Record<string, unknown> = { a: 1 };
    circular.self = circular;
    await expect(upsert({ ...base, data: circular })).rejects.toThrow(
      /data\.self refers back to an object that holds it \(a circular reference\)/,
    );
    await expect(upsert({ name: 'report:acme', every: 1000 })).rejects.toThrow(
      'PeriodicRegistry.schedules.upsert() of schedule "report:acme": "handler" is required',
    );
    await expect(a.registry.schedules.upsert(base, { by: 5 as never })).rejects.toThrow(
      /^PeriodicRegistry\.schedules\.upsert\(\) of schedule "report:acme": "by" must be/,
    );
    // The fields a schedule read back has are not options: the list of options leaves them out.
    await expect(upsert({ ...base, evry: 5 })).rejects.toThrow(
      /The options are: name, handler, data, every, cron/,
    );
    await expect(upsert({ ...base, evry: 5 })).rejects.not.toThrow(/updatedBy/);
    await expect(a.registry.schedules.upsert(base, { by: 'x'.repeat(1001) })).rejects.toThrow(/"by" must be/);
    // What JSON cannot say, or a getter that throws while it is read: the data's fault, said as such.
    // eslint-disable-next-line no-sparse-arrays -- the hole is the point
    await expect(upsert({ ...base, data: [1, , 3] })).rejects.toThrow(
      /data\[1\] is a hole of a sparse array/,
    );
    const throwing = Object.defineProperty({}, 'secret', {
      enumerable: true,
      get: () => {
        throw new Error('getter boom');
      },
    });
    await expect(upsert({ ...base, data: throwing })).rejects.toThrow(
      /"data" must be a JSON value .* but reading data threw: getter boom/,
    );
    // No name has a control character: a query with one is refused on every store, not sent.
    await expect(a.registry.schedules.list({ cursor: 'abc\u0000' })).rejects.toThrow(
      /"cursor" must be a string without control characters/,
    );
    expect(await a.registry.schedules.list()).toEqual({ items: [], cursor: null });
  });

  it('a schedule takes the policies: stored, read back, and obeyed by its job on every replica', async () => {
    fresh();
    const [a, b] = [await replica('a'), await replica('b')];
    const startAt = new Date(Date.now() + 200);
    await a.registry.schedules.upsert({
      name: 'report:once',
      handler: 'tenant-report',
      every: 100,
      startAt,
      maxRuns: 2,
      exclude: ['2000-01-01', { from: '1999-12-24', to: '1999-12-26' }],
      catchUp: { runs: 'none' },
      pauseAfterFailures: 3,
    });
    expect(await b.registry.schedules.get('report:once')).toMatchObject({
      startAt: startAt.toISOString(),
      maxRuns: 2,
      exclude: ['2000-01-01', { from: '1999-12-24', to: '1999-12-26' }],
      catchUp: { runs: 'none' },
      pauseAfterFailures: 3,
    });
    await until(() => (b.registry.has('report:once') ? true : undefined), SEEN_WITHIN);
    await until(() =>
      [a, b].some((app) => app.registry.status('report:once').state === 'completed') ? true : undefined,
    );
    const runs = ran.filter((run) => run.name === 'report:once');
    expect(runs).toHaveLength(2);
    expect(runs.every((run) => run.slot >= startAt.getTime())).toBe(true);
  });

  it('a change of data keeps the job and its grid; a change of timing makes a new job with a new grid', async () => {
    fresh();
    const a = await replica('a');
    const base = { name: 'report:acme', handler: 'tenant-report', every: 200, data: { n: 1 } };
    await a.registry.schedules.upsert(base);
    const first = a.registry.get('report:acme');
    await until(() => (ran.some((run) => run.name === 'report:acme') ? true : undefined));
    const updated = await a.registry.schedules.upsert({ ...base, data: { n: 2 } }, { by: 'bob' });
    expect(a.registry.get('report:acme')).toBe(first);
    // What the dashboard shows of it is the change's, though the job is the same.
    expect(a.registry.schedules.storedOf('report:acme')).toEqual({
      handler: 'tenant-report',
      version: 2,
      updatedAt: updated.updatedAt,
      updatedBy: 'bob',
    });
    await until(() => (ran.some((run) => (run.data as { n: number }).n === 2) ? true : undefined));
    await a.registry.schedules.upsert({ ...base, every: 250, data: { n: 3 } });
    const second = await until(() => {
      const now = a.registry.get('report:acme');
      return now !== first ? now : undefined;
    });
    expect(second.options.every).toBe(250);
    expect(first.state).toBe('stopped');
    await until(() => (ran.some((run) => (run.data as { n: number }).n === 3) ? true : undefined));
  });

  it('a change of timing starts the new grid from the change: no slot of it before the change runs', async () => {
    fresh();
    const a = await replica('a');
    const base = { name: 'report:acme', handler: 'tenant-report', every: 1000, data: { n: 1 } };
    await a.registry.schedules.upsert(base);
    const first = await until(() => ran.find((run) => run.name === 'report:acme'));
    // Well after the last slot: a grid of 150 ms from it would have slots before the change.
    await sleep(Math.max(0, first.slot + 450 - Date.now()));
    const changed = Date.now();
    await a.registry.schedules.upsert({ ...base, every: 150, data: { n: 2 } });
    const next = await until(() => ran.find((run) => (run.data as { n: number }).n === 2));
    expect(next.slot).toBeGreaterThanOrEqual(changed);
    expect(a.seen.filter((event) => event.type === 'missed')).toEqual([]);
  });

  it('a schedule created again after a removal runs no slot from before it was created, on a grid from then', async () => {
    fresh();
    const a = await replica('a');
    const base = { name: 'report:acme', handler: 'tenant-report', every: 300, data: { n: 1 } };
    await a.registry.schedules.upsert(base);
    await until(() => ran.find((run) => run.name === 'report:acme'));
    expect(await a.registry.schedules.remove('report:acme')).toBe(true);
    // Several slots of the old grid pass while it is gone.
    await sleep(1000);
    const created = Date.now();
    await a.registry.schedules.upsert({ ...base, data: { n: 2 } });
    await until(() =>
      ran.filter((run) => (run.data as { n: number }).n === 2).length >= 2 ? true : undefined,
    );
    const again = ran.filter((run) => (run.data as { n: number }).n === 2);
    expect(again.every((run) => run.slot >= created)).toBe(true);
    expect(again[1]!.slot - again[0]!.slot).toBe(300);
    expect(a.seen.filter((event) => event.type === 'missed')).toEqual([]);
  });

  it('a run cannot change the data of the runs after it', async () => {
    fresh();
    const a = await replica('a');
    await a.registry.schedules.upsert({
      name: 'report:acme',
      handler: 'tenant-report',
      every: 100,
      data: { tenantId: 'acme', nested: { x: 1 } },
    });
    const first = await until(() => ran.find((run) => run.name === 'report:acme'));
    expect(Object.isFrozen(first.data)).toBe(true);
    expect(() => {
      (first.data as { tenantId: string }).tenantId = 'changed';
    }).toThrow(TypeError);
    expect(() => {
      (first.data as { nested: { x: number } }).nested.x = 2;
    }).toThrow(TypeError);
  });

  it('remove drops the job on every replica, says whether it was there, and is audited', async () => {
    fresh();
    const [a, b] = [await replica('a'), await replica('b')];
    await a.registry.schedules.upsert({ name: 'report:acme', handler: 'tenant-report', every: 200 });
    await until(() => (b.registry.has('report:acme') ? true : undefined));
    expect(await b.registry.schedules.remove('report:acme', { by: 'bob', ifVersion: 1 })).toBe(true);
    expect(b.registry.has('report:acme')).toBe(false);
    await until(() => (a.registry.has('report:acme') ? undefined : true), SEEN_WITHIN);
    expect(await a.registry.schedules.remove('report:acme')).toBe(false);
    expect(await a.registry.schedules.get('report:acme')).toBeNull();
    expect(b.seen).toContainEqual(expect.objectContaining({ type: 'operated', action: 'remove', by: 'bob' }));
    // Its history and audit trail stay readable from the store.
    expect((await a.registry.audit('report:acme')).map((entry) => [entry.action, entry.by])).toEqual([
      ['remove', 'bob'],
      ['create', null],
    ]);
    const runs = await a.registry.history('report:acme');
    expect(runs.length).toBe(ran.filter((run) => run.name === 'report:acme').length);
    expect(runs.every((run) => run.name === 'report:acme' && run.reason !== null)).toBe(true);
    await expect(a.registry.history('report:none')).rejects.toThrow(/no job has this name/);
    await expect(a.registry.remove('Reports.cleanup')).resolves.toBeUndefined();
  });

  it('registry.remove() of a stored schedule says to remove it from the store', async () => {
    fresh();
    const a = await replica('a');
    await a.registry.schedules.upsert({ name: 'report:acme', handler: 'tenant-report', every: 60_000 });
    await expect(a.registry.remove('report:acme')).rejects.toThrow(
      'PeriodicRegistry.remove("report:acme"): the job is a stored schedule, which every replica runs from the ' +
        'store; remove it there: registry.schedules.remove("report:acme")',
    );
  });

  it('upsertMany writes a batch in one step; list reads pages by handler and prefix', async () => {
    fresh();
    const a = await replica('a');
    const written = await a.registry.schedules.upsertMany(
      [
        ...Array.from({ length: 5 }, (_, i) => ({
          name: `report:t${i}`,
          handler: 'tenant-report',
          every: 60_000,
          data: { tenantId: `t${i}` },
        })),
        { name: 'sync:t0', handler: 'sync', every: 60_000 },
      ],
      { by: 'import' },
    );
    expect(written.map((one) => [one.name, one.version, one.updatedBy])).toEqual([
      ['report:t0', 1, 'import'],
      ['report:t1', 1, 'import'],
      ['report:t2', 1, 'import'],
      ['report:t3', 1, 'import'],
      ['report:t4', 1, 'import'],
      ['sync:t0', 1, 'import'],
    ]);
    await expect(
      a.registry.schedules.upsertMany([
        { name: 'x', handler: 'sync', every: 1000 },
        { name: 'x', handler: 'sync', every: 2000 },
      ]),
    ).rejects.toThrow(/\[1\] names "x" again/);
    const page = await a.registry.schedules.list({ handler: 'tenant-report', limit: 2 });
    expect(page.items.map((one) => one.name)).toEqual(['report:t0', 'report:t1']);
    const next = await a.registry.schedules.list({
      handler: 'tenant-report',
      limit: 2,
      cursor: page.cursor!,
    });
    expect(next.items.map((one) => one.name)).toEqual(['report:t2', 'report:t3']);
    const last = await a.registry.schedules.list({
      handler: 'tenant-report',
      limit: 2,
      cursor: next.cursor!,
    });
    expect(last).toMatchObject({ items: [{ name: 'report:t4' }], cursor: null });
    expect((await a.registry.schedules.list({ prefix: 'sync:' })).items.map((one) => one.name)).toEqual([
      'sync:t0',
    ]);
    // The dashboard's list filters the jobs by handler, and says which job is a stored schedule.
    const byHandler = await listOf(a.registry, new JobHealth(a.registry), {
      state: null,
      q: null,
      handler: 'sync',
      after: null,
      limit: PAGE_ROWS,
    });
    expect(byHandler.jobs.map((job) => [job.name, job.stored])).toEqual([
      ['sync:t0', { handler: 'sync', version: 1, updatedAt: expect.any(Date), updatedBy: 'import' }],
    ]);
    expect(byHandler).toMatchObject({ total: 7, matched: 1, handlers: ['sync', 'tenant-report'] });
    expect(a.registry.getAll().map((job) => job.name)).toEqual([
      'Reports.cleanup',
      'report:t0',
      'report:t1',
      'report:t2',
      'report:t3',
      'report:t4',
      'sync:t0',
    ]);
  });

  it('a replica without the handler never takes the lease; with no live replica that has it, fleetStatus says so', async () => {
    fresh();
    const a = await replica('a');
    await a.registry.schedules.upsert({ name: 'report:acme', handler: 'tenant-report', every: 200 });
    const old = await replica('old', ['sync']);
    await until(() => (old.registry.has('report:acme') ? true : undefined), SEEN_WITHIN);
    expect(old.registry.status('report:acme').state).toBe('idle');
    expect((await old.registry.fleetStatus('report:acme')).handlerMissing).toBeUndefined();
    await a.close();
    // Once "a" has left the fleet, no live replica has the handler: the lease stays free.
    const status = await until(async () => {
      const read = await old.registry.fleetStatus('report:acme');
      return read.handlerMissing === undefined ? undefined : read;
    }, LEASE_MS * 3);
    expect(status.handlerMissing).toEqual(['old']);
    await sleep(LEASE_MS * 2);
    expect((await old.registry.fleetStatus('report:acme')).holder).toBeNull();
    expect(old.registry.status('report:acme').lease).toMatchObject({ held: false });
  });

  it('a store that lost its data: storeReset names the stored schedules, and their jobs go', async () => {
    fresh();
    const a = await replica('a');
    await a.registry.schedules.upsert({ name: 'report:acme', handler: 'tenant-report', every: 60_000 });
    const store = coordinator as unknown as Record<string, unknown>;
    (store.stored as Map<string, unknown>).clear();
    (store.storedRemoved as Map<string, unknown>).clear();
    store.storedChange = 0;
    store.fleet = undefined;
    const reset = await a.events.once('storeReset');
    expect(reset.lost).toEqual(['pauses', 'audit', 'history', 'stored schedules']);
    await until(() => (a.registry.has('report:acme') ? undefined : true), SEEN_WITHIN);
    expect(a.registry.has('Reports.cleanup')).toBe(true);
  });

  it('schedules survive a restart of every replica: a new replica reads them from the store', async () => {
    fresh();
    const a = await replica('a');
    await a.registry.schedules.upsert({
      name: 'report:acme',
      handler: 'tenant-report',
      every: 200,
      data: { x: 1 },
    });
    await a.close();
    const b = await replica('b');
    await until(() =>
      ran.some((run) => run.replica === 'b' && run.name === 'report:acme') ? true : undefined,
    );
    expect(b.registry.get('report:acme').options.every).toBe(200);
  });
});
