import { describeValue } from '../scheduler/errors.js';
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
