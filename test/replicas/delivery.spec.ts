// Slots that run at least once (SPEC 19) with real processes on Redis and PostgreSQL: the holder of an exclusive
// job is killed (SIGKILL) in the middle of a run. With delivery 'atLeastOnce' the replica that takes the lease
// over runs that slot again, to its end; with 'atMostOnce' the slot is lost, and no slot runs twice either way.
// Either way the killed run's record is closed by the next holder ('leaseLost', PeriodicReplicaLost, SPEC 22).
import { describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  PostgresCoordinator,
  type PeriodicCoordinator,
  type PeriodicRunEntry,
  RedisCoordinator,
} from '../../lib/index.js';
import { postgresPool } from '../postgres/postgres.js';
import { redisClient } from '../redis/redis.js';
import { clock, type RunEntry, type Store, stores, useReplicas } from './stores.js';

const LEASE_MS = 1500;
const EVERY = 4000;
/** Long enough to kill its replica in the middle of it. */
const RUN_MS = 1500;

describe.each(stores)('on %s', (_, store, describeStore) => {
  describeStore('a holder killed in the middle of a run', () => delivery(store));
});

/** Job `job`'s history as the fleet keeps it in `store`, newest first, read the way a replica reads it. */
async function fleetHistory(store: Store, job: string): Promise<PeriodicRunEntry[]> {
  let coordinator: PeriodicCoordinator;
  let close: () => Promise<unknown>;
  if (store.env.STORE === 'postgres') {
    const pool = postgresPool();
    coordinator = new PostgresCoordinator({ pool, table: store.env.TABLE, leaseMs: LEASE_MS });
    close = () => pool.end();
  } else {
    const client = redisClient();
    coordinator = new RedisCoordinator({ client, keyPrefix: store.env.KEY_PREFIX, leaseMs: LEASE_MS });
    close = () => client.quit();
  }
  try {
    return await coordinator.readHistory!(job, 100, null, 100);
  } finally {
    await close();
  }
}

function delivery(store: Store): void {
  const { replicas, start, end, nextHolder } = useReplicas(store);
  let counted = 0;

  /** Kills the holder in the middle of a run; resolves the slot it was running and the runs recorded after. */
  async function killMidRun(mode: 'atLeastOnce' | 'atMostOnce') {
    const env = {
      LEASE_MS: String(LEASE_MS),
      EVERY: String(EVERY),
      RUN_MS: String(RUN_MS),
      DELIVERY: mode,
      JOB: expect.getState().currentTestName ?? 'job',
    };
    for (const name of ['A', 'B']) start(name, env);
    await nextHolder();
    // The spread has settled by the first slot; its holder is the replica that says it started a run.
    let killed: { name: string; slot: number } | undefined;
    for (let waited = 0; killed === undefined && waited < 30_000; waited += 20) {
      for (const [name, child] of replicas) {
        const started = child.lines.find((line) => line.startsWith('started '));
        if (started !== undefined) killed = { name, slot: Number(started.split(' ')[1]) };
      }
      await sleep(20);
    }
    if (killed === undefined) throw new Error('no replica started a run within 30 s');
    // Well within the run, once its start has reached the store.
    await sleep(300);
    const killedAt = clock();
    await end(killed.name, 'SIGKILL');
    // The other takes the lease over within a lease period, and runs the next slot.
    await sleep(LEASE_MS + EVERY + RUN_MS + 1000);
    await Promise.all([...replicas.keys()].map((name) => end(name, 'SIGTERM')));
    const recorded = (await store.entries<RunEntry>('runs')).slice(counted);
    counted += recorded.length;
    const history = await fleetHistory(store, env.JOB);
    return { killed, killedAt, recorded, history };
  }

  /** The killed run, as the fleet's history keeps it: closed by the next holder (SPEC 22), never in flight. */
  function expectClosed(
    history: PeriodicRunEntry[],
    killed: { name: string; slot: number },
    killedAt: number,
  ) {
    const lost = history.find((run) => run.slot === killed.slot && run.attempt === 1)!;
    expect(lost).toMatchObject({ reason: 'leaseLost', error: { name: 'PeriodicReplicaLost' } });
    expect(lost.error!.message).toBe(`replica ${lost.replica} stopped renewing its lease`);
    // When the next holder found the lease expired: after the kill, within two lease periods of it.
    const wallKilledAt = killedAt - performance.timeOrigin - performance.now() + Date.now();
    expect(lost.finishedAt!).toBeGreaterThan(wallKilledAt);
    expect(lost.finishedAt! - wallKilledAt).toBeLessThan(2 * LEASE_MS + 1000);
    expect(history.filter((run) => run.reason === null)).toEqual([]);
    return lost;
  }

  it("with 'atLeastOnce', the next holder runs the killed run's slot again, to its end", async () => {
    const { killed, killedAt, recorded, history } = await killMidRun('atLeastOnce');
    const lost = expectClosed(history, killed, killedAt);
    const recovery = history.find((run) => run.origin === 'recovery')!;
    expect(recovery).toMatchObject({ slot: killed.slot, attempt: 2, reason: 'normal' });
    expect(recovery.startedAt).toBeGreaterThanOrEqual(lost.finishedAt!);
    const slots = recorded.map((run) => run[4]);
    expect(recorded.every(([replica]) => replica !== killed.name)).toBe(true);
    expect(slots).toContain(killed.slot);
    expect(new Set(slots).size).toBe(slots.length);
    const recovered = recorded.find((run) => run[4] === killed.slot)!;
    console.log(
      `${store.name}: the killed slot started again ${Math.round(recovered[2] - killedAt)} ms after the SIGKILL ` +
        `(leaseMs ${LEASE_MS}, runs of ${RUN_MS} ms)`,
    );
  }, 60_000);

  it("with 'atMostOnce', the killed run's slot is lost, and none runs twice", async () => {
    const { killed, killedAt, recorded, history } = await killMidRun('atMostOnce');
    expectClosed(history, killed, killedAt);
    const slots = recorded.map((run) => run[4]);
    expect(slots).not.toContain(killed.slot);
    expect(slots.length).toBeGreaterThan(0);
    expect(new Set(slots).size).toBe(slots.length);
  }, 60_000);
}
