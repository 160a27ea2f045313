import { DeadlineTimer, now } from './clock.js';
import { PeriodicTimeoutError } from './errors.js';
import { RULES } from './options.js';
import { checkedOptions } from './rules.js';
import type { Run, RunOutcome, SyncTickResult } from './run.js';

/** How long `syncTick` waits for its run by default: under the 5 s of test runners, so a stuck run names itself. */
const SYNC_TICK_TIMEOUT = 4000;

/** The `timeout` of `syncTick(options)` of job `name`, checked. */
export function syncTickTimeout(name: string, options: unknown): number {
  const where = `syncTick() of job "${name}"`;
  const given = checkedOptions(where, options, { timeout: RULES.timeout }, '{ timeout: 10_000 }');
  return (given.timeout as number | undefined) ?? SYNC_TICK_TIMEOUT;
}

/**
 * Performs a tick through `tick` and resolves with how the run it started ended. Rejects with a
 * {@link PeriodicTimeoutError} when `timeout` ms pass first, saying what is still pending; the run goes on.
 */
export function runToEnd(
  name: string,
  timeout: number,
  tick: (waiter: Run['waiter']) => Promise<Run | undefined>,
): Promise<SyncTickResult> {
  return new Promise((resolve, reject) => {
    let run: Run | undefined;
    const timer = new DeadlineTimer({ onDeadline: () => reject(timedOut(name, timeout, run)) });
    if (timeout !== Infinity) timer.armAt(now() + timeout);
    const waiter = (outcome: RunOutcome) => {
      timer.cancel();
      resolve({ ok: true, ...outcome });
    };
    tick(waiter).then((started) => {
      run = started;
      if (started === undefined) {
        timer.cancel();
        resolve({ ok: false, error: 'jobNotStarted' });
      }
    }, reject);
  });
}

function timedOut(name: string, timeout: number, run: Run | undefined): PeriodicTimeoutError {
  const what =
    run === undefined
      ? 'its guard is still pending. Make the guard settle sooner'
      : `run #${run.jobId} is still running and goes on. Make the run settle sooner (does it honour ctx.signal?)`;
  return new PeriodicTimeoutError(
    `syncTick() of job "${name}" gave up after ${timeout}ms: ${what} or pass a larger { timeout }.`,
  );
}
