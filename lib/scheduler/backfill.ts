// Backfill (docs/policies.md): the slots of a past range of a job's grid run again on request, oldest first, one
// at a time. Here, how a request is checked and where a backfill stands; the scheduler runs its slots.
import { describeValue, PeriodicConfigError } from './errors.js';
import { OPERATION_RULES, type PeriodicOperationOptions } from './operations.js';
import { instantOf, POLICY_RULES, type PeriodicInstant } from './policies.js';
import { checkedOptions } from './rules.js';

/** What `registry.backfill` takes: the range of slots, `[from, to)`, and who asks and why. */
export interface PeriodicBackfillOptions extends PeriodicOperationOptions {
  from: PeriodicInstant;
  to: PeriodicInstant;
}

/** The most slots one backfill runs. */
export const BACKFILL_MAX = 10_000;

const RULES = {
  from: { ...POLICY_RULES.startAt, required: true },
  to: { ...POLICY_RULES.startAt, required: true },
  ...OPERATION_RULES,
};

/** `options` checked: the range in wall-clock ms, and who asks; a {@link PeriodicConfigError} when they are not. */
export function checkBackfill(
  where: string,
  options: unknown,
): { from: number; to: number; operation: PeriodicOperationOptions } {
  const example = "{ from: '2026-12-01T00:00:00Z', to: '2026-12-02T00:00:00Z', by: 'alice' }";
  const given = checkedOptions(where, options, RULES, example) as unknown as PeriodicBackfillOptions;
  const [from, to] = [instantOf(given.from), instantOf(given.to)];
  if (to <= from) {
    throw new PeriodicConfigError(
      `${where}: "to" (${new Date(to).toISOString()}) must come after "from" (${new Date(from).toISOString()}): ` +
        'the range is [from, to), the slot at "to" excluded',
    );
  }
  if (to > Date.now()) {
    throw new PeriodicConfigError(
      `${where}: "to" must not be in the future, got ${describeValue(given.to)}: a backfill runs slots that ` +
        'have passed, and the job runs those to come; give a "to" up to now',
    );
  }
  const { by, note } = given;
  return {
    from,
    to,
    operation: { ...(by === undefined ? {} : { by }), ...(note === undefined ? {} : { note }) },
  };
}

/** What gives the job's first slot at or after an instant (its grid, its calendar, its policies), null if none. */
export type FirstSlot = (time: number) => number | null;

/** A backfill under way: the slots of the job's grid from `next` up to `to`, excluded, are still to run. */
export class Backfill {
  constructor(
    public next: number,
    readonly to: number,
  ) {}

  /** The next slot to run, or null when none is left. */
  slot(first: FirstSlot): number | null {
    const slot = first(this.next);
    return slot === null || slot >= this.to ? null : slot;
  }

  /** How many slots are left, counted up to `max` (one more: there are more than `max`). */
  left(first: FirstSlot, max = BACKFILL_MAX): number {
    let count = 0;
    for (let slot = this.slot(first); slot !== null && count <= max; count++) {
      slot = first(slot + 1);
      if (slot !== null && slot >= this.to) slot = null;
    }
    return count;
  }
}
