// How options are read and checked, for a job, the module, the coordinators and the health check alike: read as
// properties, once each; every key one the reader knows; every value checked against its rule, with a message that
// names the option, the value and what is accepted, and suggests the nearest for a typo.
import { describeValue, messageOf, PeriodicConfigError } from './errors.js';

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
  /** What is wrong with a value it refuses, when the rule can say more than `expected`. */
  problem?(value: unknown): string | undefined;
}

/** The most characters (code points) in a job's or a replica's name. */
export const NAME_MAX = 200;

/** A control character (C0, DEL, C1), which no name may have. */
// eslint-disable-next-line no-control-regex -- finding control characters is the point
export const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const LONE_SURROGATE = /\p{Cs}/u;

/**
 * What is wrong with a non-empty string as the name of a job or a replica, or undefined when it is one: 1 to
 * {@link NAME_MAX} characters of well-formed Unicode, no control character, not only white space. Names go into
 * store keys, URLs and log lines; every other character works there.
 */
export function nameProblem(value: unknown): string | undefined {
  // Not a string, or empty: the rule itself says enough.
  if (typeof value !== 'string' || value === '') return undefined;
  if (value.length > NAME_MAX) {
    const characters = [...value].length;
    if (characters > NAME_MAX) return `it has ${characters} characters; give a shorter name`;
  }
  const control = CONTROL.exec(value);
  if (control !== null) {
    const code = control[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
    return `it has the control character U+${code} at index ${control.index}; remove it`;
  }
  const surrogate = LONE_SURROGATE.exec(value);
  if (surrogate !== null) {
    return `it has a lone surrogate at index ${surrogate.index}, which is not Unicode text; fix how it was decoded`;
  }
  if (value.trim() === '') return 'it is only white space; give a name with other characters';
  return undefined;
}

/** The rule of a job's or a replica's name, for the option tables. */
export const NAME_RULE = {
  accepts: (value: unknown) => typeof value === 'string' && value !== '' && nameProblem(value) === undefined,
  expected: `1 to ${NAME_MAX} characters of well-formed Unicode, with no control character and not only white space`,
  problem: nameProblem,
} satisfies OptionRule;

/** An integer number of milliseconds, at least `min`. */
export const isMilliseconds = (value: unknown, min: number): boolean =>
  typeof value === 'number' && Number.isSafeInteger(value) && value >= min;

/** A rule that accepts one of `choices`, and suggests the nearest for a typo. */
export function oneOf(...choices: string[]): OptionRule {
  const quoted = choices.map((choice) => `'${choice}'`);
  return {
    accepts: (value) => choices.includes(value as string),
    expected: `${quoted.slice(0, -1).join(', ')} or ${quoted[quoted.length - 1]}`,
    choices,
  };
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
  const known = namesOf(names);
  let keys: string[];
  try {
    keys = [];
    for (const key in input) keys.push(key);
  } catch (error) {
    throw new PeriodicConfigError(
      `${where}: reading the options' names threw: ${messageOf(error)}; pass a plain object`,
      { cause: error },
    );
  }
  for (const key of keys) {
    if (known.has(key)) continue;
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
  const names = keysOf(rules);
  const given = readOptions(where, input, names, example);
  for (const key of names) {
    const rule = rules[key];
    const value = given[key];
    if ((value !== undefined || rule.required === true) && !accepted(where, key, value, rule)) {
      throw invalid(where, key, value, rule);
    }
  }
  return given;
}

/**
 * The keys of the rule tables, and sets of the lists of option names, made once per table or list: a bootstrap
 * checks the options of thousands of jobs against the same few tables.
 */
const tableKeys = new WeakMap<object, readonly string[]>();
const nameSets = new WeakMap<readonly string[], ReadonlySet<string>>();

function keysOf(rules: object): readonly string[] {
  let keys = tableKeys.get(rules);
  if (keys === undefined) tableKeys.set(rules, (keys = Object.keys(rules)));
  return keys;
}

function namesOf(names: readonly string[]): ReadonlySet<string> {
  let set = nameSets.get(names);
  if (set === undefined) nameSets.set(names, (set = new Set(names)));
  return set;
}

/** Whether `rule` accepts `value`; reading a value that throws (a getter, a Proxy) is a {@link PeriodicConfigError}. */
function accepted(where: string, key: string, value: unknown, rule: OptionRule): boolean {
  try {
    return rule.accepts(value);
  } catch (error) {
    throw new PeriodicConfigError(
      `${where}: reading option "${key}" threw: ${messageOf(error)}; pass plain values (a getter that throws ` +
        'cannot be read)',
      { cause: error },
    );
  }
}

/** The error for a value that breaks a rule, e.g. `"every" must be an integer number of milliseconds ≥ 1, got -5`. */
export function invalid(where: string, key: string, value: unknown, rule: OptionRule): PeriodicConfigError {
  let got = describeValue(value);
  if (typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    got += ' (beyond 2^53−1, the largest exact integer)';
  }
  const hint = typeof value === 'string' && rule.choices ? nearest(value, rule.choices) : undefined;
  if (hint !== undefined) got += `; did you mean '${hint}'?`;
  const problem = rule.problem?.(value);
  if (problem !== undefined) got += `: ${problem}`;
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
