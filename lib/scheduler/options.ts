import { describeValue, PeriodicConfigError } from './errors.js';
import { checkedOptions, invalid, isMilliseconds, NAME_RULE, oneOf, type OptionRule } from './rules.js';
import { Calendar, isTimeZone, OneSlot, processTimeZone, type Slots } from './schedule.js';
import { CHECK_IN_RULE, type PeriodicCheckIn } from './check-ins.js';
import {
  instantOf,
  type PeriodicCatchUp,
  type PeriodicExclude,
  type PeriodicInstant,
  POLICY_RULES,
  type PolicyOptions,
  SlotPolicy,
} from './policies.js';
import type { PeriodicCoordinator } from './coordinator-port.js';
import { capable } from './reply-checks.js';
import type { PeriodicContext } from './run.js';

/** `regular`: `every` is start-to-start (fixed rate); `shifted`: from the end of a run to the next tick (fixed delay). */
export type DelayMode = 'regular' | 'shifted';

/** What a tick does while an earlier run of the job is still running. */
export type OverlapPolicy = 'run' | 'ignore' | 'stopPrevious';

/** `manual`: no timers; the job ticks only when asked to (`tick`, `syncTick`). */
export type SchedulerMode = 'auto' | 'manual';

/** Grace a stopped run gets to settle: milliseconds, `Infinity`, or `'brutalKill'` (none). */
export type JobShutdown = number | 'brutalKill';

/** The options of a periodic job. `Host` is the class whose method runs, handed to `when`. */
export interface PeriodicOptions<Host extends object = object> extends PolicyOptions {
  /** Interval in integer milliseconds (≥ 1); see `delayMode`. Required, unless `cron` is given. */
  every?: number;
  /** A cron pattern (5 fields, or 6 with seconds first): ticks at the wall-clock times it names. */
  cron?: string;
  /** The IANA time zone `cron` is read in. @default the process's zone */
  timezone?: string;
  /** Auto mode: each run starts after a random delay in [0, jitter) ms past its slot. @default 0 */
  jitter?: number;
  /** Registry key, event and log label; unique in the application. @default '<Class>.<method>' */
  name?: string;
  /** Integer milliseconds from start to the first tick. @default every */
  initialDelay?: number;
  /** How `every` is measured. @default 'regular' */
  delayMode?: DelayMode;
  /** Guard evaluated on every tick, with the provider instance; a truthy result starts the job. @default none */
  when?(instance: Host): boolean | Promise<boolean>;
  /** What a tick does while an earlier run is still running. @default 'run' */
  onOverlap?: OverlapPolicy;
  /** Longest a run may take, in integer milliseconds (≥ 1) or `Infinity`, before it is stopped. @default Infinity */
  timeout?: number;
  /** Grace a stopped run gets to settle after its signal is aborted. @default 5000 */
  jobShutdown?: JobShutdown;
  /** `'manual'`: no timers, ticks only through `tick` / `syncTick`. @default the module's mode, else 'auto' */
  mode?: SchedulerMode;
  /** At most one replica of the application runs this job at a time; needs a coordinator. @default false */
  exclusive?: boolean;
  /**
   * A run that ends `'error'` or `'timeout'` runs again for the same slot, up to `attempts` more times, the n-th
   * retry after `min(max, initial · factor^(n−1))` ms, ±10%. @default no retry
   */
  retry?: PeriodicRetry;
  /**
   * Exclusive jobs: `'atLeastOnce'` runs a slot whose run did not end by itself (its holder died, shut down or
   * lost the lease) again on the next holder. @default 'atMostOnce'
   */
  delivery?: Delivery;
  /**
   * Where each run's check-ins go (`POST <url>/start`, `<url>`, `<url>/fail`, or `send`), over the module's
   * `checkIns`; `false`: none (docs/alerts.md). @default the module's
   */
  checkIn?: PeriodicCheckIn | false;
}

/** Whether a slot interrupted with its holder is run again by the next (`'atLeastOnce'`) or not. */
export type Delivery = 'atMostOnce' | 'atLeastOnce';

/** The `retry` option of a job. */
export interface PeriodicRetry {
  /** How many times a failed run is run again, an integer ≥ 0. @default 0 */
  attempts?: number;
  /** The waits before the retries: `initial` and `max` integer ms ≥ 1 (`max ≥ initial`), `factor` ≥ 1. */
  backoff?: { initial?: number; factor?: number; max?: number };
}

/** A job's `retry`, with every default filled in. */
export interface ResolvedRetry {
  readonly attempts: number;
  readonly backoff: { readonly initial: number; readonly factor: number; readonly max: number };
}

/** What a {@link PeriodicScheduler} is built from: the job's options, its name and the function it runs. */
export interface PeriodicSchedulerOptions extends Omit<PeriodicOptions, 'name' | 'when'> {
  /** Registry key, event and log label. */
  name: string;
  /** The job: called once per run with its context; a returned promise is awaited. */
  run: (context: PeriodicContext) => unknown;
  /** Guard evaluated on every tick; a truthy result starts the job. @default none */
  when?: () => boolean | Promise<boolean>;
  /** Shares the lease of an `exclusive` job between replicas; read only when `exclusive` is true. */
  coordinator?: PeriodicCoordinator;
}

/** `T` without its `readonly`: the options as `resolveOptions` builds them. */
type Writable<T> = { -readonly [K in keyof T]: T[K] };

/** A job's options after validation, with every default filled in. */
export interface ResolvedPeriodicOptions {
  readonly name: string;
  /** 0 for a cron job. */
  readonly every: number;
  readonly jitter: number;
  readonly initialDelay: number;
  readonly delayMode: DelayMode;
  readonly onOverlap: OverlapPolicy;
  readonly timeout: number;
  readonly jobShutdown: JobShutdown;
  readonly mode: SchedulerMode;
  readonly exclusive: boolean;
  readonly retry: ResolvedRetry;
  readonly delivery: Delivery;
  // The options below are left out when not given (an idle job of a thousand is smaller without them).
  /** Cron jobs only, as `timezone` too (resolved to the process's zone when not given). */
  readonly cron?: string;
  readonly timezone?: string;
  readonly when?: () => boolean | Promise<boolean>;
  readonly checkIn?: PeriodicCheckIn | false;
  readonly catchUp?: PeriodicCatchUp;
  readonly startAt?: PeriodicInstant;
  readonly endAt?: PeriodicInstant;
  readonly maxRuns?: number;
  readonly at?: PeriodicInstant;
  readonly exclude?: PeriodicExclude;
  readonly pauseAfterFailures?: number;
  /** @internal The policies above, as the scheduler asks them; left out when the job has none. */
  readonly policy?: SlotPolicy;
}

/**
 * One option of a job, as the one table of them says it: the rule its value must keep, what the README's table of
 * options says of it, and a valid value other than its default (with the options it needs beside it), with which
 * the tests prove that it reaches the engine from `@Periodic()`, `registry.add()` and the module's `jobs` alike.
 */
export interface JobOption extends OptionRule {
  /** The README's "valid values". */
  valid: string;
  /** The README's "default". */
  default: string;
  /** The README's "meaning". */
  meaning: string;
  /** Options of a valid job that sets this one to a value other than its default. */
  example: Partial<PeriodicOptions>;
}

const MS_0 = {
  accepts: (v: unknown) => isMilliseconds(v, 0),
  expected: 'an integer number of milliseconds ≥ 0',
};

/**
 * The options of a job, in the order of the README's table. Adding an option is one entry here, a line of
 * {@link PeriodicOptions}, and its behaviour: the decorator, the registry and the module's `jobs` read this table.
 */
export const JOB_OPTIONS = {
  every: {
    accepts: (v) => isMilliseconds(v, 1),
    expected: 'an integer number of milliseconds ≥ 1',
    valid: 'integer ms, 1 ≤ every ≤ 2^53−1',
    default: 'required, unless `cron` or `at`',
    meaning: 'interval; see `delayMode`',
    example: { every: 1234 },
  },
  cron: {
    accepts: (v) => typeof v === 'string' && v.trim() !== '',
    expected: "a cron pattern such as '0 3 * * *'",
    valid: 'a cron pattern: 5 fields, or 6 with seconds first',
    default: 'none',
    meaning:
      'ticks at the wall-clock times the pattern names ([calendar schedules](docs/calendar.md)); instead of `every`',
    example: { cron: '0 3 * * *' },
  },
  timezone: {
    accepts: (v) => typeof v === 'string' && v !== '',
    expected: "an IANA time zone name such as 'Europe/Berlin' or 'UTC'",
    valid: "an IANA zone name (`'Europe/Berlin'`, `'UTC'`)",
    default: "the process's zone",
    meaning: 'the zone `cron` and the days of `exclude` are read in (not with `every`)',
    example: { cron: '0 3 * * *', timezone: 'Asia/Tokyo' },
  },
  jitter: {
    ...MS_0,
    valid: 'integer ms ≥ 0, less than the interval (so ≤ 2^53−2)',
    default: '`0`',
    meaning:
      'auto mode: each run starts after a random delay in `[0, jitter)` past its slot; the slot stays `scheduledAt`',
    example: { every: 60_000, jitter: 5000 },
  },
  name: {
    ...NAME_RULE,
    required: true,
    valid: "1–200 characters, no control character, not blank, not `'.'` or `'..'`; unique in the app",
    default: "`'<Class>.<method>'`",
    meaning:
      "registry key, event and log label; the class is the instance's (a subclass names its inherited jobs)",
    example: { every: 60_000, name: 'renamed' },
  },
  initialDelay: {
    ...MS_0,
    valid: 'integer ms, 0 ≤ initialDelay ≤ 2^53−1',
    default: '`every`',
    meaning: "time from the job's start to its first tick (`every` jobs only)",
    example: { every: 60_000, initialDelay: 7 },
  },
  delayMode: {
    ...oneOf('regular', 'shifted'),
    valid: "`'regular'`, `'shifted'`",
    default: "`'regular'`",
    meaning:
      'regular: `every` is start-to-start (fixed rate); shifted: from the end of a run to the next tick (fixed delay); `every` jobs only',
    example: { every: 60_000, delayMode: 'shifted' },
  },
  when: {
    accepts: (v) => typeof v === 'function',
    expected: 'a function that returns a boolean or a promise of one',
    valid: '`(instance) => boolean \\| Promise<boolean>`',
    default: 'none (always)',
    meaning: 'guard evaluated on every tick with the provider instance; a truthy result starts the run',
    example: { every: 60_000, when: () => false },
  },
  onOverlap: {
    ...oneOf('run', 'ignore', 'stopPrevious'),
    valid: "`'run'`, `'ignore'`, `'stopPrevious'`",
    default: "`'run'`",
    meaning: 'what a tick does while an earlier run is still running',
    example: { every: 60_000, onOverlap: 'ignore' },
  },
  timeout: {
    accepts: (v) => v === Infinity || isMilliseconds(v, 1),
    expected: 'an integer number of milliseconds ≥ 1, or Infinity',
    valid: 'integer ms, 1 ≤ timeout ≤ 2^53−1, or `Infinity`',
    default: '`Infinity`',
    meaning: 'longest a run may take before it is stopped',
    example: { every: 60_000, timeout: 999 },
  },
  jobShutdown: {
    accepts: (v) => v === Infinity || v === 'brutalKill' || isMilliseconds(v, 0),
    expected: "an integer number of milliseconds ≥ 0, Infinity or 'brutalKill'",
    choices: ['brutalKill'],
    valid: "integer ms, 0 ≤ jobShutdown ≤ 2^53−1, `Infinity`, `'brutalKill'`",
    default: '`5000`',
    meaning: 'grace a stopped run gets to settle after its signal is aborted',
    example: { every: 60_000, jobShutdown: 'brutalKill' },
  },
  mode: {
    ...oneOf('auto', 'manual'),
    valid: "`'auto'`, `'manual'`",
    default: "the module's (`auto`)",
    meaning: "manual: no timers; ticks only through the registry's `tick` / `syncTick`",
    example: { every: 60_000, mode: 'manual' },
  },
  exclusive: {
    accepts: (v) => typeof v === 'boolean',
    expected: 'true or false',
    valid: 'boolean',
    default: '`false`',
    meaning:
      "at most one replica runs the job at a time; needs the module's `coordinator` ([replicas](docs/replicas.md))",
    example: { every: 60_000, exclusive: true },
  },
  retry: {
    accepts: (v) => isPlainObject(v),
    expected: 'an object { attempts, backoff?: { initial, factor, max } }',
    valid: '`{ attempts, backoff?: { initial, factor, max } }`: attempts 0–100, factor 1–100, ms ≤ 2^53−1',
    default: 'no retry',
    meaning:
      "a run that ends `'error'` or `'timeout'` runs again for its slot, up to `attempts` times, after `initial · factor^(n−1)` ms (at most `max`, ±10%; defaults 1000, 2, 60000) ([failures](docs/failures.md))",
    example: { every: 60_000, retry: { attempts: 2, backoff: { initial: 500, factor: 3, max: 10_000 } } },
  },
  delivery: {
    ...oneOf('atMostOnce', 'atLeastOnce'),
    valid: "`'atMostOnce'`, `'atLeastOnce'`",
    default: "`'atMostOnce'`",
    meaning:
      'exclusive jobs: `atLeastOnce` runs a slot whose run did not end by itself (its holder died, shut down or lost its lease) again on the next holder ([failures](docs/failures.md))',
    example: { every: 60_000, exclusive: true, delivery: 'atLeastOnce' },
  },
  checkIn: {
    ...CHECK_IN_RULE,
    valid: '`{ url }` (http(s), no query), `{ send: (event) => … }`, `false`',
    default: "the module's `checkIns`",
    meaning:
      "where each run's check-ins go: `POST <url>/start`, `<url>`, `<url>/fail`, or `send(event)`; `false`: none ([alerts](docs/alerts.md))",
    example: { every: 60_000, checkIn: { url: 'https://monitor.example/ping/nightly' } },
  },
  catchUp: {
    ...POLICY_RULES.catchUp,
    valid: "`{ window?, runs? }`: window integer ms ≥ 1; runs `'latest'`, `'all'`, `'none'`",
    default: "`'latest'`, window one interval",
    meaning:
      "which slots that passed unseen still run: the latest once, each one oldest first (at most 1,000), or none; only those at most `window` old ('none': 1 s) ([policies](docs/policies.md))",
    example: { every: 60_000, catchUp: { window: 3_600_000, runs: 'all' } },
  },
  startAt: {
    ...POLICY_RULES.startAt,
    valid: "a `Date`, or ISO 8601 text with its offset (`'2027-01-01T00:00:00Z'`)",
    default: 'none',
    meaning: 'no run before it',
    example: { every: 60_000, startAt: '2027-01-01T00:00:00Z' },
  },
  endAt: {
    ...POLICY_RULES.endAt,
    valid: 'as `startAt`, not before it',
    default: 'none',
    meaning: "no run after it; once it has passed, the job is `'completed'`",
    example: { every: 60_000, endAt: '2099-12-31T00:00:00Z' },
  },
  maxRuns: {
    ...POLICY_RULES.maxRuns,
    valid: 'integer ≥ 1',
    default: 'none',
    meaning: "after this many slots have run (for the fleet, for an exclusive job), the job is `'completed'`",
    example: { every: 60_000, maxRuns: 500 },
  },
  at: {
    ...POLICY_RULES.at,
    valid: 'as `startAt`',
    default: 'none',
    meaning:
      "one slot at that instant, then the job is `'completed'`; instead of `every` and `cron`, without `catchUp`",
    example: { at: '2099-01-01T09:00:00+01:00' },
  },
  exclude: {
    ...POLICY_RULES.exclude,
    valid:
      "up to 1,000 days `'YYYY-MM-DD'` and ranges `{ from, to }` (both included), or `(slot: Date) => boolean`",
    default: 'none',
    meaning:
      "slots it leaves out are not ticks: not run, not missed, skipped by `nextTickAt`; days are read in the job's `timezone` (UTC without one)",
    example: { cron: '0 3 * * *', exclude: ['2026-12-25', { from: '2026-12-31', to: '2027-01-02' }] },
  },
  pauseAfterFailures: {
    ...POLICY_RULES.pauseAfterFailures,
    valid: 'integer ≥ 1',
    default: 'none',
    meaning:
      "pauses the job (for the fleet, for an exclusive job) once that many slots in a row failed after their retries, `by: 'nestjs-periodic'`",
    example: { every: 60_000, pauseAfterFailures: 5 },
  },
} satisfies Record<keyof PeriodicOptions, JobOption>;

/** The backoff of a retry when the job does not set it. */
const BACKOFF = { initial: 1000, factor: 2, max: 60_000 };

/** No retry: the default. */
const RETRY_NONE: ResolvedRetry = { attempts: 0, backoff: BACKOFF };

const isPlainObject = (value: unknown) =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/** The most retries of a slot: each is a run, and a fleet's record of the slot's attempts. */
const RETRY_ATTEMPTS_MAX = 100;
/** The largest growth of the backoff between two retries; `max` bounds the delay itself. */
const BACKOFF_FACTOR_MAX = 100;

const RETRY_RULES = {
  attempts: {
    accepts: (v) => Number.isSafeInteger(v) && (v as number) >= 0 && (v as number) <= RETRY_ATTEMPTS_MAX,
    expected: `an integer from 0 to ${RETRY_ATTEMPTS_MAX} (how many times a failed run runs again)`,
  },
  backoff: {
    accepts: isPlainObject,
    expected: 'an object such as { initial: 1000, factor: 2, max: 60_000 }',
  },
} satisfies Record<keyof PeriodicRetry, OptionRule>;

const BACKOFF_RULES = {
  initial: { accepts: (v) => isMilliseconds(v, 1), expected: 'an integer number of milliseconds ≥ 1' },
  factor: {
    accepts: (v) => typeof v === 'number' && v >= 1 && v <= BACKOFF_FACTOR_MAX,
    expected: `a number from 1 to ${BACKOFF_FACTOR_MAX}`,
  },
  max: { accepts: (v) => isMilliseconds(v, 1), expected: 'an integer number of milliseconds ≥ 1' },
} satisfies Record<keyof NonNullable<PeriodicRetry['backoff']>, OptionRule>;

/**
 * A job's `retry`, each of its fields checked (the option itself was checked to be an object), with its
 * defaults; `onOverlap` and its interval (`every`, or its calendar) as the job has them.
 */
function resolveRetry(
  where: string,
  retry: PeriodicRetry | undefined,
  onOverlap: OverlapPolicy,
  interval: { every: number } | { calendar: Slots },
): ResolvedRetry {
  if (retry === undefined) return RETRY_NONE;
  const example = '{ attempts: 3, backoff: { initial: 1000, factor: 2, max: 60_000 } }';
  const checked = checkedOptions(`${where}: "retry"`, retry, RETRY_RULES, example);
  const { attempts = 0, backoff } = checked as unknown as PeriodicRetry;
  const given = checkedOptions(
    `${where}: "retry.backoff"`,
    backoff ?? {},
    BACKOFF_RULES,
    '{ initial: 1000, factor: 2, max: 60_000 }',
  );
  const resolved = { ...BACKOFF, ...(given as Partial<typeof BACKOFF>) };
  if (resolved.max < resolved.initial) {
    throw new PeriodicConfigError(
      given.max === undefined
        ? `${where}: "retry.backoff.initial" must be at most "max" (${resolved.max}ms, its default), got ` +
            `${resolved.initial}; give a smaller initial, or a max at least as large`
        : `${where}: "retry.backoff.max" must be at least "initial" (${resolved.initial}ms` +
            `${given.initial === undefined ? ', its default' : ''}), got ${resolved.max}; give a larger max, or a ` +
            'smaller initial',
    );
  }
  // The next slot cancels a retry that waits (stopPrevious): one that waits the whole interval never runs.
  if (onOverlap === 'stopPrevious' && attempts > 0) {
    const [gap, named] =
      'every' in interval
        ? [interval.every, `"every" (${interval.every}ms)`]
        : [
            interval.calendar.shortestGap(),
            `the shortest gap between the slots of "cron" (${interval.calendar.shortestGap()}ms)`,
          ];
    if (resolved.initial >= gap) {
      throw new PeriodicConfigError(
        `${where}: "retry" with onOverlap 'stopPrevious' waits ${resolved.initial}ms (backoff.initial) before its ` +
          `first retry, not less than ${named}: each slot would cancel the retry of the one before, ` +
          "and no retry would ever run; give a backoff.initial shorter than that, or onOverlap 'ignore' or 'run'",
      );
    }
  }
  return { attempts, backoff: resolved };
}

/** The options of `@Periodic()`, `PeriodicRegistry.add()` and the module's `jobs`, in the table's order. */
export const JOB_OPTION_NAMES = Object.keys(JOB_OPTIONS) as (keyof PeriodicOptions)[];

/**
 * `options` as an object of one shape for every job: each option of the table in its order, undefined where it
 * is not given, then any other key as it is (which the engine's check refuses). Reading the options of thousands
 * of jobs is fast from objects of one shape, and slow from objects of many: a spread (`{ ...options, name }`)
 * makes a shape of its own for each object, which every read of an option then misses (10 times as slow).
 */
export function jobOptionsOf(
  options: Readonly<Record<string, unknown>>,
  /** Values that replace the options' own (the job's name, its function). */
  set: Readonly<Record<string, unknown>> = {},
): Record<string, unknown> {
  const built: Record<string, unknown> = {};
  for (const option of JOB_OPTION_NAMES) built[option] = options[option];
  for (const key of Object.keys(options)) {
    // As a key of its own, `__proto__` included (JSON.parse makes such a key).
    if (!Object.hasOwn(built, key)) {
      Object.defineProperty(built, key, {
        value: options[key],
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
  }
  return Object.assign(built, set);
}

/** The rules of the options a scheduler is built from: a job's, its function, and the coordinator. */
export const RULES = {
  ...JOB_OPTIONS,
  run: { accepts: (v) => typeof v === 'function', expected: 'a function (the job)', required: true },
  coordinator: {
    accepts: (v) => capable(v, 'leases') && isMilliseconds((v as Partial<PeriodicCoordinator>).leaseMs, 1),
    expected:
      'a PeriodicCoordinator (leaseMs, acquire, renew, release, readSchedule, writeSchedule), such as ' +
      'new RedisCoordinator({ client: new Redis(process.env.REDIS_URL) })',
  },
} satisfies Record<keyof PeriodicSchedulerOptions, OptionRule>;

/**
 * The error for an exclusive job without a coordinator; `how` says where to give one: in the options, or, in a
 * Nest application, to the module.
 */
export function noCoordinator(where: string, how: string): PeriodicConfigError {
  return new PeriodicConfigError(
    `${where}: "exclusive" needs a coordinator to share the job's lease between replicas, and none was given: ` +
      `pass ${how}, with a RedisCoordinator, a PostgresCoordinator or an InMemoryCoordinator, or remove "exclusive"`,
  );
}

/**
 * Validates a job's options and fills in the defaults; a cron job gets its {@link Calendar}. `where` names the
 * job in messages, e.g. `@Periodic() on Cleanup.purge`. Throws a {@link PeriodicConfigError} at the first
 * invalid or unknown option.
 */
export function resolveOptions(
  input: PeriodicSchedulerOptions,
  where: string,
): { options: ResolvedPeriodicOptions; calendar: Slots | undefined } {
  const given = checkedOptions(where, input, RULES, '{ every: 60_000 }') as Partial<PeriodicSchedulerOptions>;
  const { every, cron, jitter = 0 } = given;
  if (given.name === '.' || given.name === '..') {
    throw new PeriodicConfigError(
      `${where}: "name" must not be '.' or '..', got '${given.name}': a URL cannot name such a job (the ` +
        'dashboard, an HTTP endpoint), as browsers resolve those segments away; give a name with other characters',
    );
  }
  let calendar: Slots | undefined;
  const { at } = given;
  if (at !== undefined) {
    for (const key of ['every', 'cron', 'catchUp', 'initialDelay', 'delayMode'] as const) {
      if (given[key] !== undefined) {
        throw new PeriodicConfigError(
          `${where}: "at" runs one slot and takes no "${key}", got ${key}: ${describeValue(given[key])}; ` +
            `remove "${key}", or give "every" or "cron" instead of "at"`,
        );
      }
    }
    if (given.timezone !== undefined && !isTimeZone(given.timezone)) {
      throw new PeriodicConfigError(
        `${where}: "timezone" must be an IANA time zone name such as 'Europe/Berlin' or 'UTC', got ` +
          `${describeValue(given.timezone)}`,
      );
    }
    calendar = new OneSlot(instantOf(at));
  } else if (cron === undefined) {
    if (every === undefined) {
      throw new PeriodicConfigError(
        `${where}: "every" must be an integer number of milliseconds ≥ 1, got undefined; ` +
          'or give "cron", a pattern such as \'0 3 * * *\', or "at", an instant for one run',
      );
    }
    if (given.timezone !== undefined) {
      throw new PeriodicConfigError(
        `${where}: "timezone" applies to cron and "at" jobs only, got ${describeValue(given.timezone)} with ` +
          '"every"; remove it, or give "cron" instead of "every"',
      );
    }
    if (jitter >= every) throw jitterTooLong(where, jitter, `"every" (${every}ms)`);
  } else {
    if (every !== undefined) {
      throw new PeriodicConfigError(
        `${where}: give either "every" or "cron", not both; got every: ${describeValue(every)} and ` +
          `cron: ${describeValue(cron)}`,
      );
    }
    for (const key of ['initialDelay', 'delayMode'] as const) {
      if (given[key] !== undefined) {
        throw new PeriodicConfigError(
          `${where}: "${key}" applies to "every" jobs only, got ${describeValue(given[key])} with "cron": a ` +
            "cron job ticks at its pattern's slots; remove it",
        );
      }
    }
    const zoned = Calendar.of(where, cron, given.timezone ?? processTimeZone());
    calendar = zoned;
    const gap = jitter === 0 ? Infinity : zoned.shortestGap();
    if (jitter >= gap) {
      zoned.release();
      throw jitterTooLong(where, jitter, `the shortest gap between the slots of "cron" (${gap}ms)`);
    }
  }
  let retry: ResolvedRetry;
  let policy: SlotPolicy | undefined;
  const timezone = calendar instanceof Calendar ? calendar.timezone : given.timezone;
  try {
    const interval = calendar === undefined ? { every: every! } : { calendar };
    retry = resolveRetry(where, given.retry, given.onOverlap ?? 'run', interval);
    policy = SlotPolicy.of(where, given, timezone);
  } catch (error) {
    calendar?.release();
    throw error;
  }
  const name = given.name!;
  const initialDelay = given.initialDelay ?? every ?? 0;
  const delayMode = given.delayMode ?? 'regular';
  const onOverlap = given.onOverlap ?? 'run';
  const timeout = given.timeout ?? Infinity;
  const jobShutdown = given.jobShutdown ?? 5000;
  const mode = given.mode ?? 'auto';
  const exclusive = given.exclusive ?? false;
  const delivery = given.delivery ?? 'atMostOnce';
  // A cron job's pattern and time zone are in the literal: a key added to an object after it is made goes to an
  // array of its own (40 bytes a job). The calendar's own text, which the jobs of one pattern share.
  const options: Writable<ResolvedPeriodicOptions> =
    calendar instanceof Calendar
      ? {
          name,
          every: 0,
          jitter,
          initialDelay,
          delayMode,
          onOverlap,
          timeout,
          jobShutdown,
          mode,
          exclusive,
          retry,
          delivery,
          cron: calendar.pattern,
          timezone,
        }
      : {
          name,
          every: every ?? 0,
          jitter,
          initialDelay,
          delayMode,
          onOverlap,
          timeout,
          jobShutdown,
          mode,
          exclusive,
          retry,
          delivery,
        };
  const { when, checkIn, catchUp, startAt, endAt, maxRuns, exclude, pauseAfterFailures } = given;
  const optional = {
    timezone: calendar instanceof Calendar ? undefined : timezone,
    when,
    checkIn,
    catchUp,
    startAt,
    endAt,
    maxRuns,
    at,
    exclude,
    pauseAfterFailures,
    policy,
  };
  for (const key of Object.keys(optional) as (keyof typeof optional)[]) {
    if (optional[key] !== undefined) (options as Record<string, unknown>)[key] = optional[key];
  }
  if (options.delivery === 'atLeastOnce' && !options.exclusive) {
    calendar?.release();
    throw new PeriodicConfigError(
      `${where}: "delivery" 'atLeastOnce' applies to exclusive jobs only: a slot is run again by the next holder ` +
        "of the job's lease; add exclusive: true, or remove delivery (a job that is not exclusive runs in every " +
        'replica, each slot in each)',
    );
  }
  return { options, calendar };
}

function jitterTooLong(where: string, jitter: number, interval: string): PeriodicConfigError {
  return new PeriodicConfigError(
    `${where}: "jitter" must be shorter than ${interval}, got ${jitter}: a run would start after the next ` +
      'slot; give a smaller jitter',
  );
}

/** Throws a {@link PeriodicConfigError} when `value` is not one that option `key` of a job accepts. */
export function checkOption(where: string, key: keyof typeof JOB_OPTIONS, value: unknown): void {
  const rule: OptionRule = JOB_OPTIONS[key];
  if (!rule.accepts(value)) throw invalid(where, key, value, rule);
}
