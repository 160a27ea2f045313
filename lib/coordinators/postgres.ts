import type { EventEmitter } from 'node:events';
import type { PeriodicCoordinator, PeriodicFleetSchedule } from '../scheduler/coordinator-port.js';
import { describeValue } from '../scheduler/errors.js';
import { checkedOptions, type OptionRule } from '../scheduler/rules.js';
import { integerReply, LEASE_MS } from './replies.js';

/** What the coordinator needs of its connection: a `pg` Pool or Client has it. */
export interface PostgresQueryable {
  query(text: string, values?: unknown[]): Promise<{ rows: unknown[] }>;
}

/** Options of {@link PostgresCoordinator}. */
export interface PostgresCoordinatorOptions {
  /** A `pg` Pool (or Client, or any object with `query(text, values)`); the application closes it. */
  pool: PostgresQueryable;
  /**
   * The table that keeps the leases and the jobs' schedules, created if missing: a plain SQL identifier, optionally `schema.table`.
   * Give each application sharing a database its own. @default 'periodic_leases'
   */
  table?: string;
  /** How long a lease lasts unless renewed, in integer milliseconds (≥ 100). @default 10_000 */
  leaseMs?: number;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

const RULES = {
  pool: {
    accepts: (value) => typeof (value as Partial<PostgresQueryable> | null | undefined)?.query === 'function',
    expected:
      'a pg Pool or Client (an object with query(text, values)), such as ' +
      'new Pool({ connectionString: process.env.DATABASE_URL })',
    required: true,
  },
  table: {
    accepts: (value) => {
      const parts = typeof value === 'string' ? value.split('.') : [];
      return parts.length >= 1 && parts.length <= 2 && parts.every((part) => IDENTIFIER.test(part));
    },
    expected:
      'a plain SQL identifier, or schema.table, of letters, digits and _ (at most 63 each, not starting with ' +
      "a digit), such as 'periodic_leases'",
  },
  leaseMs: LEASE_MS,
} satisfies Record<keyof PostgresCoordinatorOptions, OptionRule>;

/**
 * Shares the leases of `exclusive` jobs between the replicas of an application through PostgreSQL: one row
 * per job in one table, timed on the database server's clock, which also keeps the job's schedule. Each step is one statement, so no connection
 * is held between them (no advisory lock pins one). A released lease keeps its row, and with it the job's
 * last fencing token and its schedule; a new token is the larger of that plus one and the server's clock in microseconds, so
 * tokens grow even if the table is truncated.
 */
export class PostgresCoordinator implements PeriodicCoordinator {
  /** The table, quoted: `"schema"."table"`. */
  readonly table: string;
  /** How long a lease lasts unless renewed, in ms. */
  readonly leaseMs: number;
  readonly #pool: PostgresQueryable;
  #created: Promise<void> | undefined;

  constructor(options: PostgresCoordinatorOptions) {
    const where = 'new PostgresCoordinator()';
    const given = checkedOptions(where, options, RULES, '{ pool: new Pool({ connectionString }) }');
    const {
      pool,
      table = 'periodic_leases',
      leaseMs = 10_000,
    } = given as unknown as PostgresCoordinatorOptions;
    this.#pool = pool;
    // pg emits the error of a connection that drops while idle on its pool (or client), and an emitter with no
    // listener for 'error' throws it: the whole process would go down with the database. The next statement
    // fails and is reported by the scheduler, so this listener only keeps the process up.
    (pool as Partial<Pick<EventEmitter, 'on'>>).on?.('error', () => undefined);
    this.table = table
      .split('.')
      .map((part) => `"${part}"`)
      .join('.');
    this.leaseMs = leaseMs;
  }

  async acquire(name: string, owner: string): Promise<number> {
    const rows = await this.#query(
      `INSERT INTO ${this.table} AS lease (name, owner, expires_at, fencing_token)
       VALUES ($1, $2, clock_timestamp() + $3::integer * interval '1 millisecond',
               (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
       ON CONFLICT (name) DO UPDATE
         SET owner = excluded.owner, expires_at = excluded.expires_at,
             fencing_token = greatest(lease.fencing_token + 1, excluded.fencing_token)
         WHERE lease.owner IS NULL OR lease.expires_at <= clock_timestamp()
       RETURNING fencing_token`,
      [name, owner, this.leaseMs],
    );
    if (rows.length === 0) return 0;
    return integerReply('acquire', (rows[0] as { fencing_token?: unknown } | undefined)?.fencing_token);
  }

  async renew(name: string, owner: string): Promise<boolean> {
    const rows = await this.#query(
      `UPDATE ${this.table} SET expires_at = clock_timestamp() + $3::integer * interval '1 millisecond'
       WHERE name = $1 AND owner = $2 AND expires_at > clock_timestamp()
       RETURNING 1`,
      [name, owner, this.leaseMs],
    );
    return rows.length === 1;
  }

  async release(name: string, owner: string): Promise<boolean> {
    const rows = await this.#query(
      `UPDATE ${this.table} SET owner = NULL, expires_at = clock_timestamp()
       WHERE name = $1 AND owner = $2 AND expires_at > clock_timestamp()
       RETURNING 1`,
      [name, owner],
    );
    return rows.length === 1;
  }

  async readSchedule(name: string): Promise<PeriodicFleetSchedule | null> {
    const [row] = (await this.#query(
      `SELECT grid, last_slot, next_slot FROM ${this.table} WHERE name = $1 AND grid IS NOT NULL`,
      [name],
    )) as { grid?: unknown; last_slot?: unknown; next_slot?: unknown }[];
    if (row === undefined) return null;
    if (typeof row.grid !== 'string')
      throw new Error(`the database answered ${describeValue(row)} to readSchedule`);
    return {
      grid: row.grid,
      last: integerReply('readSchedule', row.last_slot),
      next: integerReply('readSchedule', row.next_slot),
    };
  }

  async writeSchedule(
    name: string,
    owner: string,
    fencingToken: number,
    { grid, last, next }: PeriodicFleetSchedule,
  ): Promise<boolean> {
    const rows = await this.#query(
      `UPDATE ${this.table} SET grid = $4, last_slot = $5, next_slot = $6
       WHERE name = $1 AND owner = $2 AND fencing_token = $3 AND expires_at > clock_timestamp()
         AND (grid IS NULL OR last_slot <= $5)
       RETURNING 1`,
      [name, owner, fencingToken, grid, last, next],
    );
    return rows.length === 1;
  }

  /** The statement's rows, once the table exists. */
  async #query(text: string, values: unknown[]): Promise<unknown[]> {
    await (this.#created ??= this.#create());
    const result = await this.#pool.query(text, values);
    if (!Array.isArray(result?.rows)) {
      throw new Error(`the database answered ${describeValue(result)}, which has no rows`);
    }
    return result.rows;
  }

  /** Creates the table if it is missing; replicas that start together may race, and the loser tries again. */
  async #create(): Promise<void> {
    const create = `CREATE TABLE IF NOT EXISTS ${this.table} (
      name text PRIMARY KEY,
      owner text,
      expires_at timestamptz NOT NULL,
      fencing_token bigint NOT NULL,
      grid text,
      last_slot bigint NOT NULL DEFAULT 0,
      next_slot bigint NOT NULL DEFAULT 0
    )`;
    try {
      await this.#pool.query(create).catch(() => this.#pool.query(create));
    } catch (error) {
      this.#created = undefined;
      throw error;
    }
  }
}
