import { describeValue } from '../scheduler/errors.js';
import type { PeriodicOperation } from '../scheduler/coordinator-port.js';
import { isMilliseconds, type OptionRule } from '../scheduler/rules.js';

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

/** The rule of every coordinator's `leaseMs`. */
export const LEASE_MS: OptionRule = {
  accepts: (value) => isMilliseconds(value, 100),
  expected: 'an integer number of milliseconds ≥ 100',
  because: 'a lease is renewed every leaseMs / 3, so a shorter one would be lost to any pause of the process',
};

/**
 * The version of the records the coordinators write beside the leases (pauses, audit entries): a replica reads
 * the fields it knows of a record of any version and ignores the others, so that replicas of two versions of
 * the package read each other's during a rolling deploy.
 */
export const RECORD_VERSION = 1;

/** An operation from its record, as JSON; the fields it lacks are null (or 'unknown'), those it adds ignored. */
export function operationOf(record: string): PeriodicOperation {
  const parsed = JSON.parse(record) as Partial<Record<keyof PeriodicOperation, unknown>> | null;
  const text = (value: unknown) => (typeof value === 'string' ? value : null);
  const { action } = parsed ?? {};
  if (action !== 'pause' && action !== 'resume' && action !== 'trigger') {
    throw new Error(`the store keeps ${describeValue(record)}, which is not an operation`);
  }
  const at = parsed?.at;
  return {
    action,
    by: text(parsed?.by),
    note: text(parsed?.note),
    replica: text(parsed?.replica) ?? 'unknown',
    at: typeof at === 'number' && Number.isSafeInteger(at) && at >= 0 ? at : 0,
  };
}
