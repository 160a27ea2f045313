// Three processes of one application share an exclusive job through a real Redis. The holder is killed with
// SIGKILL once and the next one is closed gracefully once; the runs they log to Redis must start in the order
// of their fencing tokens, and each handover must be as quick as the lease allows.
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import { type Child, compileApp, startNode } from '../nest/child-app.js';
import { describeWithRedis, dropKeys, REDIS_URL, redisClient, uniquePrefix } from './redis.js';

const describeRedis = await describeWithRedis();

// Long enough that a loaded CI machine's pauses stay within the margin (leaseMs / 10 = 150 ms).
const LEASE_MS = 1500;
const RETRY = LEASE_MS / 3;
const EVERY = 50;
/** How long each holder runs the job before the test moves on. */
const HOLDING = 1500;
/** What a loaded machine may add to a handover: well under the lease, which a handover by release must beat. */
const LOAD = 200;

type RunEntry = [replica: string, fencingToken: number, start: number, end: number];

const clock = () => performance.timeOrigin + performance.now();

describeRedis('three replicas of one application', () => {
  let redis: Redis;
  const prefix = uniquePrefix();
  const replicas = new Map<string, Child>();

  beforeAll(() => {
    redis = redisClient();
  });
  afterAll(async () => {
    for (const child of replicas.values()) child.process.kill('SIGKILL');
    await dropKeys(redis, prefix);
    await redis.quit();
  });

  /** The replica that prints "acquired" next, among those still running. */
  function nextHolder(): Promise<string> {
    const seen = new Map([...replicas].map(([name, child]) => [name, child.lines.length]));
    return new Promise((resolve, reject) => {
      const giveUp = setTimeout(() => {
        clearInterval(poll);
        reject(new Error(`no replica acquired the lease within 10 s: ${[...replicas.keys()].join(', ')}`));
      }, 10_000);
      const poll = setInterval(() => {
        for (const [name, child] of replicas) {
          if (child.lines.slice(seen.get(name)).some((line) => line.startsWith('acquired '))) {
            clearInterval(poll);
            clearTimeout(giveUp);
            resolve(name);
          }
        }
      }, 5);
    });
  }

  it('one holder at a time: no overlap, growing fencing tokens, handovers as quick as the lease allows', async () => {
    const script = compileApp(new URL('fixtures/replica.ts', import.meta.url).pathname);
    const env = { REDIS_URL, KEY_PREFIX: prefix, LEASE_MS: String(LEASE_MS) };
    for (const name of ['A', 'B', 'C']) replicas.set(name, startNode(script, { ...env, REPLICA: name }));
    const first = nextHolder();
    await Promise.all([...replicas.values()].map((child) => child.waitFor('ready')));
    const killed = await first;
    await sleep(HOLDING);

    // The holder dies without releasing: the others wait for its lease to expire.
    const next = nextHolder();
    const killedAt = clock();
    replicas.get(killed)!.process.kill('SIGKILL');
    await replicas.get(killed)!.exited;
    replicas.delete(killed);
    const closed = await next;
    await sleep(HOLDING);

    // The next holder is closed gracefully: it drains, then releases its lease.
    const last = nextHolder();
    const closing = replicas.get(closed)!;
    closing.process.kill('SIGTERM');
    expect(await closing.exited).toEqual({ code: null, signal: 'SIGTERM' });
    replicas.delete(closed);
    const survivor = await last;
    await sleep(HOLDING);
    const ending = replicas.get(survivor)!;
    ending.process.kill('SIGTERM');
    await ending.exited;
    replicas.delete(survivor);

    const runs = (await redis.lrange(`${prefix}runs`, 0, -1))
      .map((entry) => JSON.parse(entry) as RunEntry)
      .sort((a, b) => a[2] - b[2]);
    const [[, , releasedAt]] = (await redis.lrange(`${prefix}closed`, 0, -1))
      .map((entry) => JSON.parse(entry) as [string, string, number])
      .filter(([, replica]) => replica === closed);

    // What the lease promises (README, "Running several replicas"): runs start in the order of their fencing
    // tokens, so no stale holder starts a run once a newer token is in use, and two runs that overlap (a
    // holder paused past its margin can still be finishing one) have different tokens, which a resource
    // that remembers the highest token it has seen uses to refuse the stale one.
    for (let i = 1; i < runs.length; i++) {
      const [previous, run] = [runs[i - 1], runs[i]];
      expect({ run, tokenNotBelowPrevious: run[1] >= previous[1] }).toEqual({
        run,
        tokenNotBelowPrevious: true,
      });
      const overlaps = runs.slice(0, i).filter((earlier) => earlier[3] > run[2]);
      for (const earlier of overlaps) {
        expect({ run, earlier, newerToken: run[1] > earlier[1] }).toEqual({ run, earlier, newerToken: true });
      }
    }
    const byReplica = (name: string) => runs.filter(([replica]) => replica === name);
    for (const name of [killed, closed, survivor]) expect(byReplica(name).length).toBeGreaterThan(10);
    // Each holder's tokens are all larger than those of the holder before it.
    const tokens = [killed, closed, survivor].map((name) => byReplica(name).map((run) => run[1]));
    expect(Math.max(...tokens[0])).toBeLessThan(Math.min(...tokens[1]));
    expect(Math.max(...tokens[1])).toBeLessThan(Math.min(...tokens[2]));

    const sigkillHandover = byReplica(closed)[0][2] - killedAt;
    const gracefulHandover = byReplica(survivor)[0][2] - releasedAt;
    console.log(
      `handover after SIGKILL: ${sigkillHandover.toFixed(0)} ms (bound ${LEASE_MS + RETRY + EVERY + LOAD} ms); ` +
        `after a graceful close: ${gracefulHandover.toFixed(0)} ms from the release (bound ${RETRY + EVERY + LOAD} ms)`,
    );
    expect(sigkillHandover).toBeGreaterThan(0);
    expect(sigkillHandover).toBeLessThan(LEASE_MS + RETRY + EVERY + LOAD);
    expect(gracefulHandover).toBeGreaterThan(0);
    expect(gracefulHandover).toBeLessThan(RETRY + EVERY + LOAD);
  }, 60_000);
});
