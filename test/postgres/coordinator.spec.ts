// PostgresCoordinator against a real PostgreSQL: its table and statements, the coordinator contract, and
// exclusive jobs of two applications sharing the database.
import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { Injectable } from '@nestjs/common';
import { Periodic, type PeriodicContext, PeriodicModule, PostgresCoordinator } from '../../lib/index.js';
import { coordinatorContract } from '../../lib/testing/index.js';
import { useApps } from '../nest/helpers.js';
import { describeWithPostgres, usePostgres } from './postgres.js';

const describePostgres = await describeWithPostgres();

describePostgres('the leases table', () => {
  const postgres = usePostgres();
  const coordinator = () =>
    new PostgresCoordinator({ pool: postgres.pool(), table: postgres.table(), leaseMs: 5000 });

  it('is created on first use; a lease is one row timed on the server clock; a release keeps the token', async () => {
    const pool = postgres.pool();
    const leases = coordinator();
    const token = await leases.acquire('cleanup', 'owner-a');
    const { rows } = await pool.query(
      `SELECT owner, fencing_token, expires_at - clock_timestamp() AS left FROM ${leases.table} WHERE name = $1`,
      ['cleanup'],
    );
    expect(rows).toEqual([{ owner: 'owner-a', fencing_token: String(token), left: expect.anything() }]);
    const [{ micros }] = (
      await pool.query('SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS micros')
    ).rows as { micros: string }[];
    expect(token).toBeLessThanOrEqual(Number(micros));
    expect(token).toBeGreaterThan(Number(micros) - 60e6);
    await expect(leases.release('cleanup', 'owner-a')).resolves.toBe(true);
    const after = await pool.query(`SELECT owner, fencing_token FROM ${leases.table}`);
    expect(after.rows).toEqual([{ owner: null, fencing_token: String(token) }]);
  });

  it('replicas that start together all find the table', async () => {
    const table = postgres.table();
    const replicas = Array.from(
      { length: 5 },
      () => new PostgresCoordinator({ pool: postgres.pool(), table }),
    );
    const tokens = await Promise.all(replicas.map((replica, i) => replica.acquire('cleanup', `owner-${i}`)));
    expect(tokens.filter((token) => token > 0)).toHaveLength(1);
  });

  it('a schema-qualified table is quoted part by part', async () => {
    const table = postgres.table();
    const leases = new PostgresCoordinator({ pool: postgres.pool(), table: `public.${table}` });
    expect(leases.table).toBe(`"public"."${table}"`);
    await expect(leases.acquire('cleanup', 'owner-a')).resolves.toBeGreaterThan(0);
  });
});

describe('table options never share a table', () => {
  // The relations the coordinator makes for a table option (docs/replicas.md, "Keys in Redis").
  const relations = (table: string) =>
    [
      '',
      '_members',
      '_audit',
      '_runs',
      '_runs_seq',
      '_summary',
      '_trigger',
      '_stored',
      '_sc',
      '_sn',
      '_sh',
      '_incident',
    ].map((suffix) => `${table}${suffix}`);
  const pool = { query: async () => ({ rows: [] }) };
  const accepted = (table: string) => {
    try {
      new PostgresCoordinator({ pool, table });
      return true;
    } catch {
      return false;
    }
  };

  it('two different table options that are accepted name no relation in common', () => {
    const words = fc.constantFrom(
      'a',
      'x',
      '_',
      'members',
      'audit',
      'runs',
      'seq',
      'summary',
      'trigger',
      'stored',
      'sc',
      'sn',
      'sh',
    );
    const tables = fc
      .array(words, { minLength: 1, maxLength: 5 })
      .map((parts) => `t${parts.join('')}`)
      .filter(accepted);
    fc.assert(
      fc.property(tables, tables, (one, other) => {
        if (one === other) return;
        const theirs = new Set(relations(other));
        expect(relations(one).filter((relation) => theirs.has(relation))).toEqual([]);
      }),
      { numRuns: 5000 },
    );
    expect(accepted('periodic_leases_runs')).toBe(false);
    expect(accepted('periodic_leases_runs_seq')).toBe(false);
    expect(accepted('periodic_leases_stored')).toBe(false);
  });
});

describePostgres('the longest lease', () => {
  const postgres = usePostgres();

  it('leaseMs 86,400,000 (a day, the ceiling) is one PostgreSQL grants and renews', async () => {
    const leases = new PostgresCoordinator({
      pool: postgres.pool(),
      table: postgres.table(),
      leaseMs: 86_400_000,
    });
    await expect(leases.acquire('cleanup', 'owner-a')).resolves.toBeGreaterThan(0);
    await expect(leases.renew('cleanup', 'owner-a')).resolves.toBe(true);
    const member = { owner: 'owner-b', replica: 'b', jobs: '' };
    const reply = await leases.heartbeat({ member, renew: [], acquire: ['other'] });
    expect(reply.acquired[0]?.fencingToken).toBeGreaterThan(0);
  });
});

describePostgres('PostgresCoordinator keeps the coordinator contract', () => {
  const postgres = usePostgres();
  const table = postgres.table();
  const contract = coordinatorContract({
    make: (leaseMs) => new PostgresCoordinator({ pool: postgres.pool(), table, leaseMs }),
    wipe: async () => {
      await postgres.pool().query(`TRUNCATE "${table}", "${table}_stored"`);
    },
    garbled: () =>
      new PostgresCoordinator({ pool: { query: async () => ({ rows: [{ fencing_token: 'soon' }] }) } }),
  });
  for (const [rule, check] of contract) it(rule, check);
});

describePostgres('two applications with one exclusive job', () => {
  const createApp = useApps();
  const postgres = usePostgres();
  const table = postgres.table();

  it('one runs the job; when it closes, the other takes over with a larger fencing token', async () => {
    const runs: [string, number][] = [];
    const appNamed = (app: string) => {
      @Injectable()
      class Reports {
        @Periodic({ every: 20, exclusive: true })
        send({ fencingToken }: PeriodicContext): void {
          runs.push([app, fencingToken!]);
        }
      }
      const coordinator = new PostgresCoordinator({ pool: postgres.pool(), table, leaseMs: 3000 });
      return createApp({
        imports: [PeriodicModule.forRoot({ coordinator, logger: false })],
        providers: [Reports],
      });
    };
    const first = await appNamed('first');
    const { fencingToken: firstToken } = await first.events.once('leaseAcquired');
    const second = await appNamed('second');
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(new Set(runs.map(([app]) => app))).toEqual(new Set(['first']));
    const taken = second.events.once('leaseAcquired');
    await first.close();
    const { fencingToken: secondToken } = await taken;
    expect(secondToken).toBeGreaterThan(firstToken);
    await second.events.once('started');
    expect(runs.filter(([app]) => app === 'second').every(([, token]) => token === secondToken)).toBe(true);
  });
});
