import type { PeriodicFleetSchedule } from './coordinator.js';
import type { ResolvedPeriodicOptions } from './options.js';

/**
 * The schedule of an exclusive job is the fleet's, kept in its coordinator (docs/replicas.md, "One schedule for
 * the whole fleet"). The holder claims each slot in the store before it runs it, so no slot runs twice; a replica that
 * takes the lease over continues from what the store says.
 */

/** The options that make a job's grid, as the store keeps them: a holder with other options starts a new grid. */
export function gridOf({ every, delayMode, cron, timezone }: ResolvedPeriodicOptions): string {
  return cron === undefined ? `every ${every} ${delayMode}` : `cron ${cron} ${timezone}`;
}

/**
 * The wall-clock time of the next tick of a replica that just took the lease over (`after` gives the slot that
 * follows a time on the job's own grid or calendar), or undefined when nothing
 * ran yet under any options (the replica keeps its own grid, which then becomes the fleet's). Slots that
 * passed meanwhile are the tick's to count: one run, and a `missed` event, as after a stall.
 */
export function fleetNext(
  stored: PeriodicFleetSchedule | null,
  grid: string,
  after: (slot: number) => number,
  wallNow: number,
): number | undefined {
  if (stored === null) return undefined;
  if (stored.grid === grid) {
    // A shifted-mode run whose end the store never learnt (its replica died): it ended by the takeover.
    return stored.next !== 0 ? stored.next : after(wallNow);
  }
  // The options changed (a deploy): a new grid starts from the last slot that ran anywhere.
  return stored.last !== 0 ? after(stored.last) : undefined;
}
