import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { afterAll, describe } from '@jest/globals';
import pg from 'pg';

type Describe = (name: string, tests: () => void) => void;

/** The PostgreSQL these tests use: `DATABASE_URL`, else the local default. */
export const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A pool on `DATABASE_URL` whose idle-client errors (a server restarted under it) are left to the test. */
export function postgresPool(options: pg.PoolConfig = {}): pg.Pool {
  return new pg.Pool({ connectionString: DATABASE_URL, ...options }).on('error', () => undefined);
}

/**
 * `describe` when PostgreSQL answers at `DATABASE_URL`; otherwise `describe.skip` and a message that says why,
 * or, with `CI=true`, an error: CI must not pass on tests it skipped.
 */
export async function describeWithPostgres(): Promise<Describe> {
  const client = new pg.Client({ connectionString: DATABASE_URL, connectionTimeoutMillis: 2000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return describe;
  } catch (error) {
    const why = `no PostgreSQL answers at ${DATABASE_URL} (${(error as Error).message})`;
    if (process.env.CI === 'true') throw new Error(`${why}; CI needs it: .ci/run starts PostgreSQL`);
    process.stderr.write(
      `SKIPPED: these PostgreSQL tests, as ${why}. Start PostgreSQL, or set DATABASE_URL.\n`,
    );
    return describe.skip;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** A table name no other test uses, so that tests can run side by side on one database. */
export function uniqueTable(): string {
  return `periodic_test_${process.pid}_${Math.random().toString(36).slice(2)}`;
}

/**
 * A pool for the tests of the calling `describe`, made when first asked for, and tables no other test uses;
 * the tables are dropped and the pool closed after those tests.
 */
export function usePostgres(): { pool(): pg.Pool; table(): string } {
  let pool: pg.Pool | undefined;
  const tables: string[] = [];
  afterAll(async () => {
    if (pool === undefined) return;
    for (const table of tables) await dropTable(pool, table);
    await pool.end();
  });
  return {
    pool: () => (pool ??= postgresPool()),
    table: () => {
      tables.push(uniqueTable());
      return tables.at(-1)!;
    },
  };
}

/** Drops a table a test made, and the coordinator's table of members beside it. */
export async function dropTable(pool: pg.Pool, table: string): Promise<void> {
  await pool.query(
    `DROP TABLE IF EXISTS "${table}", "${table}_members", "${table}_audit", "${table}_runs", "${table}_summary", "${table}_trigger", "${table}_stored", "${table}_incident"`,
  );
}

/**
 * As {@link describeWithPostgres}, for a test that runs a PostgreSQL cluster of its own: Debian's
 * `pg_createcluster` must be there, and the tests must run as root (it creates the cluster as postgres).
 */
export async function describeWithOwnCluster(): Promise<Describe> {
  const found = await describeWithPostgres();
  if (found !== describe) return found;
  const { error, status } = spawnSync('pg_lsclusters', ['--help'], { stdio: 'ignore' });
  if (error === undefined && status === 0 && process.getuid?.() === 0) return describe;
  const why = 'pg_createcluster cannot be run as root here';
  if (process.env.CI === 'true') throw new Error(`${why}; CI needs it: install Debian's postgresql`);
  process.stderr.write(`SKIPPED: this PostgreSQL restart test, as ${why}.\n`);
  return describe.skip;
}

/** A PostgreSQL cluster of a test's own, on `port`, to stop and restart without disturbing other tests. */
export class OwnCluster {
  readonly version = readdirSync('/etc/postgresql')[0];
  readonly name = `periodic_test_${process.pid}`;

  constructor(readonly port: number) {}

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  create(): void {
    run('pg_createcluster', [this.version, this.name, '-p', String(this.port), '--', '--auth=trust']);
    this.ctl('start');
  }

  ctl(action: 'start' | 'stop' | 'restart'): void {
    run('pg_ctlcluster', ['--skip-systemctl-redirect', this.version, this.name, action]);
  }

  drop(): void {
    run('pg_dropcluster', ['--stop', this.version, this.name]);
  }
}

function run(command: string, args: string[]): void {
  const { status, stderr, error } = spawnSync(command, args, { encoding: 'utf8' });
  if (error !== undefined || status !== 0) {
    throw new Error(`${command} ${args.join(' ')} failed: ${error?.message ?? stderr}`);
  }
}
