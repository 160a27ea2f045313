// Operations on a job (pause, resume, trigger): who asked, checked, and the audit trail of a job that is not
// the fleet's, kept in memory. An exclusive job's are kept by its coordinator (docs/operations.md).
import { type PeriodicOperation } from './coordinator-port.js';
import { NoAnswer } from './store-calls.js';
import { messageOf, PeriodicStoreError } from './errors.js';
import { checkedOptions, type OptionRule } from './rules.js';
import { KEPT_COUNT } from './history.js';
import type { PeriodicEventOf } from './events.js';

/** Who asks for an operation, and why, as `pause`, `resume` and `trigger` take them. */
export interface PeriodicOperationOptions {
  /** Who asks, as the audit trail names them (a user, a service). */
  by?: string;
  /** Why, for the audit trail. */
  note?: string;
}

/** An entry of a job's audit trail, and the event `operated`. */
export interface PeriodicAuditEntry {
  name: string;
  action: PeriodicOperation['action'];
  by: string | null;
  note: string | null;
  /** The replica that was asked. */
  replica: string;
  at: Date;
}

const TEXT = 1000;

// U+0000 and lone surrogates are refused: PostgreSQL cannot store the one, UTF-8 cannot carry the other.
const text = (what: string): OptionRule => ({
  // eslint-disable-next-line no-control-regex -- finding control characters is the point
  accepts: (value) => typeof value === 'string' && value.length <= TEXT && !/\u0000|\p{Cs}/u.test(value),
  expected: `a string of at most ${TEXT} characters, without U+0000 or a lone surrogate (${what})`,
});

/** The rules of who asks for an operation and why: also those of who changes a stored schedule. */
export const OPERATION_RULES = {
  by: text("who asks, such as 'alice@example.com'"),
  note: text("why, such as 'the billing API is down'"),
} satisfies Record<keyof PeriodicOperationOptions, OptionRule>;

/** The operation `action` on job `name`, asked of `replica` now; options that are not accepted throw. */
export function operation(
  name: string,
  action: PeriodicOperation['action'],
  options: PeriodicOperationOptions | undefined,
  replica: string,
): PeriodicOperation {
  const where = `${action}() of job "${name}"`;
  const given = checkedOptions(where, options ?? {}, OPERATION_RULES, "{ by: 'alice', note: 'maintenance' }");
  const { by = null, note = null } = given as PeriodicOperationOptions;
  return { action, by, note, replica, at: Date.now() };
}

/**
 * The event `operated` of an operation asked of a job: an incident's entries in the audit trail have events of
 * their own (`incident`, `recovered`), and never come here.
 */
export function operatedEvent(name: string, asked: PeriodicOperation): PeriodicEventOf<'operated'> {
  const entry = auditEntry(name, asked);
  return { type: 'operated', ...entry, action: entry.action as PeriodicEventOf<'operated'>['action'] };
}

/** An operation as the audit trail and the event `operated` show it. */
export function auditEntry(
  name: string,
  { action, by, note, replica, at }: PeriodicOperation,
): PeriodicAuditEntry {
  return { name, action, by, note, replica, at: new Date(at) };
}

/** The `limit` of `audit()` (default 50): a limit above the entries kept reads what is kept. */
export function auditLimit(name: string, options: { limit?: number } | undefined, keep: number): number {
  const where = `audit() of job "${name}"`;
  const given = checkedOptions(where, options ?? {}, { limit: KEPT_COUNT }, '{ limit: 50 }');
  return Math.min((given.limit as number | undefined) ?? 50, keep);
}

/** The audit trail of a job that is not the fleet's, newest last: the latest `keep` operations. */
export class LocalAudit {
  private readonly entries: PeriodicOperation[] = [];

  constructor(private readonly keep: number) {}

  record(operation: PeriodicOperation): void {
    this.entries.push(operation);
    if (this.entries.length > this.keep) this.entries.shift();
  }

  /** The latest `limit`, newest first. */
  latest(limit: number): PeriodicOperation[] {
    return this.entries.slice(-limit).reverse();
  }
}

/**
 * The error of an operation the store did not take: it refused it (nothing changed), or did not answer in time
 * (it may still carry it out when it does).
 */
export function notRecorded(name: string, action: string, error: unknown): PeriodicStoreError {
  const what = `${action}() of job "${name}" failed`;
  const message =
    error instanceof NoAnswer
      ? `${what}: the coordinator's store did not answer (${error.message}), and may still carry it out when ` +
        `it does. Read audit() to see whether it did, or ask again: ${action}() can be repeated.`
      : `${what}: the coordinator's store did not take it (${messageOf(error)}); nothing changed in the fleet. ` +
        'Try again once the store answers.';
  return new PeriodicStoreError(message, { cause: error });
}
