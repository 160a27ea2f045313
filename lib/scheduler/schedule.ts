// When a cron job's ticks come: the slots of its calendar, which are croner's, and which slot a late tick is for.
// The scheduler asks; nothing here keeps state about a tick.
import { Cron } from 'croner';
import { describeValue, messageOf, PeriodicConfigError } from './errors.js';

/** How many slots that passed unseen a cron job counts one by one before it looks the latest one up. */
const CATCH_UP = 1000;

/**
 * A cron job whose slot `slot` has come by the wall clock (`wallNow`): the latest slot that has passed, how
 * many passed unseen before it (the machine slept, the clock was set forward), and the slot after it. A clock
 * set back cannot repeat one: each slot is sought after the last one.
 */
export function latestSlot(
  calendar: Slots,
  slot: number,
  wallNow: number,
): { slot: number; missed: number; next: number | null } {
  let missed = 0;
  let next = calendar.next(slot);
  while (next !== null && next <= wallNow) {
    if (++missed > CATCH_UP) {
      // Counted one by one up to here; past this, the count is a lower bound, the latest slot exact.
      slot = calendar.latest(wallNow);
      next = calendar.next(slot);
      break;
    }
    [slot, next] = [next, calendar.next(next)];
  }
  return { slot, missed, next };
}

/** What the scheduler asks of a job's wall-clock slots: a cron pattern's calendar, or the one slot of `at`. */
export interface Slots {
  /** The first slot strictly after `after` (epoch ms), or null if there is none. */
  next(after: number): number | null;
  /** The last slot at or before `time`; `time` itself if none. */
  latest(time: number): number;
  /** The shortest gap between two slots, in ms. */
  shortestGap(): number;
  /** The job is done with them. */
  release(): void;
}

/** The one slot of a job's `at` (epoch ms). */
export class OneSlot implements Slots {
  constructor(readonly at: number) {}

  next(after: number): number | null {
    return after < this.at ? this.at : null;
  }

  latest(time: number): number {
    return time >= this.at ? this.at : time;
  }

  shortestGap(): number {
    return Infinity;
  }

  release(): void {}
}

/** The calendars in use, by zone and pattern. */
const calendars = new Map<string, Calendar>();

/** The years of the first pattern parsed, which every pattern without a year field has alike. */
let everyYear: unknown[] | undefined;

/**
 * Lets the parsed pattern of `cron` share its list of years with every other pattern: croner keeps one of 10,000
 * years per pattern (80 kB), all of them allowed when the pattern has no year field, as none has here (the mode
 * refuses a seventh field). Thousands of patterns (a stored schedule per tenant, at the hour it chose) would
 * otherwise cost 80 kB each. A croner whose patterns are kept otherwise is left as it is.
 */
function shareYears(cron: Cron): void {
  const parsed = (cron as unknown as { _states?: { pattern?: { starYear?: unknown; year?: unknown } } })
    ._states?.pattern;
  const years = parsed?.year;
  if (parsed?.starYear !== true || !Array.isArray(years)) return;
  everyYear ??= years;
  if (years.length === everyYear.length) parsed.year = everyYear;
}

/** The longest cron pattern, in characters. */
const CRON_MAX = 1000;

/** How many of a pattern's next slots `jitter` is checked against: it must be shorter than every gap between them. */
const GAPS_CHECKED = 16;

/**
 * The wall-clock slots of a cron pattern in a time zone. The parsing and the calendar arithmetic, daylight
 * saving time included, are croner's (docs/calendar.md); this class only asks it for the slot
 * after a given instant. Jobs with the same pattern and zone share one calendar: croner's parsed pattern takes
 * about 80 kB (a table of 10,000 years), and the slot after the one they all just ran is computed once. A
 * calendar is forgotten when the last job that uses it lets it go (`release()`), so that jobs added and removed
 * with ever new patterns do not pile up parsed patterns.
 */
export class Calendar implements Slots {
  readonly #key: string;
  /** The jobs that use it. */
  #users = 0;
  readonly #cron: Cron;
  /** The last question asked of `next`, and its answer. */
  #after = NaN;
  #next: number | null = null;
  #shortestGap: number | undefined;

  /**
   * The calendar of `pattern` in `timezone`, checked: 5 fields, or 6 with seconds first, that match some instant,
   * in an IANA zone. `where` names the job in errors.
   */
  static of(where: string, pattern: string, timezone: string): Calendar {
    // Every value of every field listed one by one is under 600 characters: a longer pattern says nothing more.
    if (pattern.length > CRON_MAX) {
      throw new PeriodicConfigError(
        `${where}: "cron" must be at most ${CRON_MAX} characters, got ${pattern.length}: write a long list as a ` +
          "range or a step ('0-30', '*/5')",
      );
    }
    const key = `${timezone} ${pattern}`;
    let calendar = calendars.get(key);
    if (calendar === undefined) {
      calendar = new Calendar(where, key, pattern, timezone);
      calendars.set(key, calendar);
    }
    calendar.#users++;
    return calendar;
  }

  private constructor(
    where: string,
    key: string,
    readonly pattern: string,
    readonly timezone: string,
  ) {
    this.#key = key;
    if (!isTimeZone(timezone)) {
      throw new PeriodicConfigError(
        `${where}: "timezone" must be an IANA time zone name such as 'Europe/Berlin' or 'UTC', got ` +
          describeValue(timezone),
      );
    }
    try {
      // A pattern of fixed wall times (no wildcard or step in its seconds, minutes and hours, lists and ranges
      // allowed) runs each once on DST days, as docs/calendar.md says; croner's default counts only single values.
      this.#cron = new Cron(pattern, {
        ...zoneOption(timezone),
        mode: '5-or-6-parts',
        fixedTimeRule: 'no-wildcard',
      });
    } catch (error) {
      // croner's own count allows 7 fields (a year), which the mode above refuses: say the count in one way.
      const fields = pattern.trim().split(/\s+/).length;
      const why =
        pattern.trim().startsWith('@') || fields === 5 || fields === 6
          ? messageOf(error).replace(/^CronPattern: /, '')
          : `it has ${fields} field${fields === 1 ? '' : 's'}`;
      throw new PeriodicConfigError(
        `${where}: "cron" must be a cron pattern of 5 fields, or 6 with seconds first, such as '0 3 * * *' or ` +
          `'*/10 * * * * *', got ${describeValue(pattern)}: ${why}`,
      );
    }
    shareYears(this.#cron);
    if (this.next(Date.now()) === null) {
      throw new PeriodicConfigError(
        `${where}: "cron" never matches: no instant fits ${describeValue(pattern)} (a day that no month has, ` +
          'such as 30 February?); give a pattern that names a real time',
      );
    }
  }

  /** A job that used the calendar is done with it: the last one lets it be forgotten. */
  release(): void {
    if (--this.#users === 0) calendars.delete(this.#key);
  }

  /**
   * The first slot strictly after `after` (epoch ms), or null if the pattern has none. The last answer holds for
   * any instant from the question it answered up to the slot it gave: the many jobs of one pattern that start
   * together (a replica that boots with thousands of stored schedules) ask croner once.
   */
  next(after: number): number | null {
    const known = after >= this.#after && (this.#next === null || after < this.#next);
    if (!known) {
      this.#next = this.#cron.nextRun(new Date(after))?.getTime() ?? null;
      this.#after = after;
    }
    return this.#next;
  }

  /** The last slot at or before `time` (epoch ms); `time` itself if none (the pattern began after it). */
  latest(time: number): number {
    return this.#cron.previousRuns(1, new Date(time + 1))[0]?.getTime() ?? time;
  }

  /**
   * The shortest gap between the pattern's slots, in ms: a jitter must be shorter. It is sought among the next
   * slots from now and from just before each daylight saving change of the coming year, where a daily pattern's
   * gap is 23 hours.
   */
  shortestGap(): number {
    if (this.#shortestGap === undefined) {
      let gap = Infinity;
      const now = Date.now();
      for (const from of [now, ...offsetChanges(this.timezone, now)]) {
        const slots = this.#cron.nextRuns(GAPS_CHECKED, new Date(from)).map((slot) => slot.getTime());
        for (let i = 1; i < slots.length; i++) gap = Math.min(gap, slots[i] - slots[i - 1]);
      }
      this.#shortestGap = gap;
    }
    return this.#shortestGap;
  }
}

const DAY = 86_400_000;

/** Two days before each change of `zone`'s UTC offset in the year after `from` (epoch ms). */
function offsetChanges(zone: string, from: number): number[] {
  const format = new Intl.DateTimeFormat('en-US', { timeZone: zone, timeZoneName: 'longOffset' });
  const offset = (time: number) =>
    format.formatToParts(time).find((part) => part.type === 'timeZoneName')?.value;
  const changes: number[] = [];
  let previous = offset(from);
  for (let day = 1; day <= 366; day++) {
    const current = offset(from + day * DAY);
    if (current !== previous) changes.push(from + (day - 2) * DAY);
    previous = current;
  }
  return changes;
}

/** @internal How many parsed patterns are kept: for tests. */
export function cachedCalendars(): number {
  return calendars.size;
}

/** The process's zone as last read, and the `TZ` it was read with. */
let processZone: { tz: string | undefined; zone: string } | undefined;

/**
 * The zone the process runs in, as an IANA name: the default zone of cron jobs. Read again when `TZ` changes,
 * which is how a process changes its zone (Node takes a new `process.env.TZ` at once); a read makes an
 * Intl.DateTimeFormat, 80 to 250 µs, which a bootstrap of a thousand cron jobs would pay a thousand times.
 */
export function processTimeZone(): string {
  const tz = process.env.TZ;
  if (processZone === undefined || processZone.tz !== tz) {
    processZone = { tz, zone: Intl.DateTimeFormat().resolvedOptions().timeZone };
  }
  return processZone.zone;
}

/**
 * How croner is told the zone. It computes a slot in UTC in about 10 µs and one in the process's own zone in
 * about 15, but one in any named zone in 100 to 200 (it formats dates through Intl): UTC and the process's zone,
 * the common cases, are given the fast ways.
 */
function zoneOption(zone: string): { timezone?: string; utcOffset?: number } {
  const canonical = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  if (UTC.has(canonical)) return { utcOffset: 0 };
  return canonical === processTimeZone() ? {} : { timezone: zone };
}

const UTC = new Set(['UTC', 'Etc/UTC', 'Etc/GMT', 'GMT']);

/** Whether `zone` is an IANA time zone name this process knows. */
export function isTimeZone(zone: unknown): zone is string {
  if (typeof zone !== 'string' || zone === '') return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}
