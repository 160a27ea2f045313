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

/**
 * The slots a backfill looks through: the first slot of the job's grid at or after an instant, without those its
 * policies leave out by day, `startAt` or `endAt` (null: none is left), and whether its `exclude` function leaves
 * one out.
 */
export interface BackfillGrid {
  first(time: number): number | null;
  excluded(slot: number): boolean;
}

/** The most slots of the grid a backfill looks at, excluded ones included, before it refuses the range. */
export const BACKFILL_GRID_MAX = 100_000;
/** How many slots of the grid are looked at between two turns of the event loop: a long search delays no lease. */
const LOOK_STEP = 1000;

/** What gives the event loop a turn (none under a test's fake timers), and the slots of the grid looked at. */
export interface Search {
  turn: (() => Promise<void>) | undefined;
  looked: number;
}

/**
 * The first slot at or after `from` and before `to` that a backfill runs, null if none; `'tooLong'` once the
 * search has looked at more than {@link BACKFILL_GRID_MAX} slots of the grid.
 */
export async function nextSlot(
  grid: BackfillGrid,
  from: number,
  to: number,
  search: Search,
): Promise<number | null | 'tooLong'> {
  for (let slot = grid.first(from); slot !== null && slot < to; slot = grid.first(slot + 1)) {
    if (++search.looked > BACKFILL_GRID_MAX) return 'tooLong';
    if (search.looked % LOOK_STEP === 0 && search.turn !== undefined) await search.turn();
    if (!grid.excluded(slot)) return slot;
  }
  return null;
}

/** How many slots a backfill of `[from, to)` runs, counted up to {@link BACKFILL_MAX} + 1, or `'tooLong'`. */
export async function countSlots(
  grid: BackfillGrid,
  from: number,
  to: number,
  search: Search,
): Promise<number | 'tooLong'> {
  let count = 0;
  for (let slot = await nextSlot(grid, from, to, search); slot !== null;) {
    if (slot === 'tooLong') return slot;
    if (++count > BACKFILL_MAX) return count;
    slot = await nextSlot(grid, slot + 1, to, search);
  }
  return count;
}

/** A backfill under way: the slots of the job's grid from `next` up to `to`, excluded, are still to run. */
export class Backfill {
  constructor(
    public next: number,
    readonly to: number,
    /** How many slots are left, when counted here (not on a holder that took the backfill over). */
    public left: number | undefined,
  ) {}
}
