import { inspect, types } from 'node:util';

/** Why the scheduler aborted a run's signal: the `reason` of its {@link PeriodicAbortError}. */
export type AbortReason = 'timeout' | 'stopPrevious' | 'shutdown' | 'leaseLost';

/** A job's options or a call's arguments are invalid; the message names the job, the option, the value and the fix. */
export class PeriodicConfigError extends Error {
  override readonly name = 'PeriodicConfigError';
}

/** The `signal.reason` of a run the scheduler stopped; `reason` says why. */
export class PeriodicAbortError extends Error {
  override readonly name = 'PeriodicAbortError';

  constructor(
    /** Why the run was stopped. */
    readonly reason: AbortReason,
    message: string,
  ) {
    super(message);
  }
}

/** No job has the name asked for; the message lists the names there are. */
export class PeriodicNotFoundError extends Error {
  override readonly name = 'PeriodicNotFoundError';
}

/**
 * The coordinator's store did not answer, or refused, a call the caller waits for (`pause`, `resume`, `history`,
 * `audit`): nothing of it may be known to have happened. The dashboard answers it with 503 `storeUnreachable`.
 */
export class PeriodicStoreError extends Error {
  override readonly name = 'PeriodicStoreError';
}

/**
 * A stored schedule was changed since the version the caller read (`ifVersion`), or was removed: nothing was
 * written. `currentVersion` is the version it has now, null when it does not exist.
 */
export class PeriodicConflictError extends Error {
  override readonly name = 'PeriodicConflictError';

  constructor(
    message: string,
    /** The schedule's version in the store now; null when it does not exist. */
    readonly currentVersion: number | null,
  ) {
    super(message);
  }
}

/**
 * A read of the coordinator's store that a caller waits for (`history()`, `audit()` of job `name`): one the store
 * did not answer rejects with a {@link PeriodicStoreError} that says so.
 */
export function storeRead<T>(name: string, what: 'history' | 'audit', read: Promise<T>): Promise<T> {
  return read.catch((error: unknown) => {
    throw new PeriodicStoreError(
      `${what}() of job "${name}" failed: the coordinator's store did not answer (${messageOf(error)}). ` +
        'Try again once the store answers.',
      { cause: error },
    );
  });
}

/** `syncTick` gave up waiting for its run; the run itself goes on. */
export class PeriodicTimeoutError extends Error {
  override readonly name = 'PeriodicTimeoutError';
}

// C0 and C1 control characters, and the line and paragraph separators that some log viewers break lines at.
// eslint-disable-next-line no-control-regex -- finding control characters is the point
const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
const EACH_UNPRINTABLE = new RegExp(UNPRINTABLE, 'g');
const ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * `text` as one line of a log: CR, LF, tab and every other control character written as an escape (`\n`,
 * `\u001b`), so that a name, a note or an error message written by anyone cannot start a line of its own.
 */
export function oneLine(text: string): string {
  if (!UNPRINTABLE.test(text)) return text;
  return text.replace(
    EACH_UNPRINTABLE,
    (char) => ESCAPES[char] ?? `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/** A value as an error message shows it: strings quoted, functions and objects in short. */
export function describeValue(value: unknown): string {
  // A long string is cut, its length said: a message echoes what was given, not a whole document. JSON escapes
  // the control characters up to U+001F; those from U+007F to U+009F are escaped too, as a log line shows them.
  if (typeof value === 'string') {
    const quoted =
      value.length > 200
        ? `${JSON.stringify(value.slice(0, 160))}... (${value.length} characters)`
        : JSON.stringify(value);
    return quoted.replace(
      /[\u007f-\u009f]/g,
      (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
  }
  if (typeof value === 'function') return 'a function';
  const text = inspect(value, { depth: 1, breakLength: Infinity });
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

/**
 * Whether a thrown value is an error: an `Error` of this realm, or a native one of another (Node's own errors
 * are of another realm inside Jest's test context, where `instanceof Error` is false for them).
 */
export function isError(value: unknown): value is Error {
  return value instanceof Error || types.isNativeError(value);
}

/** What a thrown value says, set inside a sentence: an error's message without its final period, else the value. */
export function messageOf(error: unknown): string {
  return isError(error) ? error.message.replace(/\.+$/, '') : describeValue(error);
}
