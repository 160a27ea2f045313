import { describeValue } from '../scheduler/errors.js';
import type {
  PeriodicIncidentKind,
  PeriodicIncidentRecord,
  PeriodicOperation,
  PeriodicRunEntry,
  PeriodicTriggerAnswer,
  PeriodicTriggerRequest,
} from '../scheduler/coordinator-port.js';
import { isMilliseconds, type OptionRule } from '../scheduler/rules.js';
import { ACTIONS, readRun } from '../scheduler/reply-checks.js';

/**
 * A store's integer reply as a number: a number, or the digits of one (a Redis client with `stringNumbers`,
 * a PostgreSQL `bigint`). Anything else, or a value past `max`, throws: a reply that cannot be understood is
 * a failure, never a lease.
 */
export function integerReply(step: string, reply: unknown, max = Number.MAX_SAFE_INTEGER): number {
  const value = typeof reply === 'string' && /^\d{1,16}$/.test(reply) ? Number(reply) : reply;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && value <= max) return value;
  throw new Error(
    `the store answered ${describeValue(reply)} to ${step}, which is not an integer from 0 to ${max}`,
  );
}

/** The shortest `leaseMs` of every coordinator. */
export const LEASE_MS_MIN = 100;

/**
 * The longest `leaseMs` of every coordinator, a day: each store honours it (PostgreSQL takes it as an `integer`,
 * at most 2^31 − 1; Redis's `PX` far more), and a lease longer than that would keep the jobs of a replica that
 * died from running for longer still.
 */
export const LEASE_MS_MAX = 86_400_000;

/** The rule of every coordinator's `leaseMs`. */
export const LEASE_MS: OptionRule = {
  accepts: (value) => isMilliseconds(value, LEASE_MS_MIN) && (value as number) <= LEASE_MS_MAX,
  expected: 'an integer number of milliseconds from 100 to 86,400,000 (a day)',
  problem: (value) => {
    if (!Number.isSafeInteger(value)) return undefined;
    if ((value as number) < LEASE_MS_MIN) {
      return 'a lease is renewed every leaseMs / 3, so a shorter one would be lost to any pause of the process';
    }
    if ((value as number) > LEASE_MS_MAX) {
      return (
        'the jobs of a replica that dies wait that long for another to take them; give a lease of seconds (the ' +
        'default is 10,000)'
      );
    }
    return undefined;
  },
};

/**
 * The version of the records the coordinators write beside the leases (pauses, audit entries): a replica reads
 * the fields it knows of a record of any version and ignores the others, so that replicas of two versions of
 * the package read each other's during a rolling deploy.
 */
export const RECORD_VERSION = 1;

/** The actions of an audit trail. */

/** An operation from its record, as JSON; the fields it lacks are null (or 'unknown'), those it adds ignored. */
export function operationOf(record: string): PeriodicOperation {
  const parsed = JSON.parse(record) as Partial<Record<keyof PeriodicOperation, unknown>> | null;
  const text = (value: unknown) => (typeof value === 'string' ? value : null);
  const { action } = parsed ?? {};
  if (!ACTIONS.has(action)) {
    throw new Error(`the store keeps ${describeValue(record)}, which is not an operation`);
  }
  const at = parsed?.at;
  return {
    action: action as PeriodicOperation['action'],
    by: text(parsed?.by),
    note: text(parsed?.note),
    replica: text(parsed?.replica) ?? 'unknown',
    at: typeof at === 'number' && Number.isSafeInteger(at) && at >= 0 ? at : 0,
  };
}

/** The order of two names by their UTF-8 bytes, the order the port lists jobs in. */
export const byUtf8 = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/** An incident of job `name` from its JSON (`{ since, detail }`), as the Redis coordinator keeps it. */
export function incidentOf(name: string, kind: PeriodicIncidentKind, json: string): PeriodicIncidentRecord {
  const { since, detail } = (JSON.parse(json) ?? {}) as { since?: unknown; detail?: unknown };
  return {
    name,
    kind,
    since: typeof since === 'number' && Number.isSafeInteger(since) && since >= 0 ? since : 0,
    detail: typeof detail === 'string' ? detail : '',
  };
}

/** The version of a run's record as a JSON array: its first item. */
export const RUN_ARRAY_VERSION = 2;

/**
 * The fields of a run's record as a JSON array (Redis keeps them so), after its version (RUN_ARRAY_VERSION), in
 * this order; the error, last, is `[name, message]`, and absent for none.
 */
export const RUN_FIELDS = [
  'id',
  'jobId',
  'replica',
  'fencingToken',
  'slot',
  'origin',
  'attempt',
  'startedAt',
  'finishedAt',
  'reason',
  'durationMs',
  'error',
] as const;

/**
 * A run from its record, as a JSON object, or an array of job `job`'s; read leniently (`readRun`), as an
 * operation is.
 */
export function runOf(record: string, job?: string): PeriodicRunEntry {
  let parsed = (JSON.parse(record) ?? {}) as Partial<Record<keyof PeriodicRunEntry, unknown>>;
  if (Array.isArray(parsed)) {
    const values = parsed.slice(1) as unknown[];
    const fields = Object.fromEntries(RUN_FIELDS.map((field, i) => [field, values[i]]));
    const [errorName, message] = Array.isArray(fields.error) ? (fields.error as unknown[]) : [];
    parsed = {
      ...fields,
      name: job,
      error: fields.error === undefined ? null : { name: errorName, message },
    };
  }
  const run = readRun(parsed);
  if (run === undefined) throw new Error(`the store keeps ${describeValue(record)}, which is not a run`);
  return run;
}

/** A trigger left for the holder, from its record as JSON. */
export function triggerOf(record: string): PeriodicTriggerRequest {
  const parsed = (JSON.parse(record) ?? {}) as Partial<Record<keyof PeriodicTriggerRequest, unknown>>;
  const { id, name, by, replica, at, backfill } = parsed;
  if (typeof id !== 'string' || typeof name !== 'string') {
    throw new Error(`the store keeps ${describeValue(record)}, which is not a trigger`);
  }
  const request: PeriodicTriggerRequest = {
    id,
    name,
    by: typeof by === 'string' ? by : null,
    replica: typeof replica === 'string' ? replica : 'unknown',
    at: typeof at === 'number' && Number.isSafeInteger(at) && at >= 0 ? at : 0,
  };
  if (backfill === 'cancel') request.backfill = 'cancel';
  else if (typeof backfill === 'object' && backfill !== null) {
    const { from, to, note } = backfill as Record<string, unknown>;
    if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to)) {
      throw new Error(`the store keeps ${describeValue(record)}, which is not a backfill`);
    }
    request.backfill = {
      from: from as number,
      to: to as number,
      note: typeof note === 'string' ? note : null,
    };
  }
  return request;
}

/** The holder's answer to a trigger, from its record as JSON. */
export function triggerAnswerOf(record: string): PeriodicTriggerAnswer {
  const { ok, jobId, error, replica } = (JSON.parse(record) ?? {}) as Record<string, unknown>;
  const by = typeof replica === 'string' ? replica : 'unknown';
  if (ok === true && typeof jobId === 'number') return { ok, jobId, replica: by };
  return { ok: false, error: typeof error === 'string' ? error : 'jobNotStarted', replica: by };
}
