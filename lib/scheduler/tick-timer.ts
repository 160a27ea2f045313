import type { Calendar } from './calendar.js';
import {
  DeadlineTimer,
  now,
  type SystemTimeListener,
  underFakeTimers,
  unwatchSystemTime,
  watchSystemTime,
} from './clock.js';
import type { JobEvents } from './events.js';
import type { FleetSlots } from './fleet.js';
import type { ResolvedPeriodicOptions } from './options.js';

/**
 * A cron job waiting for a slot looks at the wall clock at least this often (ms), so that it notices a clock set
 * forward or a machine that slept: the monotonic clock its timer runs on does neither. Under a test's fake timers
 * its timer aims at the slot itself, as the test's helpers expect of one timer per job, and a clock the test
 * sets is noticed when it is set.
 */
const WALL_CHECK = 10_000;
/** How many slots that passed unseen a cron job counts one by one before it looks the latest one up. */
const CATCH_UP = 1000;

/** What a job's tick timer tells its scheduler. */
export interface TickTarget {
  /** The tick of `slot` (wall-clock ms) is due; `scheduledAt` is its deadline on the `now()` timeline. */
  tickDue(scheduledAt: number, slot: number): void;
  /** `count` slots passed unseen and are dropped. False when the job stopped meanwhile: nothing is armed again. */
  slotsDropped(count: number): boolean;
}

/**
 * When a job's ticks come. In auto mode: on a grid of `every` ms from the job's start (regular), `every` ms after
 * the end of each run (shifted: armed by the scheduler), or at the slots of a calendar; in manual mode it arms
 * nothing and only reports the next tick. Each tick has a slot, its wall-clock time, which names it to the fleet,
 * and a deadline on the monotonic clock, which the timer aims at.
 */
export class TickTimer implements SystemTimeListener {
  /** Auto mode: the deadline the timer aims at, on the `now()` timeline. */
  deadline = 0;
  /** Auto mode: the same deadline on the wall clock (`Date.now()`). */
  slot = 0;
  private timer: DeadlineTimer | undefined;

  constructor(
    private readonly options: ResolvedPeriodicOptions,
    private readonly calendar: Calendar | undefined,
    private readonly events: JobEvents,
    private readonly target: TickTarget,
  ) {}

  /** Whether a tick is armed: its deadline has not come yet. */
  get armed(): boolean {
    return this.timer?.armed === true;
  }

  /** The first tick: `initialDelay` from now, or the calendar's next slot. */
  start(): void {
    if (this.calendar === undefined) this.armNext(this.options.initialDelay);
    else this.armSlot(this.calendar.next(Date.now()));
  }

  cancel(): void {
    this.timer?.cancel();
    if (this.calendar !== undefined) unwatchSystemTime(this);
  }

  /** The job is done with its schedule: its calendar may be forgotten. */
  release(): void {
    this.cancel();
    this.calendar?.release();
  }

  /** @internal A test set the wall clock: a cron job's timer aims at its slot again. */
  systemTimeSet(): void {
    if (this.armed) this.aim(this.slot, Date.now());
  }

  /** @internal The timer reached its deadline. */
  onDeadline(): void {
    if (this.calendar !== undefined) return this.onSlot(this.calendar);
    let scheduledAt = this.deadline;
    let { slot } = this;
    if (this.options.delayMode === 'regular') {
      // Missed slots are dropped, not replayed: run once for the latest slot that has passed.
      const { every } = this.options;
      const missed = Math.floor((now() - scheduledAt) / every);
      if (missed > 0) {
        scheduledAt += missed * every;
        slot += missed * every;
        if (!this.target.slotsDropped(missed)) return;
      }
      // The next deadline comes from this one, not from the clock, so the grid never drifts.
      this.deadline = scheduledAt + every;
      this.slot = slot + every;
      this.timer?.armAt(this.deadline);
      this.reportNext(every);
    }
    this.target.tickDue(scheduledAt, slot);
  }

  /** A cron job's timer fired: the slot has come by the wall clock, or the timer is armed again. */
  private onSlot(calendar: Calendar): void {
    const wallNow = Date.now();
    // Early by the wall clock (it was set back, or runs slower than the monotonic one): wait for the rest.
    if (wallNow < this.slot) return this.aim(this.slot, wallNow);
    // Slots that passed meanwhile (the machine slept, the clock was set forward) are dropped: one run, for
    // the latest. A clock set back cannot repeat one: each slot is sought after the last one.
    let slot = this.slot;
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
    if (missed > 0 && !this.target.slotsDropped(missed)) return;
    this.armSlot(next);
    this.target.tickDue(now() - (wallNow - slot), slot);
  }

  /** A tick asked for by hand: reports the next tick, as a timer tick would. */
  manualTick(): void {
    if (this.calendar !== undefined) this.armSlot(this.calendar.next(Date.now()));
    else if (this.options.delayMode === 'regular') this.reportNext(this.options.every);
  }

  /** The slot after `slot` on the job's grid, or its calendar's; 0 if the calendar has none. */
  slotAfter(slot: number): number {
    return this.calendar === undefined ? slot + this.options.every : (this.calendar.next(slot) ?? 0);
  }

  /** The interval at the current slot (a calendar's gap there), or undefined when no slot comes after it. */
  get interval(): number | undefined {
    if (this.calendar === undefined) return this.options.every;
    const next = this.calendar.next(this.slot);
    return next === null ? undefined : next - this.slot;
  }

  /** How long ago the current tick was due (negative while it is still to come). */
  get lateness(): number {
    return this.calendar === undefined ? now() - this.deadline : Date.now() - this.slot;
  }

  /**
   * Arms the next tick `delay` ms from now (the first tick, shifted mode); manual mode only reports it. An
   * exclusive job's `fleet` learns it: in shifted mode the fleet's next tick is due `every` after the end of its
   * last run, wherever it ran.
   */
  armNext(delay: number, fleet?: FleetSlots): void {
    if (this.options.mode === 'auto') {
      this.deadline = now() + delay;
      this.slot = Date.now() + delay;
      (this.timer ??= new DeadlineTimer(this)).armAt(this.deadline);
      fleet?.ranUntil(this.slot);
    }
    this.reportNext(delay);
  }

  /** Auto mode: the next tick is the fleet's, at `slot` (from `wallNow`); one that has passed is ticked at once. */
  continueAt(slot: number, wallNow: number): void {
    this.aim(slot, wallNow);
    // A slot that has passed reports its own next tick when it is ticked.
    if (slot > wallNow) this.reportNext(slot - wallNow, this.calendar === undefined ? undefined : slot);
  }

  /** A cron job's next slot: armed in auto mode, reported with `nextTick` in both modes. */
  private armSlot(slot: number | null): void {
    // A pattern without a next slot (croner looks up to the year 3000) ticks no more.
    if (slot === null) return;
    const wallNow = Date.now();
    if (this.options.mode === 'auto') this.aim(slot, wallNow);
    this.reportNext(slot - wallNow, slot);
  }

  /**
   * Auto mode: aims the timer at `slot` (wall-clock ms) from `wallNow`. A cron job's timer looks at the wall
   * clock again at least every {@link WALL_CHECK} ms.
   */
  private aim(slot: number, wallNow: number): void {
    this.slot = slot;
    this.deadline = now() + (slot - wallNow);
    let check = Infinity;
    if (this.calendar !== undefined) {
      if (underFakeTimers()) watchSystemTime(this);
      else check = now() + WALL_CHECK;
    }
    (this.timer ??= new DeadlineTimer(this)).armAt(Math.min(this.deadline, check));
  }

  /** `in`: the nominal delay; `at`: a cron job's next slot. */
  private reportNext(delay: number, at?: number): void {
    if (!this.events.wants('nextTick')) return;
    const { name } = this.options;
    this.events.emit(
      at === undefined ? { type: 'nextTick', name, in: delay } : { type: 'nextTick', name, in: delay, at },
    );
  }
}
