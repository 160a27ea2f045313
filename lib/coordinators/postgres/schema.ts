// The tables of PostgresCoordinator, each created if missing: a lease table (a row per job: its lease, schedule
// and pause, and the fleet's name), and beside it the fleet's members, the jobs' audit trails, their runs and
// what the runs tell of successes and failures, and the triggers carried to the holders. A column that a table
// of an earlier version lacks is added; nothing is ever dropped.

/** The tables' and the index's names, quoted (`"schema"."table_runs"`). */
export interface PostgresTables {
  table: string;
  members: string;
  audit: string;
  runs: string;
  runsIndex: string;
  triggers: string;
  summary: string;
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
  ];
}
