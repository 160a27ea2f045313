import { describeValue, PeriodicConfigError } from '../scheduler/errors.js';

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

/** Throws a {@link PeriodicConfigError} unless `leaseMs` is an integer number of milliseconds ≥ 100. */
export function checkLeaseMs(where: string, leaseMs: unknown): asserts leaseMs is number {
  if (typeof leaseMs !== 'number' || !Number.isSafeInteger(leaseMs) || leaseMs < 100) {
    throw new PeriodicConfigError(
      `${where}: "leaseMs" must be an integer number of milliseconds ≥ 100, got ${describeValue(leaseMs)}; ` +
        'a lease is renewed every leaseMs / 3, so a shorter one would be lost to any pause of the process',
    );
  }
}
