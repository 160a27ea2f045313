// A job whose data the database refuses fails alone (docs/replicas.md, "A job the store refuses"): on a database
// in LATIN1, which cannot hold the name 名前, that job takes no lease while the jobs beside it run, and every
// record, note and error is stored whatever characters it carries.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import pg from 'pg';
import { Periodic, PeriodicModule, PostgresCoordinator } from '../../lib/index.js';
import { useApps } from '../nest/helpers.js';
import { DATABASE_URL, describeWithPostgres, postgresPool } from './postgres.js';

const describePostgres = await describeWithPostgres();

const REFUSED = '名前';
const member = (replica = 'web-1') => ({ owner: `${replica}/1`, replica, jobs: 'digest' });

describePostgres('a database that refuses one job’s name', () => {
  const database = `periodic_latin1_${process.pid}_${Math.random().toString(36).slice(2)}`;
  const url = new URL(DATABASE_URL);
  url.pathname = `/${database}`;
  const admin = postgresPool();
  let pool: pg.Pool;
  /** The statements sent to the LATIN1 database since the last call. */
  let sent: string[] = [];
  const counted = () => ({
    query: (text: string, values?: unknown[]) => {
      sent.push(text);
      return pool.query(text, values);
    },
  });
  const taken = () => {
    const statements = sent;
    sent = [];
    return statements;
  };

  beforeAll(async () => {
    await admin.query(
      `CREATE DATABASE "${database}" ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0`,
    );
    pool = new pg.Pool({ connectionString: url.href }).on('error', () => undefined);
  });

  afterAll(async () => {
    await pool?.end();
    await admin.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    await admin.end();
  });

  it('the database does refuse it, in one statement with the others (what this file is about)', async () => {
    await expect(pool.query('SELECT $1::text', [REFUSED])).rejects.toMatchObject({ code: '22P05' });
  });

  it('a heartbeat takes the other leases, and answers the refused job as refused, with the database’s error', async () => {
    const coordinator = new PostgresCoordinator({ pool: counted(), table: 'beat', leaseMs: 60_000 });
    const reply = await coordinator.heartbeat({
      member: member(),
      renew: [],
      acquire: ['a', REFUSED, 'b', 'café'],
    });
    expect(reply.acquired.map((holding) => holding !== null)).toEqual([true, false, true, true]);
    expect(reply.refused).toEqual([{ name: REFUSED, error: expect.stringContaining('LATIN1') }]);
    expect(reply.members.map(({ replica }) => replica)).toEqual(['web-1']);
    taken();
    // Within leaseMs, the refused job is answered from memory: one statement renews the others.
    const [a, , b, cafe] = reply.acquired;
    const next = await coordinator.heartbeat({
      member: member(),
      renew: [
        { name: 'a', fencingToken: a!.fencingToken },
        { name: 'b', fencingToken: b!.fencingToken },
        { name: 'café', fencingToken: cafe!.fencingToken },
      ],
      acquire: [REFUSED],
    });
    expect(next.renewed).toEqual([true, true, true]);
    expect(next.acquired).toEqual([null]);
    expect(next.refused).toEqual([{ name: REFUSED, error: expect.stringContaining('LATIN1') }]);
    expect(taken().filter((text) => text.includes('WITH member AS'))).toHaveLength(1);
  });

  it('the refused job is tried again after leaseMs, and refused again', async () => {
    const coordinator = new PostgresCoordinator({ pool: counted(), table: 'again', leaseMs: 100 });
    const first = await coordinator.heartbeat({ member: member(), renew: [], acquire: [REFUSED] });
    expect(first.refused).toHaveLength(1);
    taken();
    await new Promise((resolve) => setTimeout(resolve, 150));
    const again = await coordinator.heartbeat({ member: member(), renew: [], acquire: [REFUSED] });
    expect(again.refused).toHaveLength(1);
    expect(taken().filter((text) => text.includes('WITH member AS')).length).toBeGreaterThan(1);
  });

  it('a replica whose own name the database refuses fails its heartbeat: no job is blamed', async () => {
    const coordinator = new PostgresCoordinator({ pool, table: 'replica', leaseMs: 60_000 });
    await expect(
      coordinator.heartbeat({ member: member(REFUSED), renew: [], acquire: ['a'] }),
    ).rejects.toMatchObject({ code: '22P05' });
  });

  it('reading the fleet answers nothing stored of the refused job, and the others as stored', async () => {
    const coordinator = new PostgresCoordinator({ pool, table: 'fleet', leaseMs: 60_000 });
    await coordinator.heartbeat({ member: member(), renew: [], acquire: ['a'] });
    const reads = await coordinator.readFleet(['a', REFUSED, 'b']);
    expect(reads.map(({ name }) => name)).toEqual(['a', REFUSED, 'b']);
    expect(reads[0]!.holder).toMatchObject({ owner: 'web-1/1' });
    expect(reads[1]).toEqual({
      name: REFUSED,
      holder: null,
      pause: null,
      schedule: null,
      lastRun: null,
      lastSucceededAt: null,
      consecutiveFailures: 0,
    });
  });

  it('runs, notes, errors and triggers keep every character, in a database that holds only Latin-1', async () => {
    const coordinator = new PostgresCoordinator({ pool, table: 'records', leaseMs: 60_000 });
    const note = 'maintenance 名前 🚧, "quoted"\\';
    await coordinator.operate('a', { action: 'pause', by: 'ålice 名前', at: 1, note, replica: 'web-1' }, 10);
    expect(await coordinator.readPause('a')).toMatchObject({ by: 'ålice 名前', note });
    expect(await coordinator.readAudit('a', 10)).toEqual([expect.objectContaining({ note })]);
    const run = {
      id: 'web-1/1#1',
      name: 'a',
      jobId: 1,
      replica: 'web-1',
      fencingToken: 1,
      slot: 1000,
      origin: 'schedule' as const,
      attempt: 1,
      startedAt: 1000,
      finishedAt: 1010,
      reason: 'error' as const,
      durationMs: 10,
      error: { name: 'Error', message: 'la base a refusé 名前 \u{1F4A5}' },
    };
    await coordinator.recordRuns([run], 10);
    expect(await coordinator.readHistory('a', 10, null)).toEqual([expect.objectContaining(run)]);
    const request = { id: 'trigger-1', name: 'a', by: '名前', replica: 'web-2', at: 5 };
    await coordinator.requestTrigger(request);
    await coordinator.answerTrigger('a', 'trigger-1', { ok: false, error: 'déjà 名前', replica: 'web-1' });
    expect(await coordinator.readTrigger('a', 'trigger-1', false)).toEqual({
      ok: false,
      error: 'déjà 名前',
      replica: 'web-1',
    });
  });

  it('latest runs asked in one turn are read in one statement; the refused name fails alone', async () => {
    const coordinator = new PostgresCoordinator({ pool: counted(), table: 'latest', leaseMs: 60_000 });
    const run = (name: string, jobId: number) => ({
      id: `web-1/1#${name}${jobId}`,
      name,
      jobId,
      replica: 'web-1',
      fencingToken: 1,
      slot: jobId * 1000,
      origin: 'schedule' as const,
      attempt: 1,
      startedAt: jobId * 1000,
      finishedAt: jobId * 1000 + 5,
      reason: 'normal' as const,
      durationMs: 5,
      error: null,
    });
    await coordinator.recordRuns([run('a', 1), run('a', 2), run('a', 3), run('b', 1)], 10);
    taken();
    // A replica that takes leases reads each one's latest runs in the same turn.
    const [a, refused, b, none] = await Promise.allSettled([
      coordinator.readHistory('a', 2, null),
      coordinator.readHistory(REFUSED, 2, null),
      coordinator.readHistory('b', 2, null),
      coordinator.readHistory('c', 2, null),
    ]);
    expect(a).toEqual({
      status: 'fulfilled',
      value: [expect.objectContaining({ jobId: 3 }), expect.objectContaining({ jobId: 2 })],
    });
    expect(b).toEqual({ status: 'fulfilled', value: [expect.objectContaining({ name: 'b', jobId: 1 })] });
    expect(none).toEqual({ status: 'fulfilled', value: [] });
    expect(refused).toMatchObject({
      status: 'rejected',
      reason: { message: expect.stringMatching(/LATIN1|character/) },
    });
    // One statement for the four, refused; then halves until the refused name is alone.
    const reads = taken().filter((text) => text.includes('CROSS JOIN LATERAL'));
    expect(reads.length).toBeGreaterThanOrEqual(3);
    expect(reads.length).toBeLessThanOrEqual(5);
  });

  describe('in an application', () => {
    const createApp = useApps();

    it('the jobs beside the refused one run; it runs nowhere, and its refusal is logged with its name', async () => {
      const runs = new Map<string, number>();
      const ran = (name: string) => runs.set(name, (runs.get(name) ?? 0) + 1);
      let enough: () => void;
      const healthy = new Promise<void>((resolve) => (enough = resolve));
      @Injectable()
      class Jobs {
        @Periodic({ name: REFUSED, every: 20, exclusive: true })
        refused(): void {
          ran(REFUSED);
        }
        @Periodic({ name: 'a', every: 20, exclusive: true })
        a(): void {
          ran('a');
          if ((runs.get('a') ?? 0) >= 5 && (runs.get('b') ?? 0) >= 5) enough();
        }
        @Periodic({ name: 'b', every: 20, exclusive: true })
        b(): void {
          ran('b');
        }
      }
      const coordinator = new PostgresCoordinator({ pool, table: 'app', leaseMs: 60_000 });
      const app = await createApp({
        imports: [PeriodicModule.forRoot({ coordinator, logger: false })],
        providers: [Jobs],
      });
      await healthy;
      expect(runs.get(REFUSED)).toBeUndefined();
      const errors = app.logs.periodic().filter((line) => line.startsWith('error:'));
      expect(errors).toEqual([
        expect.stringContaining(`PostgresCoordinator refused the data of job "${REFUSED}": character with`),
      ]);
      expect(errors[0]).toContain('the other jobs go on');
      expect(app.registry.status('a').lease).toEqual({ held: true, fencingToken: expect.any(Number) });
      expect(app.registry.status(REFUSED).lease).toEqual({ held: false, fencingToken: null });
      const [a, refused] = [await app.registry.fleetStatus('a'), await app.registry.fleetStatus(REFUSED)];
      expect(a.lastRun).not.toBeNull();
      expect(a.store.reachable).toBe(true);
      expect(refused).toMatchObject({ holder: null, lastRun: null, store: { reachable: true } });
    });
  });
});
