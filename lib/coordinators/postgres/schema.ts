// The tables of PostgresCoordinator, each created if missing: a lease table (a row per job: its lease, schedule
// and pause, and the fleet's name), and beside it the fleet's members, the jobs' audit trails, their runs and
// what the runs tell of successes and failures, the triggers carried to the holders, the stored schedules, and the
// open incidents. A column that a table of an earlier version lacks is added; nothing is ever dropped.

/** The tables' and the index's names, quoted (`"schema"."table_runs"`). */
export interface PostgresTables {
  table: string;
  members: string;
  audit: string;
  runs: string;
  runsIndex: string;
  triggers: string;
  summary: string;
  /** The stored schedules, and the names of its indexes (of the changes, the names, the handlers' names). */
  schedules: string;
  schedulesIndexes: [change: string, names: string, handlers: string];
  /** The open incidents, a row per job and kind. */
  incidents: string;
}

/** The statements that make the tables, in order; each may run again. */
export function schemaOf({
  table,
  members,
  audit,
  runs,
  runsIndex,
  triggers,
  summary,
  schedules,
  schedulesIndexes: [byChange, byName, byHandler],
  incidents,
}: PostgresTables): string[] {
  return [
    `CREATE TABLE IF NOT EXISTS ${table} (
        name text PRIMARY KEY,
        owner text,
        expires_at timestamptz NOT NULL,
        fencing_token bigint NOT NULL,
        grid text,
        last_slot bigint NOT NULL DEFAULT 0,
        next_slot bigint NOT NULL DEFAULT 0
      )`,
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS paused text`,
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS runs bigint`,
    `ALTER TABLE ${table} ADD COLUMN IF NOT EXISTS backfill text`,
    `CREATE TABLE IF NOT EXISTS ${members} (
        owner text PRIMARY KEY,
        replica text NOT NULL,
        jobs text NOT NULL,
        expires_at timestamptz NOT NULL
      )`,
    `CREATE TABLE IF NOT EXISTS ${audit} (
        name text NOT NULL,
        id bigserial NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (name, id)
      )`,
    `CREATE TABLE IF NOT EXISTS ${runs} (
        name text NOT NULL,
        id text NOT NULL,
        seq bigint NOT NULL,
        started_at bigint NOT NULL,
        record text NOT NULL,
        PRIMARY KEY (name, id)
      )`,
    `CREATE INDEX IF NOT EXISTS ${runsIndex} ON ${runs} (name, seq)`,
    `CREATE TABLE IF NOT EXISTS ${triggers} (
        id text PRIMARY KEY,
        name text NOT NULL,
        request text NOT NULL,
        taken boolean NOT NULL DEFAULT false,
        answer text
      )`,
    `CREATE TABLE IF NOT EXISTS ${summary} (
        name text PRIMARY KEY,
        seq bigint NOT NULL DEFAULT 0,
        last_success bigint,
        failures integer NOT NULL DEFAULT 0
      )`,
    `ALTER TABLE ${members} ADD COLUMN IF NOT EXISTS handlers text`,
    // A removed schedule keeps its row (removed), with the count of the change that removed it, for the replicas
    // to read the removal, and its version, for one created again to go on from; `expected` carries the ifVersion
    // of a write to the check of its conflict, and -1 after a write that created the schedule again (coordinator.ts).
    `CREATE TABLE IF NOT EXISTS ${schedules} (
        name text PRIMARY KEY,
        handler text NOT NULL,
        definition text NOT NULL,
        version integer NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        updated_by text,
        change bigint NOT NULL,
        removed boolean NOT NULL DEFAULT false,
        expected integer
      )`,
    `CREATE INDEX IF NOT EXISTS ${byChange} ON ${schedules} (change)`,
    `CREATE INDEX IF NOT EXISTS ${byName} ON ${schedules} (name COLLATE "C") WHERE NOT removed`,
    `CREATE INDEX IF NOT EXISTS ${byHandler} ON ${schedules} (handler, name COLLATE "C") WHERE NOT removed`,
    `CREATE TABLE IF NOT EXISTS ${incidents} (
        name text NOT NULL,
        kind text NOT NULL,
        since bigint NOT NULL,
        detail text NOT NULL,
        PRIMARY KEY (name, kind)
      )`,
  ];
}
