// The Lua scripts against a real Redis, and exclusive jobs of two applications sharing it.
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import {
  Periodic,
  type PeriodicContext,
  PeriodicModule,
  type PeriodicRunEntry,
  type RedisClient,
  RedisCoordinator,
  type RedisCoordinatorOptions,
} from '../../lib/index.js';
import { type KeyKind, keyOf } from '../../lib/coordinators/redis/keys.js';
import { coordinatorContract } from '../../lib/testing/index.js';
import { useApps } from '../nest/helpers.js';
import { describeWithRedis, dropKeys, redisClient, uniquePrefix } from './redis.js';

const describeRedis = await describeWithRedis();

// ioredis's clients fit the coordinator's `client` (checked when the tests are type-checked, by npm run lint).
const clientsFit: [Redis, Cluster] extends [RedisClient, RedisClient] ? true : false = true;
void clientsFit;

describeRedis('the Lua scripts', () => {
  let redis: Redis;
  let prefix: string;
  let coordinator: RedisCoordinator;
  const leaseMs = 5000;

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(async () => {
    await redis.quit();
  });
  afterEach(() => dropKeys(redis, prefix));

  const make = (options: Partial<RedisCoordinatorOptions> = {}) =>
    new RedisCoordinator({ client: redis, keyPrefix: prefix, leaseMs, ...options });
  const key = (kind: KeyKind, name?: string) => keyOf(prefix, kind, name);

  beforeEach(() => {
    prefix = uniquePrefix();
    coordinator = make();
  });

  it('acquire sets the lease key <keyPrefix>\\nl<name> to the owner for leaseMs and stores the fencing token in the hash', async () => {
    const token = await coordinator.acquire('cleanup', 'owner-a');
    expect(await redis.get(key('lease', 'cleanup'))).toBe('owner-a');
    const ttl = await redis.pttl(key('lease', 'cleanup'));
    expect(ttl).toBeGreaterThan(leaseMs - 1000);
    expect(ttl).toBeLessThanOrEqual(leaseMs);
    expect(await redis.hget(key('fleet'), 'token:cleanup')).toBe(String(token));
    // Floored at Redis's clock in microseconds (TIME), exactly as stored.
    const [seconds, micros] = await redis.time();
    expect(token).toBeLessThanOrEqual(Number(seconds) * 1e6 + Number(micros));
    expect(token).toBeGreaterThan((Number(seconds) - 60) * 1e6);
  });

  it('leaseMs 86,400,000 (a day, the ceiling) is one Redis keeps, taken and renewed by a heartbeat', async () => {
    const longest = make({ leaseMs: 86_400_000 });
    const member = { owner: 'owner-a', replica: 'a', jobs: '' };
    const { acquired } = await longest.heartbeat({ member, renew: [], acquire: ['cleanup'] });
    const fencingToken = acquired[0]!.fencingToken;
    const { renewed } = await longest.heartbeat({
      member,
      renew: [{ name: 'cleanup', fencingToken }],
      acquire: [],
    });
    expect(renewed).toEqual([true]);
    expect(await redis.pttl(key('lease', 'cleanup'))).toBeGreaterThan(86_400_000 - 60_000);
  });

  it('acquire of a held lease returns 0 and changes nothing, not even the counter', async () => {
    const token = await coordinator.acquire('cleanup', 'owner-a');
    await expect(coordinator.acquire('cleanup', 'owner-b')).resolves.toBe(0);
    expect(await redis.get(key('lease', 'cleanup'))).toBe('owner-a');
    expect(await redis.hget(key('fleet'), 'token:cleanup')).toBe(String(token));
  });

  it('a counter ahead of the clock (tokens of an older version, or a clock stepped back) still counts up', async () => {
    const ahead = (Date.now() + 3_600_000) * 1000;
    await redis.hset(key('fleet'), 'token:cleanup', String(ahead));
    await expect(coordinator.acquire('cleanup', 'owner-a')).resolves.toBe(ahead + 1);
  });

  it('tokens grow after the keys are lost (FLUSHALL, a restart without persistence)', async () => {
    const before = await coordinator.acquire('cleanup', 'owner-a');
    await dropKeys(redis, prefix);
    const after = await coordinator.acquire('cleanup', 'owner-b');
    expect(after).toBeGreaterThan(before);
  });

  it('release deletes the lease, not the counter', async () => {
    const token = await coordinator.acquire('cleanup', 'owner-a');
    await expect(coordinator.release('cleanup', 'owner-a')).resolves.toBe(true);
    expect(await redis.exists(key('lease', 'cleanup'))).toBe(0);
    expect(await redis.hget(key('fleet'), 'token:cleanup')).toBe(String(token));
  });

  it('scripts go by EVALSHA, and are sent whole once when Redis does not know them', async () => {
    await redis.script('FLUSH');
    const evalCalls = jest.spyOn(redis, 'eval');
    const first = await coordinator.acquire('cleanup', 'owner-a');
    await expect(coordinator.release('cleanup', 'owner-a')).resolves.toBe(true);
    await expect(coordinator.acquire('cleanup', 'owner-b')).resolves.toBeGreaterThan(first);
    expect(evalCalls).toHaveBeenCalledTimes(2); // acquire's script and release's, once each
    evalCalls.mockRestore();
  });

  it('a batch of writes sends a grid only when it changed under the token; Redis keeps the latest', async () => {
    const member = { owner: 'owner-a', replica: 'a', jobs: 'j' };
    const { acquired } = await coordinator.heartbeat({ member, renew: [], acquire: ['cleanup'] });
    const fencingToken = acquired[0]!.fencingToken;
    const sent = jest.spyOn(redis, 'evalsha');
    const write = (grid: string, last: number) =>
      coordinator.writeSchedules('owner-a', [
        { name: 'cleanup', fencingToken, schedule: { grid, last, next: last + 1000 } },
      ]);
    // The grid each EVALSHA sent, after its field's name; none when it sent none.
    const grids = () =>
      sent.mock.calls.map((call) => {
        const at = call.indexOf('grid:cleanup');
        return at === -1 ? '' : call[at + 1];
      });
    await expect(write('every 1000 regular', 1000)).resolves.toEqual([true]);
    await expect(write('every 1000 regular', 2000)).resolves.toEqual([true]);
    await expect(write('every 500 regular', 3000)).resolves.toEqual([true]);
    expect(grids()).toEqual(['every 1000 regular', '', 'every 500 regular']);
    await expect(coordinator.readSchedule('cleanup')).resolves.toEqual({
      grid: 'every 500 regular',
      last: 3000,
      next: 4000,
    });
    // Under a token of another holding, the grid goes again: another holder may have changed it meanwhile.
    await coordinator.releaseAll('owner-a', [{ name: 'cleanup', fencingToken }], false);
    await redis.hset(key('fleet'), 'grid:cleanup', 'every 2000 regular');
    const again = await coordinator.heartbeat({ member, renew: [], acquire: ['cleanup'] });
    const [retaken] = again.acquired;
    await coordinator.writeSchedules('owner-a', [
      {
        name: 'cleanup',
        fencingToken: retaken!.fencingToken,
        schedule: { grid: 'every 500 regular', last: 4000, next: 5000 },
      },
    ]);
    expect(await redis.hget(key('fleet'), 'grid:cleanup')).toBe('every 500 regular');
    sent.mockRestore();
  });

  it("a job's schedule field carries the token of its latest acquire, which a claim must match, and keeps the slots", async () => {
    const member = { owner: 'owner-a', replica: 'a', jobs: 'j' };
    const schedule = { grid: 'every 1000 regular', last: 5000, next: 6000 };
    const first = (await coordinator.heartbeat({ member, renew: [], acquire: ['cleanup'] })).acquired[0]!;
    expect(await redis.hget(key('fleet'), 'schedule:cleanup')).toBe(String(first.fencingToken));
    await coordinator.writeSchedules('owner-a', [
      { name: 'cleanup', fencingToken: first.fencingToken, schedule },
    ]);
    expect(await redis.hget(key('fleet'), 'schedule:cleanup')).toBe(`${first.fencingToken} 5000 6000`);
    // Taken again, by a single acquire: the field has the new token and the same slots.
    await coordinator.releaseAll('owner-a', [{ name: 'cleanup', fencingToken: first.fencingToken }], false);
    const second = await coordinator.acquire('cleanup', 'owner-a');
    expect(await redis.hget(key('fleet'), 'schedule:cleanup')).toBe(`${second} 5000 6000`);
    await coordinator.heartbeat({ member, renew: [], acquire: [] });
    const later = { ...schedule, last: 6000, next: 7000 };
    await expect(
      coordinator.writeSchedules('owner-a', [
        { name: 'cleanup', fencingToken: first.fencingToken, schedule: later },
      ]),
    ).resolves.toEqual([false]);
    await expect(
      coordinator.writeSchedules('owner-a', [{ name: 'cleanup', fencingToken: second, schedule: later }]),
    ).resolves.toEqual([true]);
    await expect(coordinator.readSchedule('cleanup')).resolves.toEqual(later);
  });

  it('a history is a list of JSON arrays, appended to and cut back to `keep` in steps; reads take the latest `keep`', async () => {
    const run = (jobId: number, ended: boolean): PeriodicRunEntry => ({
      id: `r1/x#${jobId}`,
      name: 'cleanup',
      jobId,
      replica: 'r1',
      fencingToken: 7,
      slot: 1000 * jobId,
      origin: 'schedule',
      attempt: 1,
      startedAt: 1000 * jobId,
      finishedAt: ended ? 1000 * jobId + 2 : null,
      reason: ended ? 'normal' : null,
      durationMs: ended ? 1.5 : null,
      error: null,
    });
    const list = key('runs', 'cleanup');
    await coordinator.recordRuns([run(1, false)], 10);
    await coordinator.recordRuns([run(1, true)], 10);
    // The end replaced the start, in place.
    expect(await redis.lrange(list, 0, -1)).toEqual([
      '[2,"r1/x#1",1,"r1",7,1000,"schedule",1,1000,1002,"normal",1.5]',
    ]);
    // A start and its end sent in one script: the end replaces the start appended before it.
    await Promise.all([
      coordinator.recordRuns([run(2, false)], 10),
      coordinator.recordRuns([run(2, true)], 10),
    ]);
    expect(await redis.lrange(list, 0, -1)).toEqual([
      '[2,"r1/x#1",1,"r1",7,1000,"schedule",1,1000,1002,"normal",1.5]',
      '[2,"r1/x#2",2,"r1",7,2000,"schedule",1,2000,2002,"normal",1.5]',
    ]);
    for (let jobId = 3; jobId <= 18; jobId++) await coordinator.recordRuns([run(jobId, true)], 10);
    // 18 runs kept with keep 10: cut back once it held 8 more (18), not at every run.
    expect(await redis.llen(list)).toBe(18);
    await coordinator.recordRuns([run(19, true)], 10);
    expect(await redis.llen(list)).toBe(10);
    await coordinator.recordRuns([run(20, true)], 10);
    // Another replica's coordinator, told `keep`, reads the latest 10 of the 11 kept, newest first.
    const reader = make();
    const read = await reader.readHistory('cleanup', 10, null, 10);
    expect(read.map(({ jobId }) => jobId)).toEqual([20, 19, 18, 17, 16, 15, 14, 13, 12, 11]);
    await expect(reader.readHistory('cleanup', 5, 13_000, 10)).resolves.toEqual([
      run(12, true),
      run(11, true),
    ]);
    // A record of the earlier shape (an object, prepended) is still read.
    await redis.lpush(list, JSON.stringify({ v: 1, ...run(9, true) }));
    await expect(reader.readHistory('cleanup', 10, 12_000, 20)).resolves.toEqual([
      run(11, true),
      run(10, true),
      run(9, true),
    ]);
  });

  it("the holder's runs go to the tail of the job's history in a hash of its own, eight ended runs at a time to a segment", async () => {
    const member = { owner: 'owner-a', replica: 'a', jobs: 'j' };
    const { acquired } = await coordinator.heartbeat({ member, renew: [], acquire: ['cleanup'] });
    const fencingToken = acquired[0]!.fencingToken;
    const run = (jobId: number, reason: PeriodicRunEntry['reason']): PeriodicRunEntry => ({
      id: `r1/x#${jobId}`,
      name: 'cleanup',
      jobId,
      replica: 'r1',
      fencingToken,
      slot: 1000 * jobId,
      origin: 'schedule',
      attempt: 1,
      startedAt: 1000 * jobId,
      finishedAt: reason === null ? null : 1000 * jobId + 2,
      reason,
      durationMs: reason === null ? null : 1.5,
      error: null,
    });
    const hash = key('tails', 'owner-a');
    const field = async (name: string) => (await redis.hget(hash, name))?.split('\n');
    const list = key('runs', 'cleanup');
    // What the runs share, then each run in a few bytes: its count, jobId, slot, start and end after it, reason,
    // duration.
    const shared = JSON.stringify(['r1', fencingToken, 'r1/x#']);
    await coordinator.recordRuns([run(1, null)], 20);
    // The tail: the holding's last success (none yet), the failed slots since, its segments and their ring's
    // fields (20 runs in segments of 8, and one more), then its runs.
    expect(await field('t:cleanup')).toEqual(['0 0 0 4', shared, '[1,1,1000,0,null,null,null]']);
    // An end replaces its start; a failure, then a success, then one in flight.
    await coordinator.recordRuns([run(1, 'error'), run(2, 'normal'), run(3, null)], 20);
    expect(await field('t:cleanup')).toEqual([
      '2002 0 0 4',
      shared,
      '[1,1,1000,0,2,"error",1.5]',
      '[2,2,2000,0,2,"normal",1.5]',
      '[3,3,3000,0,null,null,null]',
    ]);
    for (let jobId = 4; jobId <= 9; jobId++) await coordinator.recordRuns([run(jobId, 'error')], 20);
    // Eight ended runs: to a segment; the run in flight stays in the tail.
    expect(await field('s0:cleanup')).toEqual([
      'S',
      shared,
      '[1,1,1000,0,2,"error",1.5]',
      '[2,2,2000,0,2,"normal",1.5]',
      ...[4, 5, 6, 7, 8, 9].map((id) => `[${id},${id},${id}000,0,2,"error",1.5]`),
    ]);
    expect(await field('t:cleanup')).toEqual(['2002 6 1 4', shared, '[3,3,3000,0,null,null,null]']);
    await coordinator.recordRuns([run(3, 'normal')], 20);
    const reader = make();
    const read = await reader.readHistory('cleanup', 10, null, 20);
    const runs = [9, 8, 7, 6, 5, 4].map((jobId) => run(jobId, 'error'));
    expect(read).toEqual([...runs, run(3, 'normal'), run(2, 'normal'), run(1, 'error')]);
    const [fleet] = await reader.readFleet(['cleanup']);
    expect(fleet).toMatchObject({ lastRun: run(9, 'error'), lastSucceededAt: 3002, consecutiveFailures: 0 });
    // Taken by another replica: the segments and the tail go to the job's list, the success to its field.
    await coordinator.releaseAll('owner-a', [{ name: 'cleanup', fencingToken }], true);
    await make().heartbeat({ member: { ...member, owner: 'owner-b' }, renew: [], acquire: ['cleanup'] });
    expect(await redis.exists(hash)).toBe(0);
    expect((await redis.lrange(list, 0, -1)).map((element) => element.split('\n').length)).toEqual([10, 3]);
    expect(await redis.hmget(key('fleet'), 'ok:cleanup', 'failed:cleanup')).toEqual(['3002', null]);
    await expect(reader.readHistory('cleanup', 10, null, 20)).resolves.toEqual(read);
  });

  it("a replica's writes go unchecked while no lease changed hands since its heartbeat; then checked, and a stale one refused", async () => {
    const a = { owner: 'owner-a', replica: 'a', jobs: 'j' };
    const b = { owner: 'owner-b', replica: 'b', jobs: 'j' };
    const other = make();
    const [x, y] = (await coordinator.heartbeat({ member: a, renew: [], acquire: ['x', 'y'] })).acquired.map(
      (taken) => taken!.fencingToken,
    );
    const write = (name: string, fencingToken: number, last: number) =>
      coordinator.writeSchedules('owner-a', [
        { name, fencingToken, schedule: { grid: 'every 1000 regular', last, next: last + 1000 } },
      ]);
    const sent = jest.spyOn(redis, 'evalsha');
    // The epoch the heartbeat read goes with the write, and Redis reads no job's field for it.
    await expect(write('x', x, 1000)).resolves.toEqual([true]);
    const epoch = await redis.hget(key('fleet'), 'epoch');
    expect(sent.mock.calls.map((call) => call[4])).toEqual([epoch]);
    // a gives x up, b takes it: the epoch moves on. A write of x, given up, is checked, and refused; one of y
    // goes unchecked, is refused for the epoch, and goes again, checked; a's writes are checked from then on.
    await coordinator.releaseAll('owner-a', [{ name: 'x', fencingToken: x }], false);
    const [taken] = (await other.heartbeat({ member: b, renew: [], acquire: ['x'] })).acquired;
    expect(await redis.hget(key('fleet'), 'epoch')).not.toBe(epoch);
    sent.mockClear();
    await expect(write('x', x, 2000)).resolves.toEqual([false]);
    expect(sent).toHaveBeenCalledTimes(1);
    await expect(write('y', y, 2000)).resolves.toEqual([true]);
    expect(sent).toHaveBeenCalledTimes(3);
    await expect(write('y', y, 2500)).resolves.toEqual([true]);
    expect(sent).toHaveBeenCalledTimes(4);
    // A run of x that a recorded under its old token goes to x's list, beside b's tail.
    const run: PeriodicRunEntry = {
      id: 'a#1',
      name: 'x',
      jobId: 1,
      replica: 'a',
      fencingToken: x,
      slot: 1000,
      origin: 'schedule',
      attempt: 1,
      startedAt: 1000,
      finishedAt: 1500,
      reason: 'leaseLost',
      durationMs: 500,
      error: null,
    };
    await coordinator.recordRuns([run], 10);
    expect(await redis.llen(key('runs', 'x'))).toBe(1);
    await other.recordRuns([{ ...run, id: 'b#1', fencingToken: taken!.fencingToken, startedAt: 2000 }], 10);
    const history = await make().readHistory('x', 10, null, 10);
    expect(history.map(({ id }) => id)).toEqual(['b#1', 'a#1']);
    // a's next heartbeat reads the new epoch: its writes go unchecked again.
    await coordinator.heartbeat({ member: a, renew: [{ name: 'y', fencingToken: y }], acquire: [] });
    sent.mockClear();
    await expect(write('y', y, 3000)).resolves.toEqual([true]);
    expect(sent.mock.calls.map((call) => call[4])).toEqual([await redis.hget(key('fleet'), 'epoch')]);
    sent.mockRestore();
  });

  it('a heartbeat renews unchecked while no lease changed hands since the last; one that expired is not renewed', async () => {
    const short = make({ leaseMs: 300 });
    const a = { owner: 'owner-a', replica: 'a', jobs: 'j' };
    const { acquired } = await short.heartbeat({ member: a, renew: [], acquire: ['x', 'y'] });
    const [x, y] = ['x', 'y'].map((name, i) => ({ name, fencingToken: acquired[i]!.fencingToken }));
    const sent = jest.spyOn(redis, 'evalsha');
    // One script, whose arguments after the keys are the member's and the epoch the last heartbeat read.
    await expect(short.heartbeat({ member: a, renew: [x, y], acquire: [] })).resolves.toMatchObject({
      renewed: [true, true],
      acquired: [],
    });
    expect(sent).toHaveBeenCalledTimes(1);
    expect(sent.mock.calls[0].slice(-5)).toEqual([
      'owner-a',
      'a',
      'j',
      300,
      await redis.hget(key('fleet'), 'epoch'),
    ]);
    // x expires unrenewed, and nobody takes it: it is not renewed either.
    await redis.pexpire(key('lease', 'x'), 1);
    await sleep(20);
    await expect(short.heartbeat({ member: a, renew: [x, y], acquire: [] })).resolves.toMatchObject({
      renewed: [false, true],
    });
    // b takes x: the epoch moves on, and the next heartbeat checks each lease.
    await make().heartbeat({ member: { ...a, owner: 'owner-b' }, renew: [], acquire: ['x'] });
    sent.mockClear();
    await expect(short.heartbeat({ member: a, renew: [y], acquire: [] })).resolves.toMatchObject({
      renewed: [true],
    });
    expect(sent).toHaveBeenCalledTimes(2);
    sent.mockRestore();
  });

  it('a lease that another holds with the same epoch (a key set by hand, or by a replica of an older version) is not renewed unchecked', async () => {
    const a = { owner: 'owner-a', replica: 'a', jobs: 'j' };
    const [taken] = (await coordinator.heartbeat({ member: a, renew: [], acquire: ['x'] })).acquired;
    await redis.set(key('lease', 'x'), 'owner-z', 'PX', 60_000);
    const renew = [{ name: 'x', fencingToken: taken!.fencingToken }];
    await expect(coordinator.heartbeat({ member: a, renew, acquire: [] })).resolves.toMatchObject({
      renewed: [false],
    });
    expect(await redis.pttl(key('lease', 'x'))).toBeGreaterThan(leaseMs);
  });

  it('the records of thousands of runs go in scripts and HSETs of 2,000 jobs at most, all read back', async () => {
    const member = { owner: 'owner-a', replica: 'a', jobs: 'j' };
    const names = Array.from({ length: 4500 }, (_, i) => `job-${i}`);
    const { acquired } = await coordinator.heartbeat({ member, renew: [], acquire: names });
    const run = (name: string, fencingToken: number | null): PeriodicRunEntry => ({
      id: `r#${name}`,
      name,
      jobId: 1,
      replica: 'a',
      fencingToken,
      slot: 1000,
      origin: 'schedule',
      attempt: 1,
      startedAt: 1000,
      finishedAt: 1003,
      reason: 'normal',
      durationMs: 3,
      error: null,
    });
    const sent = jest.spyOn(redis, 'evalsha');
    const plain = jest.spyOn(redis, 'call');
    // The runs of the jobs held go to their tails; under a token of no holding, to their lists.
    await coordinator.recordRuns(
      names.flatMap((name, i) => [
        run(name, acquired[i]!.fencingToken),
        { ...run(name, 1), id: `old#${name}` },
      ]),
      10,
    );
    const lists = sent.mock.calls.map((call) => Number(call[1]) - 1);
    expect(lists).toEqual([2000, 2000, 500]);
    expect(plain.mock.calls.map((call) => (call.length - 2) / 2)).toEqual([2000, 2000, 500]);
    sent.mockRestore();
    plain.mockRestore();
    const read = await make().readHistory('job-4499', 10, null, 10);
    expect(read.map(({ id }) => id).sort()).toEqual(['old#job-4499', 'r#job-4499']);
  });

  describe('the runs of a job that changes hands', () => {
    const member = (owner: string) => ({ owner, replica: owner, jobs: 'j' });
    const take = async (by: RedisCoordinator, owner: string) =>
      (await by.heartbeat({ member: member(owner), renew: [], acquire: ['job'] })).acquired[0]!.fencingToken;
    const run = (
      jobId: number,
      fencingToken: number,
      reason: PeriodicRunEntry['reason'],
      durationMs = 5,
    ): PeriodicRunEntry => ({
      id: `r#${jobId}`,
      name: 'job',
      jobId,
      replica: 'r',
      fencingToken,
      slot: 1000 * jobId,
      origin: 'schedule',
      attempt: 1,
      startedAt: 1000 * jobId,
      finishedAt: reason === null ? null : 1000 * jobId + durationMs,
      reason,
      durationMs: reason === null ? null : durationMs,
      error: null,
    });

    it('keep the latest `keep` at least when every holding is short, each handed over as a tail of a run', async () => {
      const [a, b] = [make(), make()];
      for (let jobId = 1; jobId <= 40; jobId++) {
        const [by, owner] = jobId % 2 === 0 ? [a, 'owner-a'] : [b, 'owner-b'];
        const fencingToken = await take(by, owner);
        await by.recordRuns([run(jobId, fencingToken, 'normal')], 30);
        await by.releaseAll(owner, [{ name: 'job', fencingToken }], false);
      }
      await take(a, 'owner-a');
      const read = await make().readHistory('job', 30, null, 30);
      expect(read.map(({ jobId }) => jobId)).toEqual(Array.from({ length: 30 }, (_, i) => 40 - i));
    });

    it('a tail written after its holding was handed over (a write delayed past the lease) is dropped when its replica takes the job again', async () => {
      const [a, b] = [make(), make()];
      const first = await take(a, 'owner-a');
      await a.recordRuns([run(1, first, 'error')], 10);
      const tail = await redis.hget(key('tails', 'owner-a'), 't:job');
      await a.releaseAll('owner-a', [{ name: 'job', fencingToken: first }], false);
      const second = await take(b, 'owner-b');
      // a's write of the same tail lands late, after b took the job and moved it.
      await redis.hset(key('tails', 'owner-a'), 't:job', tail!);
      await b.releaseAll('owner-b', [{ name: 'job', fencingToken: second }], false);
      await take(a, 'owner-a');
      expect(await redis.hexists(key('tails', 'owner-a'), 't:job')).toBe(0);
      const [read] = await make().readFleet(['job']);
      expect(read).toMatchObject({ consecutiveFailures: 1, lastRun: run(1, first, 'error') });
      await expect(make().readHistory('job', 10, null, 10)).resolves.toEqual([run(1, first, 'error')]);
    });

    it('the end of a run recorded after its lease was given up is its last run, when its replica takes the job again', async () => {
      const first = await take(coordinator, 'owner-a');
      await coordinator.recordRuns([run(1, first, null)], 10);
      await coordinator.releaseAll('owner-a', [{ name: 'job', fencingToken: first }], false);
      await coordinator.recordRuns([run(1, first, 'leaseLost')], 10);
      await take(coordinator, 'owner-a');
      const [read] = await make().readFleet(['job']);
      expect(read.lastRun).toEqual(run(1, first, 'leaseLost'));
    });

    it('a run of 0 ms is read back as 0 ms; what is not a run is skipped', async () => {
      const fencingToken = await take(coordinator, 'owner-a');
      await coordinator.recordRuns([run(1, fencingToken, 'normal', 0)], 10);
      await redis.rpush(key('runs', 'job'), 'S\n["r",1,""]\nnot json', '{"id":3}', 'a format of tomorrow');
      await expect(make().readHistory('job', 10, null, 10)).resolves.toEqual([
        run(1, fencingToken, 'normal', 0),
      ]);
    });

    it('a tail that Redis refuses fails no claim: the records wait for their own answer', async () => {
      const client: RedisClient = {
        eval: redis.eval.bind(redis) as RedisClient['eval'],
        evalsha: redis.evalsha.bind(redis) as RedisClient['evalsha'],
        call: () => Promise.reject(new Error('ERR refused')),
      };
      const refusing = make({ client });
      const fencingToken = await take(refusing, 'owner-a');
      const recorded = refusing.recordRuns([run(1, fencingToken, null)], 10).catch((error: Error) => error);
      const claimed = refusing.writeSchedules('owner-a', [
        { name: 'job', fencingToken, schedule: { grid: 'every 1000 regular', last: 5000, next: 6000 } },
      ]);
      await expect(claimed).resolves.toEqual([true]);
      expect(await recorded).toEqual(new Error('ERR refused'));
    });
  });

  it('a job named like another job plus a suffix has its own lease and counter', async () => {
    await coordinator.acquire('a', 'owner-a');
    await expect(coordinator.acquire('a:fencing', 'owner-b')).resolves.toBeGreaterThan(0);
    await expect(coordinator.acquire('a', 'owner-c')).resolves.toBe(0);
  });
});

describeRedis('RedisCoordinator keeps the coordinator contract', () => {
  let redis: Redis;
  const prefix = uniquePrefix();
  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(async () => {
    await dropKeys(redis, prefix);
    await redis.quit();
  });
  const contract = coordinatorContract({
    make: (leaseMs) => new RedisCoordinator({ client: redis, keyPrefix: prefix, leaseMs }),
    wipe: () => dropKeys(redis, prefix),
    garbled: () => new RedisCoordinator({ client: { eval: async () => 'OK', evalsha: async () => 'OK' } }),
  });
  for (const [rule, check] of contract) it(rule, check);
});

describeRedis('clients of every shape behave as a default client', () => {
  const clients: Redis[] = [];
  const prefixes: string[] = [];
  afterAll(async () => {
    const cleaner = redisClient();
    for (const prefix of prefixes) await dropKeys(cleaner, prefix);
    await cleaner.quit();
    for (const client of clients) client.disconnect();
  });

  it.each<[string, RedisOptions]>([
    ['stringNumbers: true', { stringNumbers: true }],
    ["ioredis's own keyPrefix", { keyPrefix: 'app-one:' }],
  ])('a client with %s: numbers, refusals and renewals read right', async (_, options) => {
    const client = redisClient(options);
    clients.push(client);
    const prefix = uniquePrefix();
    prefixes.push(`${options.keyPrefix ?? ''}${prefix}`);
    const coordinator = new RedisCoordinator({ client, keyPrefix: prefix, leaseMs: 5000 });
    const token = await coordinator.acquire('cleanup', 'owner-a');
    expect(typeof token).toBe('number');
    expect(token).toBeGreaterThan(1e15);
    await expect(coordinator.acquire('cleanup', 'owner-b')).resolves.toBe(0);
    await expect(coordinator.renew('cleanup', 'owner-b')).resolves.toBe(false);
    await expect(coordinator.renew('cleanup', 'owner-a')).resolves.toBe(true);
    const schedule = { grid: 'every 60000 regular', last: Date.now(), next: Date.now() + 60_000 };
    await expect(coordinator.writeSchedule('cleanup', 'owner-a', token, schedule)).resolves.toBe(true);
    await expect(coordinator.writeSchedule('cleanup', 'owner-b', token, schedule)).resolves.toBe(false);
    await expect(coordinator.readSchedule('cleanup')).resolves.toEqual(schedule);
    await expect(coordinator.readSchedule('other')).resolves.toBeNull();
    await expect(coordinator.release('cleanup', 'owner-b')).resolves.toBe(false);
    await expect(coordinator.release('cleanup', 'owner-a')).resolves.toBe(true);
    await expect(coordinator.acquire('cleanup', 'owner-b')).resolves.toBeGreaterThan(token);
    // The batched steps: a lease taken, its claims unchecked, its runs in its tail, all read back.
    const member = { owner: 'owner-c', replica: 'c', jobs: 'j' };
    const [taken] = (await coordinator.heartbeat({ member, renew: [], acquire: ['report'] })).acquired;
    const renew = [{ name: 'report', fencingToken: taken!.fencingToken }];
    await expect(coordinator.heartbeat({ member, renew, acquire: [] })).resolves.toMatchObject({
      renewed: [true],
    });
    await expect(coordinator.writeSchedules('owner-c', [{ ...renew[0], schedule }])).resolves.toEqual([true]);
    const runs = Array.from({ length: 10 }, (_, i) => ({
      id: `c#${i + 1}`,
      name: 'report',
      jobId: i + 1,
      replica: 'c',
      fencingToken: taken!.fencingToken,
      slot: schedule.last + i,
      origin: 'schedule' as const,
      attempt: 1,
      startedAt: schedule.last + i,
      finishedAt: schedule.last + i + 1,
      reason: 'normal' as const,
      durationMs: 1,
      error: null,
    }));
    await coordinator.recordRuns(runs, 100);
    await expect(coordinator.readHistory('report', 100, null)).resolves.toEqual([...runs].reverse());
    const [fleet] = await coordinator.readFleet(['report']);
    expect(fleet).toMatchObject({ lastRun: runs[9], lastSucceededAt: schedule.last + 10, schedule });
  });

  it.each<[string, unknown]>([
    ['a status reply', 'OK'],
    ['digits and more', '12abc'],
    ['an array', [1]],
    ['a fraction', 1.5],
  ])('a reply of %s to acquire is a failure, never a lease', async (_, reply) => {
    const client: RedisClient = { eval: async () => reply, evalsha: async () => reply };
    await expect(new RedisCoordinator({ client }).acquire('cleanup', 'owner-a')).rejects.toThrow(
      'to acquire, which is not an integer',
    );
  });
});

describeRedis('one application with several exclusive jobs', () => {
  const createApp = useApps();
  const prefix = uniquePrefix();
  const client = redisClient();
  afterAll(async () => {
    await dropKeys(client, prefix);
    await client.quit();
  });

  it("keeps each job's history apart: a run's start is replaced by its own end, never another job's", async () => {
    const coordinator = new RedisCoordinator({ client, keyPrefix: prefix, leaseMs: 3000 });
    const app = await createApp({ imports: [PeriodicModule.forRoot({ coordinator, logger: false })] });
    // Runs that end after the turn they started in: each one's start is recorded, then replaced by its end.
    app.registry.add('fast', () => new Promise((resolve) => setTimeout(resolve, 0)), {
      every: 500,
      exclusive: true,
    });
    app.registry.add('slow', () => new Promise((resolve) => setTimeout(resolve, 200)), {
      every: 500,
      exclusive: true,
    });
    let slowRuns = 0;
    await new Promise<void>((resolve) =>
      app.events.on('finished', ({ name }) => {
        if (name === 'slow' && ++slowRuns === 8) resolve();
      }),
    );
    const [fast, slow] = await Promise.all([app.registry.history('fast'), app.registry.history('slow')]);
    expect(slow.length).toBeGreaterThanOrEqual(8);
    // The two jobs number their runs 1, 2, 3 … each: their records in the store are told apart all the same.
    expect(slow.filter((run) => run.reason !== null && run.durationMs! < 150)).toEqual([]);
    for (const history of [fast, slow]) {
      expect(history.filter((run) => run.reason === null).length).toBeLessThanOrEqual(1);
      expect(new Set(history.map((run) => run.jobId)).size).toBe(history.length);
    }
  }, 30_000);
});

describeRedis('two applications with one exclusive job', () => {
  const createApp = useApps();
  const clients: Redis[] = [];
  const prefix = uniquePrefix();
  afterAll(async () => {
    await dropKeys(clients[0], prefix);
    await Promise.all(clients.map((client) => client.quit()));
  });

  const runs: { app: string; fencingToken: number | undefined }[] = [];

  function appNamed(app: string, keyPrefix: string) {
    @Injectable()
    class Reports {
      @Periodic({ every: 20, exclusive: true })
      send({ fencingToken }: PeriodicContext): void {
        runs.push({ app, fencingToken });
      }

      @Periodic({ every: 20, name: 'everywhere' })
      local(): void {}
    }
    const client = redisClient();
    clients.push(client);
    const coordinator = new RedisCoordinator({ client, keyPrefix, leaseMs: 3000 });
    return createApp({ imports: [PeriodicModule.forRoot({ coordinator })], providers: [Reports] });
  }

  it('one runs the job; when it closes, the other takes over with a larger fencing token', async () => {
    const first = await appNamed('first', prefix);
    await first.events.once('leaseAcquired');
    const second = await appNamed('second', prefix);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(runs.length).toBeGreaterThan(5);
    expect(new Set(runs.map((run) => run.app))).toEqual(new Set(['first']));
    expect(
      second.seen
        .filter((event) => 'name' in event && event.name === 'Reports.send')
        .map((event) => event.type),
    ).toEqual(expect.not.arrayContaining(['started', 'leaseAcquired']));
    // The job that is not exclusive runs in both.
    expect(second.seen.some((event) => event.type === 'started' && event.name === 'everywhere')).toBe(true);

    const [{ fencingToken: firstToken }] = runs;
    const taken = second.events.once('leaseAcquired');
    await first.close();
    expect(first.logs.periodic()).toContain(
      `log: Reports.send acquired its lease, fencing token ${firstToken}`,
    );
    const { fencingToken: secondToken } = await taken;
    expect(secondToken).toBeGreaterThan(firstToken!);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const handedOver = runs.filter((run) => run.app === 'second');
    expect(handedOver.length).toBeGreaterThan(0);
    expect(handedOver.every((run) => run.fencingToken === secondToken)).toBe(true);
    expect(second.logs.periodic()).toContain(
      `log: Reports.send acquired its lease, fencing token ${secondToken}`,
    );
  });
});
