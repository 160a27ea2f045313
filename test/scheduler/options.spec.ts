import { describe, expect, it } from '@jest/globals';
import { PeriodicConfigError } from '../../lib/scheduler/errors.js';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import type { PeriodicSchedulerOptions } from '../../lib/scheduler/options.js';

const run = () => undefined;
const build = (options: Record<string, unknown>, where?: string) =>
  new PeriodicScheduler(
    { name: 'job', run, ...options } as unknown as PeriodicSchedulerOptions,
    undefined,
    where,
  );
const errorOf = (options: Record<string, unknown>, where?: string): PeriodicConfigError => {
  try {
    build(options, where);
  } catch (error) {
    expect(error).toBeInstanceOf(PeriodicConfigError);
    return error as PeriodicConfigError;
  }
  throw new Error(`options were accepted: ${JSON.stringify(options)}`);
};

describe('defaults', () => {
  it("fills in every default of the README's options table", () => {
    const { options } = build({ every: 1000 });
    expect(options).toEqual({
      name: 'job',
      every: 1000,
      cron: undefined,
      timezone: undefined,
      jitter: 0,
      initialDelay: 1000,
      delayMode: 'regular',
      when: undefined,
      onOverlap: 'run',
      timeout: Infinity,
      jobShutdown: 5000,
      mode: 'auto',
      exclusive: false,
      retry: { attempts: 0, backoff: { initial: 1000, factor: 2, max: 60_000 } },
      delivery: 'atMostOnce',
    });
  });

  it('initialDelay defaults to every, whatever every is', () => {
    expect(build({ every: 7 }).options.initialDelay).toBe(7);
  });

  it('an option given as undefined takes its default', () => {
    expect(build({ every: 5, timeout: undefined, onOverlap: undefined }).options).toMatchObject({
      timeout: Infinity,
      onOverlap: 'run',
    });
  });

  it('exposes the name on the scheduler', () => {
    expect(build({ every: 5, name: 'Cleanup.purge' }).name).toBe('Cleanup.purge');
  });
});

describe('every value the options table allows is accepted and kept', () => {
  const when = () => true;
  it.each([
    ['every', 1],
    ['every', 60_000],
    ['every', Number.MAX_SAFE_INTEGER],
    ['name', 'x'],
    ['initialDelay', 0],
    ['initialDelay', 250],
    ['initialDelay', Number.MAX_SAFE_INTEGER],
    ['delayMode', 'regular'],
    ['delayMode', 'shifted'],
    ['when', when],
    ['onOverlap', 'run'],
    ['onOverlap', 'ignore'],
    ['onOverlap', 'stopPrevious'],
    ['timeout', 1],
    ['timeout', 30_000],
    ['timeout', Infinity],
    ['jobShutdown', 0],
    ['jobShutdown', 5000],
    ['jobShutdown', Infinity],
    ['jobShutdown', 'brutalKill'],
    ['mode', 'auto'],
    ['mode', 'manual'],
    ['exclusive', false],
  ])('%s: %p', (key, value) => {
    const options = build({ every: 10, [key]: value }).options as unknown as Record<string, unknown>;
    expect(options[key]).toBe(value);
  });
});

describe('invalid values are refused with a message naming the job, the option, the value and what is accepted', () => {
  it("reads as the README's example", () => {
    expect(errorOf({ every: -5 }, '@Periodic() on Cleanup.purge').message).toBe(
      '@Periodic() on Cleanup.purge: "every" must be an integer number of milliseconds ≥ 1, got -5',
    );
  });

  it('names the job by its name when no origin is given', () => {
    expect(errorOf({ name: 'purge', every: 0 }).message).toBe(
      'job "purge": "every" must be an integer number of milliseconds ≥ 1, got 0',
    );
  });

  it.each([
    ['every', undefined, 'an integer number of milliseconds ≥ 1, got undefined'],
    ['every', 0, 'an integer number of milliseconds ≥ 1, got 0'],
    ['every', 1.5, 'an integer number of milliseconds ≥ 1, got 1.5'],
    ['every', NaN, 'an integer number of milliseconds ≥ 1, got NaN'],
    ['every', Infinity, 'an integer number of milliseconds ≥ 1, got Infinity'],
    ['every', '1000', 'an integer number of milliseconds ≥ 1, got "1000"'],
    ['every', 2 ** 53, 'an integer number of milliseconds ≥ 1, got 9007199254740992 (beyond 2^53−1'],
    ['every', 10n, 'an integer number of milliseconds ≥ 1, got 10n'],
    [
      'name',
      '',
      '1 to 200 characters of well-formed Unicode, with no control character and not only white space, got ""',
    ],
    [
      'name',
      42,
      '1 to 200 characters of well-formed Unicode, with no control character and not only white space, got 42',
    ],
    ['initialDelay', -1, 'an integer number of milliseconds ≥ 0, got -1'],
    ['initialDelay', 0.5, 'an integer number of milliseconds ≥ 0, got 0.5'],
    ['initialDelay', null, 'an integer number of milliseconds ≥ 0, got null'],
    ['delayMode', 'fixed', "'regular' or 'shifted', got \"fixed\""],
    ['delayMode', 'Shifted', "'regular' or 'shifted', got \"Shifted\"; did you mean 'shifted'?"],
    ['when', true, 'a function that returns a boolean or a promise of one, got true'],
    ['when', 'always', 'a function that returns a boolean or a promise of one, got "always"'],
    ['onOverlap', 'skip', "'run', 'ignore' or 'stopPrevious', got \"skip\""],
    [
      'onOverlap',
      'stop_previous',
      "'run', 'ignore' or 'stopPrevious', got \"stop_previous\"; did you mean 'stopPrevious'?",
    ],
    ['timeout', 0, 'an integer number of milliseconds ≥ 1, or Infinity, got 0'],
    ['timeout', -Infinity, 'an integer number of milliseconds ≥ 1, or Infinity, got -Infinity'],
    ['timeout', 'infinity', 'an integer number of milliseconds ≥ 1, or Infinity, got "infinity"'],
    ['jobShutdown', -1, "an integer number of milliseconds ≥ 0, Infinity or 'brutalKill', got -1"],
    ['jobShutdown', 2.5, "an integer number of milliseconds ≥ 0, Infinity or 'brutalKill', got 2.5"],
    [
      'jobShutdown',
      'brutal_kill',
      "an integer number of milliseconds ≥ 0, Infinity or 'brutalKill', got \"brutal_kill\"; did you mean 'brutalKill'?",
    ],
    ['mode', 'test', "'auto' or 'manual', got \"test\""],
    ['exclusive', 'yes', 'true or false, got "yes"'],
    ['exclusive', 1, 'true or false, got 1'],
    ['run', undefined, 'a function (the job), got undefined'],
    ['run', 'purge', 'a function (the job), got "purge"'],
  ])('%s: %p', (key, value, expected) => {
    const message = errorOf({ every: 10, [key]: value }).message;
    const job = key === 'name' ? 'job (unnamed)' : 'job "job"';
    expect(message).toContain(`${job}: "${key}" must be ${expected}`);
  });

  it.each(['.', '..'])('name %p: a URL cannot name the job, so it is refused', (name) => {
    expect(errorOf({ every: 10, name }).message).toMatch(
      new RegExp(
        `"name" must not be '.' or '..', got '${name.replace(/\./g, '\\.')}': a URL cannot name such a job`,
      ),
    );
    expect(() => build({ every: 10, name: '...' })).not.toThrow();
  });

  it('refuses options that are not an object', () => {
    expect(() => new PeriodicScheduler(null as unknown as PeriodicSchedulerOptions)).toThrow(
      'job (unnamed): the options must be an object such as { every: 60_000 }, got null',
    );
  });

  it('refuses an event sink that is neither a function nor an object with emit', () => {
    expect(() => new PeriodicScheduler({ name: 'job', every: 1, run }, 42 as never)).toThrow(
      'job "job": the event sink must be a function or an object with emit(event), got 42',
    );
  });
});

describe('unknown keys are refused', () => {
  it('names the key, suggests the option meant and lists the options', () => {
    expect(errorOf({ every: 10, onOverlapp: 'ignore' }).message).toBe(
      'job "job": unknown option "onOverlapp"; did you mean "onOverlap"? The options are: every, cron, ' +
        'timezone, jitter, name, initialDelay, delayMode, when, onOverlap, timeout, jobShutdown, mode, exclusive, ' +
        'retry, delivery, checkIn, catchUp, startAt, endAt, maxRuns, at, exclude, pauseAfterFailures, run, coordinator.',
    );
  });

  it.each([
    ['on_overlap', 'onOverlap'],
    ['initial_delay', 'initialDelay'],
    ['job_shutdown', 'jobShutdown'],
    ['intervall', undefined],
    ['telemetry_id', undefined],
  ])('%s', (key, hint) => {
    const message = errorOf({ every: 10, [key]: 1 }).message;
    expect(message).toContain(`unknown option "${key}"`);
    if (hint === undefined) expect(message).not.toContain('did you mean');
    else expect(message).toContain(`did you mean "${hint}"?`);
  });
});

describe('exclusive', () => {
  it('exclusive: true without a coordinator is refused, naming the fix', () => {
    expect(errorOf({ every: 10, exclusive: true }, '@Periodic() on Report.send').message).toBe(
      '@Periodic() on Report.send: "exclusive" needs a coordinator to share the job\'s lease between replicas, ' +
        'and none was given: pass { coordinator } in the options, with a RedisCoordinator, a ' +
        'PostgresCoordinator or an InMemoryCoordinator, or remove "exclusive"',
    );
  });
});
