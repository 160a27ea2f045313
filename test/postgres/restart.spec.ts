// PostgreSQL restarted while a replica holds the lease of an exclusive job. The test runs a cluster of its
// own on a free port, so that restarting it disturbs no other test; the leases survive the restart on disk,
// and the fencing tokens must not go backwards.
import { afterAll, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { Periodic, type PeriodicContext, PeriodicModule, PostgresCoordinator } from '../../lib/index.js';
import { freePort } from '../nest/child-app.js';
import { until, useApps } from '../nest/helpers.js';
import { describeWithOwnCluster, OwnCluster } from './postgres.js';

const describeCluster = await describeWithOwnCluster();

// Long enough that a loaded machine's pauses stay within the margin (leaseMs / 10).
const LEASE_MS = 1500;

describeCluster('PostgreSQL restarted', () => {
  const createApp = useApps();
  let cluster: OwnCluster | undefined;
  const pools: pg.Pool[] = [];
  afterAll(async () => {
    for (const pool of pools) await pool.end().catch(() => undefined);
    cluster?.drop();
  });

  it('the lease is lost while it is away, taken again when it is back, with a larger token', async () => {
    cluster = new OwnCluster(await freePort());
    cluster.create();
    const runs: { startedAt: number; fencingToken: number }[] = [];
    @Injectable()
    class Jobs {
      @Periodic({ every: 50, exclusive: true, name: 'report' })
      report({ startedAt, fencingToken }: PeriodicContext): void {
        runs.push({ startedAt, fencingToken: fencingToken! });
      }
    }
    const pool = new pg.Pool({ connectionString: cluster.url, connectionTimeoutMillis: 1000 });
    pool.on('error', () => undefined);
    pools.push(pool);
    const coordinator = new PostgresCoordinator({ pool, leaseMs: LEASE_MS });
    const app = await createApp({ imports: [PeriodicModule.forRoot({ coordinator })], providers: [Jobs] });
    await app.events.once('leaseAcquired');
    // A run with the first holding's token (on a loaded machine the first may come some hundreds of ms later).
    const before = await until(() => runs.at(-1));

    const lost = app.events.once('leaseLost');
    const downAt = performance.now();
    cluster.ctl('restart');
    const upAt = performance.now();
    await lost;
    const { fencingToken } = await app.events.once('leaseAcquired');
    // Runs again, every 50 ms: four of them come within a second on a loaded machine.
    const after = await until(() => {
      const since = runs.filter((run) => run.startedAt > upAt);
      return since.length > 3 ? since : undefined;
    });
    expect(fencingToken).toBeGreaterThan(before.fencingToken);
    expect(after.every((run) => run.fencingToken === fencingToken)).toBe(true);
    console.log(
      `PostgreSQL restart: the restart took ${(upAt - downAt).toFixed(0)} ms; no exclusive run for ` +
        `${(after[0].startedAt - before.startedAt).toFixed(0)} ms (leaseMs ${LEASE_MS})`,
    );
    await app.close();
  }, 60_000);

  it('a pause outlives the restart: the job is still paused when the lease is taken again, until a resume', async () => {
    if (cluster === undefined) {
      cluster = new OwnCluster(await freePort());
      cluster.create();
    }
    const runs: number[] = [];
    const pool = new pg.Pool({ connectionString: cluster.url, connectionTimeoutMillis: 1000 });
    pool.on('error', () => undefined);
    pools.push(pool);
    const coordinator = new PostgresCoordinator({ pool, table: 'paused_leases', leaseMs: LEASE_MS });
    const app = await createApp({ imports: [PeriodicModule.forRoot({ coordinator, replica: 'pod-1' })] });
    app.registry.add('report', () => void runs.push(performance.now()), { every: 50, exclusive: true });
    await app.events.once('leaseAcquired');
    await app.registry.pause('report', { by: 'alice', note: 'before the restart' });
    const lost = app.events.once('leaseLost');
    cluster.ctl('restart');
    const upAt = performance.now();
    await lost;
    await app.events.once('leaseAcquired');
    // Many slots after the lease is back: each claim is answered "paused".
    await sleep(500);
    expect(runs.filter((at) => at > upAt)).toEqual([]);
    expect(app.registry.status('report').state).toBe('paused');
    expect(await coordinator.readPause('report')).toMatchObject({ by: 'alice', note: 'before the restart' });
    await app.registry.resume('report', { by: 'bob' });
    await app.events.once('started');
    expect((await app.registry.audit('report')).map(({ action, by }) => [action, by])).toEqual([
      ['resume', 'bob'],
      ['pause', 'alice'],
    ]);
    await app.close();
  }, 60_000);
});
