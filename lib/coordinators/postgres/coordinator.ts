import type { EventEmitter } from 'node:events';
import type {
  PeriodicCoordinator,
  PeriodicFleetMember,
  PeriodicFleetRead,
  PeriodicFleetSchedule,
  PeriodicHeartbeat,
  PeriodicHeartbeatReply,
  PeriodicIncidentKind,
  PeriodicIncidentRecord,
  PeriodicLeaseHeld,
  PeriodicOperation,
  PeriodicRunEntry,
  PeriodicScheduleWrite,
  PeriodicScheduleWritten,
  PeriodicStoredAnswer,
  PeriodicStoredChanges,
  PeriodicStoredQuery,
  PeriodicStoredRecord,
  PeriodicStoredWrite,
  PeriodicTriggerAnswer,
  PeriodicTriggerRequest,
  PeriodicTriggerState,
} from '../../scheduler/coordinator-port.js';
import { describeValue, messageOf } from '../../scheduler/errors.js';
import { outcomeOf } from '../../scheduler/history.js';
import { checkedOptions, type OptionRule } from '../../scheduler/rules.js';
import { schemaOf } from './schema.js';
import {
  integerReply,
  LEASE_MS,
  operationOf,
  RECORD_VERSION,
  runOf,
  triggerAnswerOf,
  triggerOf,
} from '../replies.js';

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
  /** How long a lease lasts unless renewed, in integer milliseconds, 100 to 86,400,000 (a day). @default 10_000 */
  leaseMs?: number;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;
/**
 * The row of the lease table whose `grid` names the fleet's records (`PeriodicHeartbeatReply.fleet`), written by
 * the first heartbeat that finds none; no job has its name, which holds a control character. It goes with the
 * pauses and schedules of the table: another name means they went too (`storeReset`, docs/operations.md).
 */
const FLEET_ROW = '\u0001fleet';
/**
 * The name (as an SQL literal) of the row of the lease table whose `fencing_token` counts the changes of stored
 * schedules: a write takes its numbers there, one writer at a time (its row lock), never below the largest change
 * the schedules' table keeps. No job has its name, which holds a control character.
 */
const CHANGES_ROW = "E'\\u0001schedules'";
/** The table's name: short enough for the names of the tables beside it (`<table>_members`, `_summary`) to be whole. */
const TABLE = /^[A-Za-z_][A-Za-z0-9_]{0,54}$/;

/**
 * What the coordinator appends to `table` to name the tables (and the index) beside it. A table option that ends
 * with one of them is refused: it would be a table beside another table option's, and no suffix is the end of
 * another, so two table options that are not refused never name one table.
 */
const BESIDE = [
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
] as const;

/** The suffix of a table beside another that `table` ends with, if any. */
function besideOf(table: string): string | undefined {
  return BESIDE.find((suffix) => table.endsWith(suffix));
}

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
      const table = parts.at(-1) ?? '';
      return (
        parts.length >= 1 &&
        parts.length <= 2 &&
        TABLE.test(table) &&
        parts.every((part) => IDENTIFIER.test(part)) &&
        besideOf(table) === undefined
      );
    },
    expected:
      'a plain SQL identifier, or schema.table, of letters, digits and _ (the table at most 55, the schema at ' +
      "most 63, not starting with a digit, the table not ending as the tables beside it), such as 'periodic_leases'",
    problem: (value) => {
      const suffix = typeof value === 'string' ? besideOf(value) : undefined;
      return suffix === undefined
        ? undefined
        : `it ends with "${suffix}", as the table of that name beside another table option's does: the two ` +
            'options would share a table; choose a name without it';
    },
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
  /** The table of the fleet's members, beside it: `"schema"."table_members"`. */
  readonly #members: string;
  /** The jobs' audit trails, beside it: `"schema"."table_audit"`. */
  readonly #audit: string;
  /** The jobs' run histories, and what their runs tell of successes and failures: `table_runs`, `table_summary`. */
  readonly #runs: string;
  readonly #summary: string;
  /** Triggers left for the holders, and their answers: `table_trigger`. */
  readonly #triggers: string;
  /** The stored schedules: `table_stored`; and the channel its changes are notified on. */
  readonly #schedules: string;
  readonly #channel: string;
  /** The open incidents: `table_incident`. */
  readonly #incidents: string;
  /** The table's name without its schema, which names its index. */
  readonly #tableName: string;
  /** How long a lease lasts unless renewed, in ms. */
  readonly leaseMs: number;
  readonly #pool: PostgresQueryable;
  #created: Promise<void> | undefined;
  /** The jobs whose names the database refused lately (`#apart`), with its error, and until when, on `performance.now()`. */
  readonly #refused = new Map<string, { error: string; until: number }>();

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
    // listener for 'error' throws it: the whole process would go down with the database. The pool is the
    // application's, and so is that listener: the coordinator says when it is missing, and adds none.
    if ((pool as Partial<Pick<EventEmitter, 'listenerCount'>>).listenerCount?.('error') === 0) {
      process.emitWarning(
        "new PostgresCoordinator(): the pool has no 'error' listener, so a connection that drops while idle " +
          "(a database restart) will take the process down; add one, such as pool.on('error', (error) => " +
          'logger.warn(error.message)) (docs/replicas.md, "Setting it up")',
        { code: 'PERIODIC_POOL_ERROR_LISTENER' },
      );
    }
    const quoted = (name: string) =>
      name
        .split('.')
        .map((part) => `"${part}"`)
        .join('.');
    this.table = quoted(table);
    this.#members = quoted(`${table}_members`);
    this.#audit = quoted(`${table}_audit`);
    this.#runs = quoted(`${table}_runs`);
    this.#summary = quoted(`${table}_summary`);
    this.#triggers = quoted(`${table}_trigger`);
    this.#schedules = quoted(`${table}_stored`);
    this.#channel = `${table}_stored`;
    this.#incidents = quoted(`${table}_incident`);
    this.#tableName = table.split('.').at(-1)!;
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
      `SELECT grid, last_slot, next_slot, runs, backfill FROM ${this.table} WHERE name = $1 AND grid IS NOT NULL`,
      [name],
    )) as ScheduleRow[];
    if (row === undefined) return null;
    if (typeof row.grid !== 'string')
      throw new Error(`the database answered ${describeValue(row)} to readSchedule`);
    return scheduleOf('readSchedule', row);
  }

  async writeSchedule(
    name: string,
    owner: string,
    fencingToken: number,
    schedule: PeriodicFleetSchedule,
  ): Promise<boolean> {
    const { grid, last, next, runs } = schedule;
    const rows = await this.#query(
      `UPDATE ${this.table} SET grid = $4, last_slot = $5, next_slot = $6, runs = $7, backfill = $8
       WHERE name = $1 AND owner = $2 AND fencing_token = $3 AND expires_at > clock_timestamp()
         AND (grid IS NULL OR last_slot <= $5)
       RETURNING 1`,
      [name, owner, fencingToken, grid, last, next, runs ?? null, backfillText(schedule)],
    );
    return rows.length === 1;
  }

  /**
   * One statement: the member's record (and the expired ones forgotten), the renewals, and the leases to acquire
   * (taken if free), each lease taken with its schedule; and the jobs the fleet has paused. Every statement locks the rows of leases in the order of
   * their names; the taking of a lease skips a row that another statement has locked (its holder renews it, or
   * another replica takes it), and inserts only the rows of jobs that have none (an insert that meets a row
   * being updated waits for the update), so that the replicas' steps never wait for each other in a cycle.
   */
  async heartbeat({ member, renew, acquire }: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply> {
    const refused = this.#stillRefused();
    const jobs: BeatJob[] = [
      ...renew.filter(({ name }) => !refused.has(name)).map((held) => ({ name: held.name, held })),
      ...acquire.filter((name) => !refused.has(name)).map((name) => ({ name })),
    ];
    let beat: Beat | undefined;
    try {
      beat = await this.#beat(member, jobs);
    } catch (error) {
      if (!refusedData(error) || jobs.length === 0) throw error;
    }
    if (beat === undefined) {
      // A value of one job, or of a few, that the database refuses: the member's own beat first (its failure is
      // the replica's, and thrown), then the jobs in halves, until each refused one is alone.
      const whole = await this.#beat(member, []);
      const half = Math.ceil(jobs.length / 2);
      for (const part of [jobs.slice(0, half), jobs.slice(half)].filter((some) => some.length > 0)) {
        await this.#apart(part, async (some) => {
          const { renewed, acquired, triggers } = await this.#beat(member, some);
          for (const name of renewed) whole.renewed.add(name);
          for (const [name, holding] of acquired) whole.acquired.set(name, holding);
          whole.triggers.push(...triggers);
        });
      }
      beat = whole;
    }
    const { fleet, schedules, members, paused, triggers, renewed, acquired } = beat;
    const named = [...renew.map(({ name }) => name), ...acquire];
    const refusals = this.#stillRefused();
    return {
      ...(fleet === undefined ? {} : { fleet }),
      schedules,
      members,
      paused,
      triggers,
      renewed: renew.map(({ name }) => renewed.has(name)),
      acquired: acquire.map((name) => acquired.get(name) ?? null),
      refused: named
        .filter((name) => refusals.has(name))
        .map((name) => ({ name, error: refusals.get(name)! })),
    };
  }

  /** The statement of a heartbeat for `jobs` (renewals and takings): the member's record always. */
  async #beat(member: PeriodicFleetMember, jobs: readonly BeatJob[]): Promise<Beat> {
    const renew = jobs.flatMap(({ held }) => (held === undefined ? [] : [held]));
    const acquire = jobs.flatMap(({ name, held }) => (held === undefined ? [name] : []));
    const lease = `clock_timestamp() + $4::integer * interval '1 millisecond'`;
    const floor = '(extract(epoch FROM clock_timestamp()) * 1000000)::bigint';
    const taken =
      'lease.name, lease.owner, lease.fencing_token, lease.grid, lease.last_slot, lease.next_slot, lease.runs, lease.backfill';
    const rows = (await this.#query(
      `WITH member AS (
         INSERT INTO ${this.#members} (owner, replica, jobs, expires_at, handlers) VALUES ($1, $2, $3, ${lease}, $9)
         ON CONFLICT (owner) DO UPDATE
           SET replica = excluded.replica, jobs = excluded.jobs, expires_at = excluded.expires_at,
               handlers = excluded.handlers
         RETURNING owner
       ), forgotten AS (
         DELETE FROM ${this.#members} WHERE owner IN (
           SELECT owner FROM ${this.#members} WHERE expires_at <= clock_timestamp() AND owner <> $1
           FOR UPDATE SKIP LOCKED)
         RETURNING owner
       ), renewing AS (${this.#locking('$5::text[], $6::bigint[]')}
       ), renewed AS (
         UPDATE ${this.table} AS lease SET expires_at = ${lease}
         FROM renewing WHERE lease.name = renewing.name
         RETURNING lease.name
       ), free AS (
         SELECT lease.name FROM ${this.table} AS lease
         WHERE lease.name = ANY($7::text[]) AND (lease.owner IS NULL OR lease.expires_at <= clock_timestamp())
         ORDER BY lease.name FOR UPDATE SKIP LOCKED
       ), retaken AS (
         UPDATE ${this.table} AS lease
           SET owner = $1, expires_at = ${lease}, fencing_token = greatest(lease.fencing_token + 1, ${floor})
         FROM free WHERE lease.name = free.name
         RETURNING ${taken}
       ), created AS (
         INSERT INTO ${this.table} AS lease (name, owner, expires_at, fencing_token)
         SELECT name, $1, ${lease}, ${floor} FROM unnest($7::text[]) AS wanted(name)
         WHERE NOT EXISTS (SELECT FROM ${this.table} AS lease WHERE lease.name = wanted.name)
         ORDER BY name
         ON CONFLICT (name) DO NOTHING
         RETURNING ${taken}
       ), carried AS (
         UPDATE ${this.#triggers} SET taken = true
         WHERE NOT taken AND name IN (SELECT name FROM renewed)
         RETURNING request
       ), named AS (
         INSERT INTO ${this.table} (name, expires_at, fencing_token, grid)
         VALUES ($8, clock_timestamp(), 0, $1 || ' ' || clock_timestamp()::text)
         ON CONFLICT (name) DO NOTHING
         RETURNING grid
       )
       SELECT 'member' AS kind, owner AS name, replica, jobs, NULL::bigint AS fencing_token,
              handlers AS grid, NULL::bigint AS last_slot, NULL::bigint AS next_slot, NULL::bigint AS runs,
              NULL::text AS backfill
         FROM ${this.#members} WHERE expires_at > clock_timestamp() AND owner <> $1
       UNION ALL SELECT 'member', $1, $2, $3, NULL, $9, NULL, NULL, NULL, NULL
       UNION ALL SELECT 'renewed', name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM renewed
       UNION ALL SELECT 'acquired', name, NULL, NULL, fencing_token, grid, last_slot, next_slot, runs, backfill
         FROM retaken
       UNION ALL SELECT 'acquired', name, NULL, NULL, fencing_token, grid, last_slot, next_slot, runs, backfill
         FROM created
       UNION ALL SELECT 'paused', name, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM ${this.table}
         WHERE paused IS NOT NULL
       UNION ALL SELECT 'trigger', request, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM carried
       UNION ALL SELECT 'fleet', grid, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM named
       UNION ALL SELECT 'fleet', grid, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM ${this.table}
         WHERE name = $8
       UNION ALL SELECT 'schedules', NULL, NULL, NULL, coalesce(max(change), 0), NULL, NULL, NULL, NULL, NULL
         FROM ${this.#schedules}`,
      [
        member.owner,
        member.replica,
        member.jobs,
        this.leaseMs,
        renew.map(({ name }) => name),
        renew.map(({ fencingToken }) => fencingToken),
        acquire,
        FLEET_ROW,
        member.handlers === undefined ? null : JSON.stringify(member.handlers),
      ],
    )) as HeartbeatRow[];
    const fleet = rows.find((row) => row.kind === 'fleet')?.name;
    const schedules = rows.find((row) => row.kind === 'schedules');
    return {
      fleet: typeof fleet === 'string' ? fleet : undefined,
      schedules: schedules === undefined ? 0 : integerReply('heartbeat', schedules.fencing_token),
      paused: rows.filter((row) => row.kind === 'paused').map((row) => row.name),
      triggers: rows.filter((row) => row.kind === 'trigger').map((row) => triggerOf(row.name)),
      members: rows
        .filter((row) => row.kind === 'member')
        .map(({ name, replica, jobs, grid }) => {
          const member: PeriodicFleetMember = { owner: name, replica: String(replica), jobs: String(jobs) };
          // A member's handlers come in the column of a lease's grid, as JSON; older replicas name none.
          if (typeof grid === 'string') member.handlers = handlersOf(grid);
          return member;
        }),
      renewed: new Set(rows.filter((row) => row.kind === 'renewed').map((row) => row.name)),
      acquired: new Map(
        rows
          .filter((row) => row.kind === 'acquired')
          .map((row) => [
            row.name,
            {
              fencingToken: integerReply('heartbeat', row.fencing_token),
              schedule: row.grid === null ? null : scheduleOf('heartbeat', row),
            },
          ]),
      ),
    };
  }

  async writeSchedules(owner: string, writes: PeriodicScheduleWrite[]): Promise<PeriodicScheduleWritten[]> {
    const rows = (await this.#query(
      `WITH writing AS (${this.#locking('$2::text[], $3::bigint[]')}
       )
       UPDATE ${this.table} AS lease SET grid = written.grid, last_slot = written.last, next_slot = written.next,
         runs = written.runs, backfill = written.backfill
       FROM writing, unnest($2::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::text[])
         AS written(name, grid, last, next, runs, backfill)
       WHERE lease.name = writing.name AND written.name = writing.name
         AND (lease.grid IS NULL OR lease.last_slot <= written.last)
       RETURNING lease.name, lease.paused IS NOT NULL AS paused`,
      [
        owner,
        writes.map(({ name }) => name),
        writes.map(({ fencingToken }) => fencingToken),
        writes.map(({ schedule }) => schedule.grid),
        writes.map(({ schedule }) => schedule.last),
        writes.map(({ schedule }) => schedule.next),
        writes.map(({ schedule }) => schedule.runs ?? null),
        writes.map(({ schedule }) => backfillText(schedule)),
      ],
    )) as { name: string; paused: boolean }[];
    const taken = new Map(rows.map((row) => [row.name, row.paused]));
    return writes.map(({ name }) => (taken.get(name) === true ? 'paused' : taken.has(name)));
  }

  /**
   * One statement: the operation added to the job's audit trail and the oldest beyond `keep` deleted; a pause
   * (or resume) set on the job's row, made if the job has none yet.
   */
  async operate(name: string, operation: PeriodicOperation, keep: number): Promise<void> {
    const record = stored(operation);
    await this.#query(
      `WITH recorded AS (
         INSERT INTO ${this.#audit} (name, record) VALUES ($1, $2) RETURNING id
       ), trimmed AS (
         DELETE FROM ${this.#audit} WHERE name = $1 AND id <= (
           SELECT id FROM ${this.#audit} WHERE name = $1 ORDER BY id DESC OFFSET $3 - 1 LIMIT 1)
       ), paused AS (
         INSERT INTO ${this.table} AS lease (name, owner, expires_at, fencing_token, paused)
         SELECT $1, NULL, clock_timestamp(), 0, CASE WHEN $4 = 'pause' THEN $2 END WHERE $4 <> 'trigger'
         ON CONFLICT (name) DO UPDATE SET paused = excluded.paused
       )
       SELECT 1`,
      [name, record, keep, operation.action],
    );
  }

  /** One statement: the incident inserted unless its job has one of its kind, and if it was, audited. */
  async openIncident(
    incident: PeriodicIncidentRecord,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<boolean> {
    const { name, kind, since, detail } = incident;
    const [row] = (await this.#query(
      `WITH opened AS (
         INSERT INTO ${this.#incidents} (name, kind, since, detail) VALUES ($1, $2, $3, $4)
         ON CONFLICT (name, kind) DO NOTHING RETURNING name
       ), recorded AS (
         INSERT INTO ${this.#audit} (name, record) SELECT name, $5 FROM opened
       ), trimmed AS (${this.#trimming('SELECT name FROM opened', '$6::integer')}
       )
       SELECT count(*)::integer AS opened FROM opened`,
      [name, kind, since, detail, stored(operation), keep],
    )) as { opened: number }[];
    return row?.opened === 1;
  }

  /** One statement: the incident deleted, and if it was open, audited. */
  async closeIncident(
    name: string,
    kind: PeriodicIncidentKind,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<PeriodicIncidentRecord | null> {
    const [row] = (await this.#query(
      `WITH closed AS (
         DELETE FROM ${this.#incidents} WHERE name = $1 AND kind = $2 RETURNING name, kind, since, detail
       ), recorded AS (
         INSERT INTO ${this.#audit} (name, record) SELECT name, $3 FROM closed
       ), trimmed AS (${this.#trimming('SELECT name FROM closed', '$4::integer')}
       )
       SELECT name, kind, since, detail FROM closed`,
      [name, kind, stored(operation), keep],
    )) as IncidentRow[];
    return row === undefined ? null : incidentOfRow(row);
  }

  async readIncidents(limit: number): Promise<PeriodicIncidentRecord[]> {
    const rows = (await this.#query(
      `SELECT name, kind, since, detail FROM ${this.#incidents} ORDER BY name COLLATE "C", kind LIMIT $1`,
      [limit],
    )) as IncidentRow[];
    return rows.map(incidentOfRow);
  }

  async readPause(name: string): Promise<PeriodicOperation | null> {
    const [row] = (await this.#query(`SELECT paused FROM ${this.table} WHERE name = $1`, [name])) as {
      paused: unknown;
    }[];
    return typeof row?.paused === 'string' ? operationOf(row.paused) : null;
  }

  /**
   * One statement: the writes take their counts of changes from the counter's row (CHANGES_ROW), whose lock makes
   * writers take turns; each creates its schedule, or updates it where `ifVersion` (carried in `expected`) is its
   * version now, as ON CONFLICT reads it (the latest, not the statement's snapshot); each written is audited. A
   * write with `ifVersion` of a schedule this statement does not see is refused. Then the replicas are notified.
   */
  async writeStored(
    writes: PeriodicStoredWrite[],
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer[]> {
    const rows = (await this.#query(
      `WITH counter AS (${this.#counting('$10::integer')}
       ), wanted AS (
         SELECT w.*, (SELECT base FROM counter) + w.i AS change
         FROM unnest($1::text[], $2::text[], $3::text[], $4::integer[])
           WITH ORDINALITY AS w(name, handler, definition, expected, i)
       ), written AS (
         INSERT INTO ${this.#schedules} AS s
           (name, handler, definition, version, created_at, updated_at, updated_by, change, removed, expected)
         SELECT name, handler, definition, 1, $5, $5, $6, change, false, expected FROM wanted
         WHERE expected IS NULL OR expected = 0
           OR EXISTS (SELECT FROM ${this.#schedules} AS seen WHERE seen.name = wanted.name)
         ON CONFLICT (name) DO UPDATE SET
           handler = excluded.handler, definition = excluded.definition,
           version = s.version + 1,
           created_at = CASE WHEN s.removed THEN excluded.created_at ELSE s.created_at END,
           updated_at = excluded.updated_at, updated_by = excluded.updated_by, change = excluded.change,
           removed = false, expected = CASE WHEN s.removed THEN -1 END
         WHERE excluded.expected IS NULL
           OR excluded.expected = CASE WHEN s.removed THEN 0 ELSE s.version END
         RETURNING s.*, (s.xmax = 0 OR s.expected = -1) AS created
       ), audited AS (
         INSERT INTO ${this.#audit} (name, record)
         SELECT name, CASE WHEN created THEN $7 ELSE $8 END FROM written ORDER BY change
       ), trimmed AS (${this.#trimming('SELECT name FROM written', '$9::integer')}
       )
       SELECT 'written' AS kind, name, handler, definition, version, created_at, updated_at, updated_by, change,
              created
         FROM written
       UNION ALL SELECT 'seen', name, NULL, NULL, CASE WHEN removed THEN NULL ELSE version END, NULL, NULL, NULL,
         NULL, NULL FROM ${this.#schedules} WHERE name = ANY($1::text[])`,
      [
        writes.map(({ name }) => name),
        writes.map(({ handler }) => handler),
        writes.map(({ definition }) => ascii(definition)),
        writes.map(({ ifVersion }) => ifVersion ?? null),
        operation.at,
        operation.by,
        stored({ action: 'create', ...operation }),
        stored({ action: 'update', ...operation }),
        keep,
        writes.length,
      ],
    )) as StoredRow[];
    const written = new Map(rows.filter((row) => row.kind === 'written').map((row) => [row.name, row]));
    const seen = new Map(rows.filter((row) => row.kind === 'seen').map((row) => [row.name, row.version]));
    if (written.size > 0) await this.#notify();
    return writes.map(({ name }): PeriodicStoredAnswer => {
      const row = written.get(name);
      if (row !== undefined) return { ok: true, record: storedRecordOf(row), created: row.created === true };
      const version = seen.get(name);
      return {
        ok: false,
        currentVersion: version === null || version === undefined ? null : Number(version),
      };
    });
  }

  async removeStored(
    name: string,
    ifVersion: number | undefined,
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer> {
    const rows = (await this.#query(
      `WITH counter AS (${this.#counting('1')}
       ), removed AS (
         UPDATE ${this.#schedules} AS s
           SET removed = true, change = (SELECT base FROM counter) + 1, updated_at = $3, updated_by = $4,
               expected = NULL
         WHERE s.name = $1 AND NOT s.removed AND ($2::integer IS NULL OR s.version = $2)
         RETURNING s.name
       ), audited AS (
         INSERT INTO ${this.#audit} (name, record) SELECT name, $5 FROM removed
       ), trimmed AS (${this.#trimming('SELECT name FROM removed', '$6::integer')}
       )
       SELECT (SELECT count(*) FROM removed)::integer AS removed,
              (SELECT CASE WHEN removed THEN NULL ELSE version END FROM ${this.#schedules} WHERE name = $1) AS version`,
      [name, ifVersion ?? null, operation.at, operation.by, stored({ action: 'remove', ...operation }), keep],
    )) as { removed: number; version: unknown }[];
    const [{ removed, version }] = rows as [{ removed: number; version: unknown }];
    if (removed === 1) {
      await this.#notify();
      return { ok: true, record: null, removed: true };
    }
    const current = version === null || version === undefined ? null : Number(version);
    if (ifVersion !== undefined && ifVersion !== (current ?? 0))
      return { ok: false, currentVersion: current };
    return { ok: true, record: null, removed: false };
  }

  async readStored(name: string): Promise<PeriodicStoredRecord | null> {
    const [row] = (await this.#query(`SELECT * FROM ${this.#schedules} WHERE name = $1 AND NOT removed`, [
      name,
    ])) as StoredRow[];
    return row === undefined ? null : storedRecordOf(row);
  }

  async listStored({
    handler,
    prefix = '',
    after,
    limit,
  }: PeriodicStoredQuery): Promise<PeriodicStoredRecord[]> {
    // Names in the order of their bytes (COLLATE "C"), as the other stores list them; a prefix is text, not a
    // LIKE pattern: its range is [prefix, the next string after every string it begins).
    const rows = (await this.#query(
      `SELECT * FROM ${this.#schedules}
       WHERE NOT removed AND ($1::text IS NULL OR handler = $1)
         AND name COLLATE "C" >= $2 AND left(name, length($2)) = $2
         AND ($3::text IS NULL OR name COLLATE "C" > $3)
       ORDER BY name COLLATE "C" LIMIT $4`,
      [handler ?? null, prefix, after ?? null, limit],
    )) as StoredRow[];
    return rows.map(storedRecordOf);
  }

  async readStoredChanges(since: number, limit: number): Promise<PeriodicStoredChanges> {
    // The page and the latest change in one statement, one snapshot: read apart, a write committed between the
    // two would be counted and never read.
    const rows = (await this.#query(
      `SELECT page.*, latest.change AS latest
         FROM (SELECT coalesce(max(change), 0) AS change FROM ${this.#schedules}) AS latest
         LEFT JOIN LATERAL (SELECT * FROM ${this.#schedules} WHERE change > $1 ORDER BY change LIMIT $2) AS page
           ON true`,
      [since, limit + 1],
    )) as (StoredRow & { removed: boolean; latest: unknown })[];
    const page = rows.filter((row) => row.name !== null);
    const taken = page.slice(0, limit);
    return {
      records: taken.filter((row) => !row.removed).map(storedRecordOf),
      removed: taken.filter((row) => row.removed).map((row) => row.name),
      change:
        taken.length === 0
          ? Math.max(since, integerReply('readStoredChanges', rows[0]!.latest))
          : integerReply('readStoredChanges', taken.at(-1)!.change),
      complete: page.length <= limit,
    };
  }

  /**
   * Calls `listener` when any replica changes a stored schedule: `LISTEN` on a connection of its own from the pool
   * (`connect()`), held until the returned function is called; nothing with a pool that cannot lend one.
   */
  watchStored(listener: () => void): () => void {
    const pool = this.#pool as Partial<ListeningPool>;
    if (typeof pool.connect !== 'function') return () => undefined;
    let stopped = false;
    let client: ListeningClient | undefined;
    const channel = `"${this.#channel.replaceAll('"', '""')}"`;
    pool
      .connect()
      .then(async (connected) => {
        // A pg Client connects itself, and lends no connection: no notifications then.
        if (typeof connected?.on !== 'function') return;
        client = connected;
        if (stopped) return connected.release();
        // A connection that fails leaves the replicas to their heartbeats, which read the count of changes.
        connected.on('error', () => undefined);
        connected.on('notification', () => listener());
        await connected.query(`LISTEN ${channel}`);
      })
      .catch(() => undefined);
    return () => {
      stopped = true;
      client?.release(true);
      client = undefined;
    };
  }

  /** Wakes the replicas that listen for changes of stored schedules (`watchStored`). */
  async #notify(): Promise<void> {
    await this.#query('SELECT pg_notify($1, $2)', [this.#channel, 'changed']).catch(() => undefined);
  }

  /** A query that takes `count` numbers of changes from the counter's row, and selects the one before them (`base`). */
  #counting(count: string): string {
    const largest = `(SELECT coalesce(max(change), 0) FROM ${this.#schedules})`;
    return `
         INSERT INTO ${this.table} AS lease (name, expires_at, fencing_token)
         VALUES (${CHANGES_ROW}, clock_timestamp(), ${largest} + ${count})
         ON CONFLICT (name) DO UPDATE SET fencing_token = greatest(lease.fencing_token, ${largest}) + ${count}
         RETURNING fencing_token - ${count} AS base`;
  }

  /** A statement that deletes the entries of the audit trails of `names` beyond the latest `keep`. */
  #trimming(names: string, keep: string): string {
    return `
         DELETE FROM ${this.#audit} AS audit USING (
           SELECT id, row_number() OVER (PARTITION BY name ORDER BY id DESC) AS rank
           FROM ${this.#audit} WHERE name IN (${names})
         ) AS ranked
         WHERE audit.id = ranked.id AND ranked.rank >= ${keep}`;
  }

  async readAudit(name: string, limit: number): Promise<PeriodicOperation[]> {
    const rows = (await this.#query(
      `SELECT record FROM ${this.#audit} WHERE name = $1 ORDER BY id DESC LIMIT $2`,
      [name, limit],
    )) as { record: unknown }[];
    return rows.map((row) => operationOf(String(row.record)));
  }

  /**
   * One statement: each job's summary counts the runs added (its `seq`, which numbers its runs), its last success
   * and its failures since; each new run is inserted with the next number, each known one has its record
   * replaced (its start, by its end), and the runs numbered `keep` or more below the job's latest are deleted:
   * an index range of the job, not a count of its runs.
   */
  async recordRuns(runs: PeriodicRunEntry[], keep: number): Promise<void> {
    await this.#query(
      `WITH given AS (
         SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::bigint[])
           WITH ORDINALITY AS given(name, id, started_at, record, outcome, finished_at, i)
       ), marked AS (
         SELECT given.*, NOT EXISTS (
           SELECT FROM ${this.#runs} AS run WHERE run.name = given.name AND run.id = given.id) AS fresh
         FROM given
       ), succeeded AS (
         SELECT name, max(finished_at) AS at FROM given WHERE outcome = 'ok' GROUP BY name
       ), tally AS (
         SELECT marked.name, succeeded.at, count(*) FILTER (WHERE fresh) AS added,
                count(*) FILTER (WHERE outcome = 'fail' AND (succeeded.at IS NULL OR finished_at > succeeded.at))
                  AS failed
         FROM marked LEFT JOIN succeeded ON succeeded.name = marked.name
         GROUP BY marked.name, succeeded.at
       ), counted AS (
         INSERT INTO ${this.#summary} AS summary (name, seq, last_success, failures)
         SELECT name, added, at, failed FROM tally ORDER BY name
         ON CONFLICT (name) DO UPDATE SET
           seq = summary.seq + excluded.seq,
           last_success = coalesce(excluded.last_success, summary.last_success),
           failures = CASE WHEN excluded.last_success IS NULL THEN summary.failures + excluded.failures
                      ELSE excluded.failures END
         RETURNING name, seq
       ), numbered AS (
         SELECT marked.name, marked.id, marked.started_at, marked.record,
                counted.seq - tally.added + row_number() OVER (PARTITION BY marked.name ORDER BY marked.i) AS seq
         FROM marked JOIN counted ON counted.name = marked.name JOIN tally ON tally.name = marked.name
         WHERE marked.fresh
       ), inserted AS (
         INSERT INTO ${this.#runs} (name, id, seq, started_at, record)
         SELECT name, id, seq, started_at, record FROM numbered ORDER BY name, seq
         ON CONFLICT (name, id) DO UPDATE SET record = excluded.record
       ), replaced AS (
         UPDATE ${this.#runs} AS run SET record = marked.record
         FROM marked WHERE NOT marked.fresh AND run.name = marked.name AND run.id = marked.id
       )
       DELETE FROM ${this.#runs} AS run USING counted
       WHERE run.name = counted.name AND run.seq <= counted.seq - $7`,
      [
        runs.map(({ name }) => name),
        runs.map(({ id }) => id),
        runs.map(({ startedAt }) => startedAt),
        runs.map((run) => stored(run)),
        runs.map(outcomeOf),
        runs.map(({ finishedAt }) => finishedAt),
        keep,
      ],
    );
  }

  async readHistory(name: string, limit: number, before: number | null): Promise<PeriodicRunEntry[]> {
    if (before === null) return this.#latest.read(name, limit);
    const rows = (await this.#query(
      `SELECT record FROM ${this.#runs} WHERE name = $1 AND ($3::bigint IS NULL OR started_at < $3)
       ORDER BY seq DESC LIMIT $2`,
      [name, limit, before],
    )) as { record: unknown }[];
    return rows.map((row) => runOf(String(row.record)));
  }

  /**
   * The latest runs of jobs, read together: a replica that takes a thousand leases reads each one's latest runs
   * at once, in one statement per thousand rather than a thousand statements that would queue in the pool
   * ahead of its heartbeat.
   */
  readonly #latest = new LatestRuns((names, limit) => this.#readLatest(names, limit));

  /** The latest `limit` runs of each of `names`, newest first; a name the database refuses is an error of its own. */
  async #readLatest(names: string[], limit: number): Promise<Map<string, PeriodicRunEntry[] | Error>> {
    const read = new Map<string, PeriodicRunEntry[] | Error>();
    await this.#apart(
      names.map((name) => ({ name })),
      async (some) => {
        const rows = (await this.#query(
          `SELECT job.name, run.record
             FROM unnest($1::text[]) AS job(name)
             CROSS JOIN LATERAL (SELECT record, seq FROM ${this.#runs} WHERE name = job.name
                                  ORDER BY seq DESC LIMIT $2) AS run
            ORDER BY job.name, run.seq DESC`,
          [some.map(({ name }) => name), limit],
        )) as { name: string; record: unknown }[];
        for (const { name } of some) read.set(name, []);
        for (const row of rows) (read.get(row.name) as PeriodicRunEntry[]).push(runOf(String(row.record)));
      },
    );
    const refused = this.#stillRefused();
    for (const name of names) {
      if (!read.has(name)) read.set(name, new Error(refused.get(name) ?? 'the database refused the name'));
    }
    return read;
  }

  /** What the store keeps of the jobs `names`; of a job whose name the database refuses, nothing. */
  async readFleet(names: string[]): Promise<PeriodicFleetRead[]> {
    const refused = this.#stillRefused();
    const reads = new Map<string, PeriodicFleetRead>();
    const asked = names.filter((name) => !refused.has(name)).map((name) => ({ name }));
    if (asked.length > 0) {
      await this.#apart(asked, async (some) => {
        for (const read of await this.#readFleet(some.map(({ name }) => name))) reads.set(read.name, read);
      });
    }
    return names.map(
      (name) =>
        reads.get(name) ?? {
          name,
          holder: null,
          pause: null,
          schedule: null,
          lastRun: null,
          lastSucceededAt: null,
          consecutiveFailures: 0,
        },
    );
  }

  async #readFleet(names: readonly string[]): Promise<PeriodicFleetRead[]> {
    const rows = (await this.#query(
      `SELECT wanted.name, lease.owner, lease.fencing_token, lease.paused, lease.grid, lease.last_slot, lease.next_slot,
              lease.runs, lease.backfill,
              lease.expires_at > clock_timestamp() AS held,
              (extract(epoch FROM lease.expires_at) * 1000)::bigint AS until,
              summary.last_success, summary.failures,
              (SELECT record FROM ${this.#runs} AS run WHERE run.name = wanted.name
               ORDER BY run.seq DESC LIMIT 1) AS last_run
       FROM unnest($1::text[]) WITH ORDINALITY AS wanted(name, i)
       LEFT JOIN ${this.table} AS lease ON lease.name = wanted.name
       LEFT JOIN ${this.#summary} AS summary ON summary.name = wanted.name
       ORDER BY wanted.i`,
      [names],
    )) as FleetRow[];
    if (rows.length !== names.length)
      throw new Error(`the database answered ${rows.length} rows to readFleet`);
    return rows.map((row) => ({
      name: row.name,
      holder:
        row.held === true && typeof row.owner === 'string'
          ? {
              owner: row.owner,
              fencingToken: integerReply('readFleet', row.fencing_token),
              until: integerReply('readFleet', row.until),
            }
          : null,
      pause: typeof row.paused === 'string' ? operationOf(row.paused) : null,
      schedule: typeof row.grid === 'string' ? scheduleOf('readFleet', row) : null,
      lastRun: typeof row.last_run === 'string' ? runOf(row.last_run) : null,
      lastSucceededAt: row.last_success === null ? null : integerReply('readFleet', row.last_success),
      consecutiveFailures: row.failures === null ? 0 : integerReply('readFleet', row.failures),
    }));
  }

  async requestTrigger(request: PeriodicTriggerRequest): Promise<void> {
    await this.#query(`INSERT INTO ${this.#triggers} (id, name, request) VALUES ($1, $2, $3)`, [
      request.id,
      request.name,
      stored(request),
    ]);
  }

  /** One statement: an answer deleted as it is read; with `withdraw`, a trigger not taken deleted. */
  async readTrigger(_name: string, id: string, withdraw: boolean): Promise<PeriodicTriggerState> {
    const [row] = (await this.#query(
      `WITH answered AS (
         DELETE FROM ${this.#triggers} WHERE id = $1 AND answer IS NOT NULL RETURNING answer
       ), withdrawn AS (
         DELETE FROM ${this.#triggers} WHERE id = $1 AND NOT taken AND $2::boolean RETURNING id
       )
       SELECT (SELECT answer FROM answered) AS answer, EXISTS (SELECT FROM withdrawn) AS withdrawn,
              (SELECT taken FROM ${this.#triggers} WHERE id = $1) AS taken`,
      [id, withdraw],
    )) as { answer: unknown; withdrawn: unknown; taken: unknown }[];
    if (typeof row?.answer === 'string') return triggerAnswerOf(row.answer);
    if (row?.withdrawn === true) return 'withdrawn';
    return row?.taken === false ? 'pending' : 'taken';
  }

  async answerTrigger(_name: string, id: string, answer: PeriodicTriggerAnswer): Promise<void> {
    await this.#query(`UPDATE ${this.#triggers} SET answer = $2 WHERE id = $1`, [id, stored(answer)]);
  }

  async releaseAll(owner: string, leases: PeriodicLeaseHeld[], leave: boolean): Promise<void> {
    await this.#query(
      `WITH releasing AS (${this.#locking('$2::text[], $3::bigint[]')}
       ), released AS (
         UPDATE ${this.table} AS lease SET owner = NULL, expires_at = clock_timestamp()
         FROM releasing WHERE lease.name = releasing.name
         RETURNING lease.name
       )
       DELETE FROM ${this.#members} WHERE $4::boolean AND owner = $1`,
      [owner, leases.map(({ name }) => name), leases.map(({ fencingToken }) => fencingToken), leave],
    );
  }

  /**
   * Runs `step` for `jobs` in one statement; when the database refuses a value of one of them (`refusedData`),
   * for each half of them, down to the job alone, which is then refused for `leaseMs`: left out of the batched
   * statements, and answered as refused. One job's data fails that job's step, and no other's.
   */
  async #apart<T extends { name: string }>(
    jobs: readonly T[],
    step: (some: readonly T[]) => Promise<void>,
  ): Promise<void> {
    try {
      await step(jobs);
    } catch (error) {
      if (!refusedData(error)) throw error;
      if (jobs.length === 1) {
        this.#refused.set(jobs[0]!.name, {
          error: messageOf(error),
          until: performance.now() + this.leaseMs,
        });
        return;
      }
      const half = Math.ceil(jobs.length / 2);
      await this.#apart(jobs.slice(0, half), step);
      await this.#apart(jobs.slice(half), step);
    }
  }

  /** The jobs refused lately, with the database's error; those refused `leaseMs` ago are tried again. */
  #stillRefused(): Map<string, string> {
    const at = performance.now();
    const refused = new Map<string, string>();
    for (const [name, { error, until }] of this.#refused) {
      if (until <= at) this.#refused.delete(name);
      else refused.set(name, error);
    }
    return refused;
  }

  /**
   * A query that locks, in the order of their names, the rows of the leases that `$1` holds among `held` (the
   * arrays of their names and fencing tokens) and that have not expired, and selects their names.
   */
  #locking(held: string): string {
    return `
         SELECT lease.name FROM ${this.table} AS lease JOIN unnest(${held}) AS held(name, token)
           ON lease.name = held.name AND lease.fencing_token = held.token
         WHERE lease.owner = $1 AND lease.expires_at > clock_timestamp()
         ORDER BY lease.name FOR UPDATE OF lease`;
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

  /**
   * Creates the tables if they are missing, and adds the columns a table of an earlier version lacks; replicas
   * that start together may race, and the loser tries again.
   */
  async #create(): Promise<void> {
    const statements = schemaOf({
      table: this.table,
      members: this.#members,
      audit: this.#audit,
      runs: this.#runs,
      runsIndex: `"${this.#tableName}_runs_seq"`,
      triggers: this.#triggers,
      summary: this.#summary,
      schedules: this.#schedules,
      schedulesIndexes: [`"${this.#tableName}_sc"`, `"${this.#tableName}_sn"`, `"${this.#tableName}_sh"`],
      incidents: this.#incidents,
    });
    try {
      for (const statement of statements) {
        await this.#pool.query(statement).catch(() => this.#pool.query(statement));
      }
    } catch (error) {
      this.#created = undefined;
      throw error;
    }
  }
}

/**
 * Whether a statement failed on a value it was given, not for the database's sake: SQLSTATE class 22 (a data
 * exception, such as a character the database's encoding cannot hold) or 54 (a limit, such as an index row too
 * large). The same statement without that value goes through.
 */
function refusedData(error: unknown): boolean {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && /^(22|54)/.test(code);
}

/**
 * A record as the tables keep it: JSON of ASCII only (`\u` escapes for the rest), which a database of any
 * encoding holds, whatever a note, an error or a replica's name carries.
 */
type IncidentRow = { name: string; kind: PeriodicIncidentKind; since: unknown; detail: string };

function incidentOfRow({ name, kind, since, detail }: IncidentRow): PeriodicIncidentRecord {
  return { name, kind, since: integerReply('readIncidents', since), detail };
}

function stored(record: object): string {
  return ascii(JSON.stringify({ v: RECORD_VERSION, ...record }));
}

/** JSON text with `\u` escapes for every character beyond ASCII: the same JSON, in any database encoding. */
function ascii(json: string): string {
  return json.replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** A job in a heartbeat: a lease held, to renew, or one to take. */
interface BeatJob {
  name: string;
  held?: PeriodicLeaseHeld;
}

/** What one heartbeat statement answered. */
interface Beat extends Pick<PeriodicHeartbeatReply, 'members'> {
  fleet: string | undefined;
  schedules: number;
  paused: string[];
  triggers: PeriodicTriggerRequest[];
  renewed: Set<string>;
  acquired: Map<string, { fencingToken: number; schedule: PeriodicFleetSchedule | null }>;
}

/** The columns of a job's schedule in its lease's row. */
interface ScheduleRow {
  grid: unknown;
  last_slot: unknown;
  next_slot: unknown;
  runs: unknown;
  /** A backfill under way: `<next> <to>`. */
  backfill: unknown;
}

/** A schedule's backfill as its column holds it, or null. */
function backfillText({ backfill }: PeriodicFleetSchedule): string | null {
  return backfill === undefined ? null : `${backfill.next} ${backfill.to}`;
}

/** A job's schedule from its lease's row (`grid` not null). */
function scheduleOf(step: string, row: ScheduleRow): PeriodicFleetSchedule {
  const schedule: PeriodicFleetSchedule = {
    grid: String(row.grid),
    last: integerReply(step, row.last_slot),
    next: integerReply(step, row.next_slot),
  };
  if (row.runs !== null && row.runs !== undefined) schedule.runs = integerReply(step, row.runs);
  if (typeof row.backfill === 'string') {
    const [next, to] = row.backfill.split(' ');
    schedule.backfill = { next: integerReply(step, next), to: integerReply(step, to) };
  }
  return schedule;
}

/** A row of `readFleet`'s answer: a job, its lease's row and summary (nulls when it has none). */
interface FleetRow extends ScheduleRow {
  name: string;
  owner: unknown;
  fencing_token: unknown;
  paused: unknown;
  held: unknown;
  until: unknown;
  last_success: unknown;
  failures: unknown;
  last_run: unknown;
}

/** A row of a heartbeat's answer: a member, a renewal, or a lease taken. */
interface HeartbeatRow extends ScheduleRow {
  kind: 'member' | 'renewed' | 'acquired' | 'paused' | 'trigger' | 'fleet' | 'schedules';
  name: string;
  replica: unknown;
  jobs: unknown;
  fencing_token: unknown;
}

/** A row of the table of stored schedules. */
interface StoredRow {
  kind?: string;
  created?: unknown;
  name: string;
  handler: unknown;
  definition: unknown;
  version: unknown;
  created_at: unknown;
  updated_at: unknown;
  updated_by: unknown;
  change: unknown;
}

/** A stored schedule as its row has it. */
function storedRecordOf(row: StoredRow): PeriodicStoredRecord {
  return {
    name: row.name,
    handler: String(row.handler),
    definition: String(row.definition),
    version: integerReply('a stored schedule', row.version),
    createdAt: integerReply('a stored schedule', row.created_at),
    updatedAt: integerReply('a stored schedule', row.updated_at),
    updatedBy: typeof row.updated_by === 'string' ? row.updated_by : null,
    change: integerReply('a stored schedule', row.change),
  };
}

/** A member's handlers, from the JSON its record keeps; none from one this version cannot read. */
function handlersOf(json: string): string[] {
  try {
    const parsed = JSON.parse(json) as unknown;
    return Array.isArray(parsed) ? parsed.map(String) : [];
  } catch {
    return [];
  }
}

/** What `watchStored` needs of a pg Pool: a connection of its own. */
interface ListeningPool {
  connect(): Promise<ListeningClient>;
}

/** A pooled connection that listens. */
interface ListeningClient {
  query(text: string): Promise<unknown>;
  on(event: 'notification', listener: () => void): unknown;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  release(destroy?: boolean): void;
}

/**
 * Reads of the latest runs of single jobs asked in one turn of the event loop, sent together, a thousand names
 * at most each (one batch per `limit`).
 */
class LatestRuns {
  #waiting = new Map<
    number,
    Map<string, { resolve(runs: PeriodicRunEntry[]): void; reject(error: unknown): void }[]>
  >();

  constructor(
    private readonly readMany: (
      names: string[],
      limit: number,
    ) => Promise<Map<string, PeriodicRunEntry[] | Error>>,
  ) {}

  read(name: string, limit: number): Promise<PeriodicRunEntry[]> {
    return new Promise((resolve, reject) => {
      if (this.#waiting.size === 0) queueMicrotask(() => this.#send());
      let byName = this.#waiting.get(limit);
      if (byName === undefined) this.#waiting.set(limit, (byName = new Map()));
      const asked = byName.get(name) ?? [];
      asked.push({ resolve, reject });
      byName.set(name, asked);
    });
  }

  #send(): void {
    const waiting = this.#waiting;
    this.#waiting = new Map();
    for (const [limit, byName] of waiting) {
      const names = [...byName.keys()];
      for (let from = 0; from < names.length; from += 1000) {
        const part = names.slice(from, from + 1000);
        this.readMany(part, limit).then(
          (read) => {
            for (const name of part) {
              const runs = read.get(name)!;
              for (const { resolve, reject } of byName.get(name)!) {
                if (runs instanceof Error) reject(runs);
                else resolve(runs);
              }
            }
          },
          (error: unknown) => {
            for (const name of part) for (const { reject } of byName.get(name)!) reject(error);
          },
        );
      }
    }
  }
}
