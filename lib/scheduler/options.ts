import { describeValue, messageOf, PeriodicConfigError } from './errors.js';
import { Calendar, processTimeZone } from './calendar.js';
import type { PeriodicCoordinator } from './coordinator.js';
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
export interface PeriodicOptions<Host extends object = object> {
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

/** A job's options after validation, with every default filled in. */
export interface ResolvedPeriodicOptions {
  readonly name: string;
  /** 0 for a cron job. */
  readonly every: number;
  /** Cron jobs only, as `timezone` too (resolved to the process's zone when not given). */
  readonly cron: string | undefined;
  readonly timezone: string | undefined;
  readonly jitter: number;
  readonly initialDelay: number;
  readonly delayMode: DelayMode;
  readonly when: (() => boolean | Promise<boolean>) | undefined;
  readonly onOverlap: OverlapPolicy;
  readonly timeout: number;
  readonly jobShutdown: JobShutdown;
  readonly mode: SchedulerMode;
  readonly exclusive: boolean;
}

/**
 * What an option accepts, and how a message says it. Jobs, the module, the coordinators and the health check
 * check their options with rules of this shape, through {@link checkedOptions}.
 */
export interface OptionRule {
  accepts(value: unknown): boolean;
  /** What is accepted, as the message says it. */
  expected: string;
  /** The accepted strings, to suggest the nearest one for a typo. */
  choices?: readonly string[];
  /** Why the rule is what it is, said after the value. */
  because?: string;
  /** The option has no default: undefined is refused too. */
  required?: boolean;
}

type Rule = OptionRule;

export const isMilliseconds = (value: unknown, min: number): boolean =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= min;

function oneOf(...choices: string[]): Rule {
  const quoted = choices.map((choice) => `'${choice}'`);
  return {
    accepts: (value) => choices.includes(value as string),
    expected: `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`,
    choices,
  };
}

/** The rules of a job's options. */
export const RULES = {
  every: { accepts: (v) => isMilliseconds(v, 1), expected: 'an integer number of milliseconds ≥ 1' },
  cron: {
    accepts: (v) => typeof v === 'string' && v.trim() !== '',
    expected: "a cron pattern such as '0 3 * * *'",
  },
  timezone: {
    accepts: (v) => typeof v === 'string' && v !== '',
    expected: "an IANA time zone name such as 'Europe/Berlin' or 'UTC'",
  },
  jitter: { accepts: (v) => isMilliseconds(v, 0), expected: 'an integer number of milliseconds ≥ 0' },
  name: {
    accepts: (v) => typeof v === 'string' && v.length > 0,
    expected: 'a non-empty string',
    required: true,
  },
  initialDelay: { accepts: (v) => isMilliseconds(v, 0), expected: 'an integer number of milliseconds ≥ 0' },
  delayMode: oneOf('regular', 'shifted'),
  when: {
    accepts: (v) => typeof v === 'function',
    expected: 'a function that returns a boolean or a promise of one',
  },
  onOverlap: oneOf('run', 'ignore', 'stopPrevious'),
  timeout: {
    accepts: (v) => v === Infinity || isMilliseconds(v, 1),
    expected: 'an integer number of milliseconds ≥ 1, or Infinity',
  },
  jobShutdown: {
    accepts: (v) => v === Infinity || v === 'brutalKill' || isMilliseconds(v, 0),
    expected: "an integer number of milliseconds ≥ 0, Infinity or 'brutalKill'",
    choices: ['brutalKill'],
  },
  mode: oneOf('auto', 'manual'),
  exclusive: { accepts: (v) => typeof v === 'boolean', expected: 'true or false' },
  run: { accepts: (v) => typeof v === 'function', expected: 'a function (the job)', required: true },
  coordinator: {
    accepts: (v) => {
      const coordinator = v as Partial<PeriodicCoordinator> | null | undefined;
      return (
        typeof coordinator?.acquire === 'function' &&
        typeof coordinator.renew === 'function' &&
        typeof coordinator.release === 'function' &&
        typeof coordinator.readSchedule === 'function' &&
        typeof coordinator.writeSchedule === 'function' &&
        isMilliseconds(coordinator.leaseMs, 1)
      );
    },
    expected:
      'a PeriodicCoordinator (leaseMs, acquire, renew, release, readSchedule, writeSchedule), such as ' +
      'new RedisCoordinator({ client: new Redis(process.env.REDIS_URL) })',
  },
} satisfies Record<keyof PeriodicSchedulerOptions, Rule>;

/**
 * The options of `@Periodic()` and `PeriodicRegistry.add()`: the engine's but `run`, which is the job itself,
 * and `coordinator`, which is the module's.
 */
export const JOB_OPTION_NAMES = Object.keys(RULES).filter((name) => name !== 'run' && name !== 'coordinator');

/**
 * Validates a job's options and fills in the defaults; a cron job gets its {@link Calendar}. `where` names the
 * job in messages, e.g. `@Periodic() on Cleanup.purge`. Throws a {@link PeriodicConfigError} at the first
 * invalid or unknown option.
 */
export function resolveOptions(
  input: PeriodicSchedulerOptions,
  where: string,
): { options: ResolvedPeriodicOptions; calendar: Calendar | undefined } {
  const given = checkedOptions(where, input, RULES, '{ every: 60_000 }') as Partial<PeriodicSchedulerOptions>;
  const { every, cron, jitter = 0 } = given;
  let calendar: Calendar | undefined;
  if (cron === undefined) {
    if (every === undefined) {
      throw new PeriodicConfigError(
        `${where}: "every" must be an integer number of milliseconds ≥ 1, got undefined; ` +
          'or give "cron", a pattern such as \'0 3 * * *\'',
      );
    }
    if (given.timezone !== undefined) {
      throw new PeriodicConfigError(
        `${where}: "timezone" applies to cron jobs only, got ${describeValue(given.timezone)} without "cron"; ` +
          'remove it, or give "cron" instead of "every"',
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
    calendar = Calendar.of(where, cron, given.timezone ?? processTimeZone());
    const gap = jitter === 0 ? Infinity : calendar.shortestGap();
    if (jitter >= gap)
      throw jitterTooLong(where, jitter, `the shortest gap between the slots of "cron" (${gap}ms)`);
  }
  const options: ResolvedPeriodicOptions = {
    name: given.name!,
    every: every ?? 0,
    cron,
    timezone: calendar?.timezone,
    jitter,
    initialDelay: given.initialDelay ?? every ?? 0,
    delayMode: given.delayMode ?? 'regular',
    when: given.when,
    onOverlap: given.onOverlap ?? 'run',
    timeout: given.timeout ?? Infinity,
    jobShutdown: given.jobShutdown ?? 5000,
    mode: given.mode ?? 'auto',
    exclusive: given.exclusive ?? false,
  };
  return { options, calendar };
}

function jitterTooLong(where: string, jitter: number, interval: string): PeriodicConfigError {
  return new PeriodicConfigError(
    `${where}: "jitter" must be shorter than ${interval}, got ${jitter}: a run would start after the next ` +
      'slot; give a smaller jitter',
  );
}

/**
 * Reads the options `names` from `input` into a plain object, once each. The rule is the same wherever options
 * are given: they are read as properties, so inherited ones count, and every enumerable key, own or
 * inherited, must be one of `names` (the nearest is suggested for a typo). A getter that throws is a
 * {@link PeriodicConfigError} naming the option. `example` shows a valid object in messages.
 */
export function readOptions(
  where: string,
  input: unknown,
  names: readonly string[],
  example: string,
): Record<string, unknown> {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    throw new PeriodicConfigError(
      `${where}: the options must be an object such as ${example}, got ${describeValue(input)}`,
    );
  }
  for (const key in input) {
    if (names.includes(key)) continue;
    const hint = nearest(key, names);
    throw new PeriodicConfigError(
      `${where}: unknown option "${key}"${hint === undefined ? '.' : `; did you mean "${hint}"?`}` +
        ` The options are: ${names.join(', ')}.`,
    );
  }
  const options: Record<string, unknown> = {};
  for (const key of names) {
    let value: unknown;
    try {
      value = (input as Record<string, unknown>)[key];
    } catch (error) {
      throw new PeriodicConfigError(
        `${where}: reading option "${key}" threw: ${messageOf(error)}; ` +
          'pass plain values (a getter that throws cannot be read)',
        { cause: error },
      );
    }
    if (value !== undefined) options[key] = value;
  }
  return options;
}

/**
 * Reads options with {@link readOptions} and checks each value given (and each required one) against its rule;
 * throws a {@link PeriodicConfigError} at the first that breaks it. Returns the values given, for the caller to
 * fill in the defaults.
 */
export function checkedOptions(
  where: string,
  input: unknown,
  rules: Readonly<Record<string, OptionRule>>,
  example: string,
): Record<string, unknown> {
  const given = readOptions(where, input, Object.keys(rules), example);
  for (const [key, rule] of Object.entries(rules)) {
    const value = given[key];
    if ((value !== undefined || rule.required === true) && !rule.accepts(value)) {
      throw invalid(where, key, value, rule);
    }
  }
  return given;
}

/** Throws a {@link PeriodicConfigError} when `value` is not one that option `key` of a job accepts. */
export function checkOption(where: string, key: keyof typeof RULES, value: unknown): void {
  const rule: Rule = RULES[key];
  if (!rule.accepts(value)) throw invalid(where, key, value, rule);
}

/** The error for a value that breaks a rule, e.g. `"every" must be an integer number of milliseconds ≥ 1, got -5`. */
function invalid(where: string, key: string, value: unknown, rule: Rule): PeriodicConfigError {
  let got = describeValue(value);
  if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    got += ' (beyond 2^53−1, the largest exact integer)';
  }
  const hint = typeof value === 'string' && rule.choices ? nearest(value, rule.choices) : undefined;
  if (hint !== undefined) got += `; did you mean '${hint}'?`;
  if (rule.because !== undefined) got += `; ${rule.because}`;
  return new PeriodicConfigError(`${where}: "${key}" must be ${rule.expected}, got ${got}`);
}

/** The candidate a typo most likely meant: same letters ignoring case and `_`/`-`, or at most two edits away. */
export function nearest(word: string, candidates: readonly string[]): string | undefined {
  const fold = (text: string) => text.toLowerCase().replace(/[-_]/g, '');
  const exact = candidates.find((candidate) => fold(candidate) === fold(word));
  if (exact !== undefined) return exact;
  let best: string | undefined;
  let bestDistance = 3;
  for (const candidate of candidates) {
    const distance = editDistance(fold(word), fold(candidate));
    if (distance < bestDistance) [best, bestDistance] = [candidate, distance];
  }
  return best;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(
        previous[j] + 1,
        current[j - 1] + 1,
        previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
    }
    previous = current;
  }
  return previous[b.length];
}
