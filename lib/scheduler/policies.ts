// Schedule policies (docs/policies.md): which of a job's slots run at all (`startAt`, `endAt`, `at`, `exclude`),
// how many (`maxRuns`), which of those that passed unseen still run (`catchUp`), and when failures pause the job
// (`pauseAfterFailures`). Here, how the options are checked and what they answer of a slot; the scheduler asks.
import { describeValue, PeriodicConfigError } from './errors.js';
import { isMilliseconds, oneOf, type OptionRule, checkedOptions } from './rules.js';

/** Which slots that passed unseen (the fleet was down, the event loop stalled) still run, and how far back. */
export interface PeriodicCatchUp {
  /** How old a slot may be and still run, in integer ms ≥ 1. @default one interval ('none': 1000) */
  window?: number;
  /** `'latest'`: the latest slot once; `'all'`: each one, oldest first; `'none'`: none. @default 'latest' */
  runs?: 'latest' | 'all' | 'none';
}

/** A whole day (`'YYYY-MM-DD'` in the job's time zone), or a range of them, both days included. */
export type PeriodicExcludedDay = string | { from: string; to: string };

/** The slots a job does not tick at: whole days and ranges of them, or a function of the slot. */
export type PeriodicExclude = readonly PeriodicExcludedDay[] | ((slot: Date) => boolean);

/** An instant: a `Date`, or an ISO 8601 text with its offset (`'2027-01-01T09:00:00+01:00'`) or a day (UTC). */
export type PeriodicInstant = Date | string;

/** The schedule policies of a job's options (docs/policies.md). */
export interface PolicyOptions {
  /**
   * Which slots that passed unseen (the fleet was down, the event loop stalled) still run: `'latest'` the latest
   * once, `'all'` each one oldest first, `'none'` none; only those at most `window` ms old. @default latest, one interval
   */
  catchUp?: PeriodicCatchUp;
  /** No run before this instant. @default none */
  startAt?: PeriodicInstant;
  /** No run after this instant; once it has passed, the job is `'completed'`. @default none */
  endAt?: PeriodicInstant;
  /** The job is `'completed'` after this many slots have run (for the fleet, for an exclusive job). @default none */
  maxRuns?: number;
  /** One slot at this instant, then the job is `'completed'`; instead of `every` and `cron`. @default none */
  at?: PeriodicInstant;
  /** Days (`'YYYY-MM-DD'` in the job's zone) and ranges of them, or a function of the slot: slots it does not tick at. */
  exclude?: PeriodicExclude;
  /** Pauses the job (for the fleet, for an exclusive job) once this many slots in a row have failed. @default none */
  pauseAfterFailures?: number;
}

/** The most days and ranges an `exclude` list holds. */
const EXCLUDE_MAX = 1000;
/** The most slots a search for the next slot looks at one by one before it lets the tick look again. */
const SEARCH_STEPS = 10_000;
/** How late a slot may be and still run under `catchUp: { runs: 'none' }` without a `window`. */
export const ON_TIME_MS = 1000;

const DAY = /^(\d{4})-(\d{2})-(\d{2})$/;
/** An ISO 8601 date and time with its offset (or `Z`), or a date alone (read as UTC, as `Date` reads it). */
const ISO = /^(\d{4}-\d{2}-\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2})))?$/;

/**
 * The instant an option gives, in epoch ms; NaN when it is none. A text must name a real day and time: no 30
 * February, no 24:00 (`Date` would read them as days after).
 */
export function instantOf(value: unknown): number {
  if (value instanceof Date) return value.getTime();
  const parts = typeof value === 'string' ? ISO.exec(value) : null;
  if (parts === null) return NaN;
  const [, day, hours = '0', minutes = '0', seconds = '0', offsetHours = '0', offsetMinutes = '0'] = parts;
  const real =
    isDay(day) &&
    Number(hours) <= 23 &&
    Number(minutes) <= 59 &&
    Number(seconds) <= 59 &&
    Number(offsetHours) <= 23 &&
    Number(offsetMinutes) <= 59;
  return real ? Date.parse(value as string) : NaN;
}

const INSTANT = {
  accepts: (value: unknown) => Number.isFinite(instantOf(value)),
  expected:
    "a Date, or an ISO 8601 text with its offset such as '2027-01-01T09:00:00+01:00' or '2027-01-01T08:00:00Z'",
} satisfies OptionRule;

/** Whether `value` names a day of the calendar, `'YYYY-MM-DD'`. */
function isDay(value: unknown): value is string {
  const match = typeof value === 'string' ? DAY.exec(value) : null;
  if (match === null) return false;
  const [, year, month, day] = match.map(Number);
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** The rules of the policy options, for the table of a job's options. */
export const POLICY_RULES = {
  catchUp: {
    accepts: (value) => typeof value === 'object' && value !== null && !Array.isArray(value),
    expected: "an object such as { window: 21_600_000, runs: 'all' }",
  },
  startAt: INSTANT,
  endAt: INSTANT,
  maxRuns: {
    accepts: (value) => isMilliseconds(value, 1),
    expected: 'an integer ≥ 1 (how many slots the job runs in all)',
  },
  at: INSTANT,
  exclude: {
    accepts: (value) =>
      (typeof value === 'function' && !isAsync(value)) ||
      (Array.isArray(value) && value.length <= EXCLUDE_MAX && excludeProblem(value) === undefined),
    expected:
      `a list of at most ${EXCLUDE_MAX} days ('2026-12-25') and ranges ({ from: '2026-12-31', to: '2027-01-02' }), ` +
      'or a function (slot: Date) => boolean',
    problem: (value) => {
      if (typeof value === 'function')
        return isAsync(value) ? 'an async function: it must answer at once' : undefined;
      if (!Array.isArray(value)) return undefined;
      if (value.length > EXCLUDE_MAX)
        return `it has ${value.length} entries; give ranges instead of days one by one`;
      return excludeProblem(value);
    },
  },
  pauseAfterFailures: {
    accepts: (value) => isMilliseconds(value, 1),
    expected: 'an integer ≥ 1 (how many slots in a row fail before the job is paused)',
  },
} satisfies Record<keyof PolicyOptions, OptionRule>;

const CATCH_UP_RULES = {
  window: { accepts: (value) => isMilliseconds(value, 1), expected: 'an integer number of milliseconds ≥ 1' },
  runs: oneOf('latest', 'all', 'none'),
} satisfies Record<keyof PeriodicCatchUp, OptionRule>;

/** Whether a function is `async`, whose answer would come too late for the tick that asks it. */
const isAsync = (fn: unknown) =>
  (fn as { constructor?: { name?: string } }).constructor?.name === 'AsyncFunction';

/** What is wrong with an `exclude` list, or undefined. */
function excludeProblem(list: readonly unknown[]): string | undefined {
  for (let i = 0; i < list.length; i++) {
    const entry = list[i];
    if (typeof entry === 'string') {
      if (!isDay(entry))
        return `entry ${i} is ${describeValue(entry)}, not a day 'YYYY-MM-DD' of the calendar`;
      continue;
    }
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      return `entry ${i} is ${describeValue(entry)}, neither a day nor a range { from, to }`;
    }
    const keys = Object.keys(entry);
    const { from, to } = entry as { from?: unknown; to?: unknown };
    if (keys.some((key) => key !== 'from' && key !== 'to') || !isDay(from) || !isDay(to)) {
      return `entry ${i} is ${describeValue(entry)}, not a range { from: 'YYYY-MM-DD', to: 'YYYY-MM-DD' }`;
    }
    if (from > to) return `entry ${i} ends (${to}) before it begins (${from}); swap them`;
  }
  return undefined;
}

/** What a policy answers of a grid: the first slot at or after an instant (epoch ms), null if none. */
export type SlotFrom = (time: number) => number | null;

/**
 * A job's policies, checked, in the form the scheduler asks them: made only for a job that has one, so that the
 * others pay nothing.
 */
export class SlotPolicy {
  readonly #days: ReadonlySet<string>;
  /** Ranges of days as [from, to], both included, in `'YYYY-MM-DD'` (ordered as texts). */
  readonly #ranges: readonly (readonly [string, string])[];
  readonly #excludes: ((slot: Date) => boolean) | undefined;
  readonly #format: Intl.DateTimeFormat | undefined;

  private constructor(
    /** Epoch ms; -Infinity when not given. */
    readonly startAt: number,
    /** Epoch ms; Infinity when not given. */
    readonly endAt: number,
    readonly maxRuns: number,
    /** `at`: the one slot, epoch ms; NaN when not given. */
    readonly at: number,
    readonly catchUp: { readonly window: number | undefined; readonly runs: 'latest' | 'all' | 'none' },
    readonly pauseAfterFailures: number,
    exclude: PeriodicExclude | undefined,
    /** The zone the days of `exclude` are read in. */
    readonly timezone: string,
  ) {
    const days = new Set<string>();
    const ranges: [string, string][] = [];
    if (Array.isArray(exclude)) {
      for (const entry of exclude as readonly PeriodicExcludedDay[]) {
        if (typeof entry === 'string') days.add(entry);
        else ranges.push([entry.from, entry.to]);
      }
    }
    this.#days = days;
    this.#ranges = ranges;
    this.#excludes = typeof exclude === 'function' ? exclude : undefined;
    this.#format =
      days.size + ranges.length === 0 || isUtc(timezone)
        ? undefined
        : new Intl.DateTimeFormat('en-CA', {
            timeZone: timezone,
            year: 'numeric',
            month: '2-digit',
            day: '2-digit',
          });
  }

  /**
   * The policy of a job's options (each checked by its rule already), or undefined when it has none. `timezone`
   * is the zone the job's slots are read in, if it has one. Throws a {@link PeriodicConfigError}.
   */
  static of(where: string, given: PolicyOptions, timezone: string | undefined): SlotPolicy | undefined {
    const { catchUp, startAt, endAt, maxRuns, at, exclude, pauseAfterFailures } = given;
    if (
      catchUp === undefined &&
      startAt === undefined &&
      endAt === undefined &&
      maxRuns === undefined &&
      at === undefined &&
      exclude === undefined &&
      pauseAfterFailures === undefined
    ) {
      return undefined;
    }
    const checked = (
      catchUp === undefined
        ? {}
        : checkedOptions(
            `${where}: "catchUp"`,
            catchUp,
            CATCH_UP_RULES,
            "{ window: 21_600_000, runs: 'all' }",
          )
    ) as PeriodicCatchUp;
    const start = startAt === undefined ? -Infinity : instantOf(startAt);
    const end = endAt === undefined ? Infinity : instantOf(endAt);
    const slot = at === undefined ? NaN : instantOf(at);
    if (slot < start || slot > end) {
      throw new PeriodicConfigError(
        `${where}: "at" (${new Date(slot).toISOString()}) is ${slot < start ? 'before "startAt"' : 'after "endAt"'}: ` +
          'the job would never run; give an "at" between them, or leave startAt and endAt out',
      );
    }
    if (end < start) {
      throw new PeriodicConfigError(
        `${where}: "endAt" (${new Date(end).toISOString()}) must not come before "startAt" ` +
          `(${new Date(start).toISOString()}): the job would never run; give a later endAt`,
      );
    }
    const policy = new SlotPolicy(
      start,
      end,
      maxRuns ?? Infinity,
      at === undefined ? NaN : instantOf(at),
      { window: checked.window, runs: checked.runs ?? 'latest' },
      pauseAfterFailures ?? Infinity,
      exclude,
      timezone ?? 'UTC',
    );
    if (!Number.isNaN(slot) && !policy.asksAtTick && policy.excludes(slot)) {
      throw new PeriodicConfigError(
        `${where}: "at" (${new Date(slot).toISOString()}) falls on a day "exclude" leaves out: the job would ` +
          'never run; give another "at", or leave that day out of exclude',
      );
    }
    return policy;
  }

  /** Whether `exclude` leaves the slot out. A function that throws leaves nothing out; the tick reports it. */
  excludes(slot: number): boolean {
    if (this.#excludes !== undefined) {
      try {
        return this.#excludes(new Date(slot)) === true;
      } catch {
        return false;
      }
    }
    return this.#excludedDayEnd(slot) !== undefined;
  }

  /** Calls the `exclude` function of the slot as the tick does: its error thrown, and a promise refused. */
  excludedAtTick(slot: number): boolean {
    if (this.#excludes === undefined) return this.#excludedDayEnd(slot) !== undefined;
    const answer: unknown = this.#excludes(new Date(slot));
    if (typeof (answer as { then?: unknown } | null)?.then === 'function') {
      throw new PeriodicConfigError(
        '"exclude" returned a promise: it must answer at once, true or false (look the days up beforehand)',
      );
    }
    return answer === true;
  }

  /**
   * The first slot at or after `slot` that the job ticks at (`from` gives a grid's slots), or null when none is
   * left (past `endAt`). A function of `exclude` is asked slot by slot, up to a bound: past it, the slot found so
   * far is given, and its tick looks again; with `asksFunction` false, it is not asked.
   */
  first(slot: number | null, from: SlotFrom, asksFunction = true): number | null {
    for (let steps = 0; slot !== null; steps++) {
      if (slot > this.endAt) return null;
      if (slot < this.startAt) {
        slot = from(this.startAt);
        continue;
      }
      const dayEnd = this.#excludedDayEnd(slot);
      if (dayEnd !== undefined) {
        slot = from(dayEnd);
        continue;
      }
      if (this.#excludes === undefined || !asksFunction || steps >= SEARCH_STEPS || !this.excludes(slot)) {
        return slot;
      }
      slot = from(slot + 1);
    }
    return null;
  }

  /** Whether `exclude` is a function, which each tick asks again. */
  get asksAtTick(): boolean {
    return this.#excludes !== undefined;
  }

  /** When a slot is left out by its day: the first instant of the day after the excluded days it is in. */
  #excludedDayEnd(slot: number): number | undefined {
    if (this.#days.size === 0 && this.#ranges.length === 0) return undefined;
    const day = this.#dayOf(slot);
    let last: string | undefined;
    if (this.#days.has(day)) last = day;
    for (const [from, to] of this.#ranges)
      if (from <= day && day <= to && (last === undefined || to > last)) last = to;
    if (last === undefined) return undefined;
    // A day right after the range may be excluded too: the search goes on from there.
    return this.#startOfDayAfter(last, slot);
  }

  /** The day `'YYYY-MM-DD'` of an instant in the policy's zone. */
  #dayOf(time: number): string {
    const format = this.#format;
    return format === undefined ? new Date(time).toISOString().slice(0, 10) : format.format(time);
  }

  /** The first instant whose day (in the zone) comes after `day`, sought from `from`, an instant of `day` or before. */
  #startOfDayAfter(day: string, from: number): number {
    const [year, month, date] = day.split('-').map(Number);
    const midnight = Date.UTC(year, month - 1, date + 1);
    if (this.#format === undefined) return midnight;
    // Local midnight lies within 14 hours of UTC's: the first instant of the next day is sought between.
    let low = Math.max(from, midnight - 15 * 3_600_000);
    let high = midnight + 15 * 3_600_000;
    while (high - low > 1) {
      const middle = Math.floor((low + high) / 2);
      if (this.#dayOf(middle) > day) high = middle;
      else low = middle;
    }
    return high;
  }
}

function isUtc(zone: string): boolean {
  try {
    const canonical = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
    return canonical === 'UTC' || canonical === 'Etc/UTC' || canonical === 'Etc/GMT' || canonical === 'GMT';
  } catch {
    return false;
  }
}
