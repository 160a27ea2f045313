import { AsyncResource } from 'node:async_hooks';
import { clearTimeout as nodeClearTimeout, setTimeout as nodeSetTimeout } from 'node:timers';

/**
 * The async context every timer of the package is armed in: the one this module was loaded in, not that of
 * whoever arms a timer. A job added inside an HTTP request must not run, then and at each later tick of every
 * job, with that request's AsyncLocalStorage stores (its user, its tenant, its active span).
 */
const detached = new AsyncResource('nestjs-periodic');

/**
 * Monotonic time in milliseconds. Reads the global `performance` at each call: Jest's fake timers replace
 * `globalThis.performance`, not the object exported by `node:perf_hooks`.
 */
export function now(): number {
  return globalThis.performance.now();
}

/** The wall clock's lead over the `now()` timeline, as `wallLead()` keeps it. */
let lead = -Infinity;

/**
 * The wall clock's lead over the `now()` timeline (ms), to turn a wall-clock instant into a deadline. `Date.now()`
 * counts whole milliseconds, so a reading falls short by up to one: the largest is kept while the readings agree
 * within a millisecond (a lower one means the wall clock was set back, or slowed). The cron jobs aimed at one
 * instant then share one deadline, and the shared timer starts them in one turn, not in several a millisecond or
 * more apart. Under fake timers, whose wall clock a test sets, each reading is taken as it is.
 */
export function wallLead(): number {
  const read = Date.now() - now();
  if (read > lead || read < lead - 1 || underFakeTimers()) lead = read;
  return lead;
}

/** Whether a test's fake timers have replaced `setTimeout` (Jest's, Vitest's, @sinonjs/fake-timers'). */
export function underFakeTimers(): boolean {
  return globalThis.setTimeout !== nodeSetTimeout;
}

/** Told when a test sets the wall clock (`jest.setSystemTime`, `vi.setSystemTime`). */
export interface SystemTimeListener {
  systemTimeSet(): void;
}

/** The fake clock of @sinonjs/fake-timers, which Jest and Vitest use, as far as it is read here. */
interface FakeClock {
  setSystemTime(...args: unknown[]): unknown;
}

/** The listeners of each fake clock whose `setSystemTime` is watched. */
const watchedClocks = new WeakMap<FakeClock, Set<SystemTimeListener>>();

/**
 * Under fake timers that expose their clock (`Date.clock` of @sinonjs/fake-timers, behind Jest's and Vitest's),
 * tells `listener` each time the test sets the wall clock, until {@link unwatchSystemTime}. A fake clock moves
 * every pending timer along with the wall clock it sets, so a timer aimed at a wall-clock slot would otherwise
 * notice a clock set forward only when it fires.
 */
export function watchSystemTime(listener: SystemTimeListener): void {
  const clock = (globalThis.Date as { clock?: Partial<FakeClock> }).clock;
  if (typeof clock?.setSystemTime !== 'function') return;
  let listeners = watchedClocks.get(clock as FakeClock);
  if (listeners === undefined) {
    const set = (listeners = new Set());
    watchedClocks.set(clock as FakeClock, set);
    const setSystemTime = clock.setSystemTime;
    clock.setSystemTime = function (this: unknown, ...args: unknown[]) {
      const result = setSystemTime.apply(this, args);
      for (const listener of [...set]) listener.systemTimeSet();
      return result;
    };
  }
  listeners.add(listener);
}

/** Stops telling `listener` of the wall clock set by the test's fake clock. */
export function unwatchSystemTime(listener: SystemTimeListener): void {
  const clock = (globalThis.Date as { clock?: FakeClock }).clock;
  if (clock !== undefined) watchedClocks.get(clock)?.delete(listener);
}

/** Node's longest timer; a longer delay would fire after 1 ms. */
export const MAX_TIMER_DELAY = 2 ** 31 - 1;

/**
 * A deadline the shared timer keeps: the fields it reads and writes, and what it calls once the deadline has come.
 * A {@link DeadlineTimer} is one; a scheduler is one itself, for its ticks, so that an idle job is one object
 * fewer. Arm and cancel entries with {@link armAt} and {@link cancel}.
 */
export interface TimerEntry {
  /** On the `now()` timeline. */
  deadline: number;
  /** Orders entries of the same deadline by when they were armed, as Node orders its own timers. */
  sequence: number;
  /**
   * The shared timer's list it waits in, if it does; `null` once taken from its list as due, its call still to
   * come. Its neighbours in the list.
   */
  list: TimerList | null | undefined;
  previous: TimerEntry | undefined;
  next: TimerEntry | undefined;
  /** The deadline has come: `now()`, read as `time`, has reached it. */
  onDeadline(time: number): void;
}

/**
 * Arms `entry` for `deadline` on the `now()` timeline, replacing any pending deadline. `time` is `now()`, for a
 * caller that has just read it.
 */
export function armAt(entry: TimerEntry, deadline: number, time = now()): void {
  cancel(entry);
  entry.deadline = deadline;
  if (!underFakeTimers()) (shared ??= new SharedTimer()).add(entry, time);
  else owned.set(entry, armOwn(entry));
}

export function cancel(entry: TimerEntry): void {
  if (entry.list) shared!.remove(entry);
  // Taken as due, its call still to come; now it will not come.
  else entry.list = undefined;
  if (owned.size === 0) return;
  const own = owned.get(entry);
  if (own !== undefined) {
    globalThis.clearTimeout(own);
    owned.delete(entry);
  }
}

/** Whether a deadline is pending: armed, and its call not made yet. */
export function isArmed(entry: TimerEntry): boolean {
  return entry.list !== undefined || owned.has(entry);
}

/**
 * Under fake timers: the fake timer armed for each entry's deadline. Kept here rather than in a field of every
 * entry (8 bytes of each job), as only tests arm them.
 */
const owned = new Map<TimerEntry, ReturnType<typeof setTimeout>>();

/** What a {@link DeadlineTimer} calls: an object with a method rather than a closure, to keep jobs small. */
export interface DeadlineListener {
  /** `time`: `now()` when the deadline was found to have come. */
  onDeadline(time: number): void;
}

/**
 * Calls its listener once `now()` has reached the deadline, never before. On Node's own timers a deadline
 * timer costs no Node timer of its own: all of them share one, aimed at the earliest deadline (see
 * {@link SharedTimer}). Under a test's fake timers (any `setTimeout` that is not Node's) each deadline timer
 * has a timer of its own, so that the fakes' helpers (`getTimerCount`, `runOnlyPendingTimers`,
 * `advanceTimersToNextTimer`) see one timer per armed deadline, as they would with plain `setTimeout`.
 */
export class DeadlineTimer implements TimerEntry {
  deadline = 0;
  sequence = 0;
  list: TimerList | null | undefined;
  previous: TimerEntry | undefined;
  next: TimerEntry | undefined;

  constructor(readonly listener: DeadlineListener) {}

  /** Whether a deadline is pending: armed, and its listener not called yet. */
  get armed(): boolean {
    return isArmed(this);
  }

  /** Arms the timer for `deadline` on the `now()` timeline, replacing any pending deadline. */
  armAt(deadline: number): void {
    armAt(this, deadline);
  }

  cancel(): void {
    cancel(this);
  }

  onDeadline(time: number): void {
    this.listener.onDeadline(time);
  }
}

/** The entry's own (fake) timer for its deadline, armed in the package's async context. */
function armOwn(entry: TimerEntry): ReturnType<typeof setTimeout> {
  return detached.runInAsyncScope(globalThis.setTimeout, null, fireOwn, delayUntil(entry.deadline), entry);
}

/**
 * Its own timer fired: early (then it is armed again for the rest), or at the deadline. A module function, handed
 * the entry as the callback's argument, so that arming allocates no closure.
 */
function fireOwn(entry: TimerEntry): void {
  owned.delete(entry);
  const time = now();
  if (time < entry.deadline) owned.set(entry, armOwn(entry));
  else entry.onDeadline(time);
}

/**
 * The delay to give a Node timer for `deadline`. Node timers have whole-millisecond steps and may fire up to
 * 1 ms early, so the wait is rounded to the nearest millisecond and a timer that fires early is armed again;
 * waits past {@link MAX_TIMER_DELAY} are chunked the same way.
 */
function delayUntil(deadline: number): number {
  const wait = deadline - now();
  return wait <= 0 ? 0 : Math.min(Math.max(Math.round(wait), 1), MAX_TIMER_DELAY);
}

/**
 * The delay to give the shared Node timer for `deadline`: as {@link delayUntil}, but a long wait is cut short by
 * 0.1% and a millisecond. Linux ends the sleep of a process up to 0.1% of it late (its timer slack: 1 ms of a
 * second), so a cron job's second would start 2 ms late; the timer that fires early is armed again for the rest,
 * whose slack is some microseconds.
 */
function sleepUntil(deadline: number): number {
  const wait = deadline - now();
  return delayUntil(wait > SLACK_FROM ? deadline - wait / 1000 - 1 : deadline);
}

/** Waits longer than this (ms) are cut short by the kernel's timer slack (`sleepUntil`). */
const SLACK_FROM = 50;

/**
 * The deadline timers armed with the same wait (in whole milliseconds), in deadline order: a timer armed again
 * after the same wait goes at the end, as in Node's own list per duration.
 */
export class TimerList {
  first: TimerEntry | undefined;
  last: TimerEntry | undefined;
  /** Its place in the shared timer's heap. */
  index = 0;

  constructor(readonly wait: number) {}

  /** Puts the timer in deadline order, from the end: most timers of a list come in that order. */
  insert(timer: TimerEntry): void {
    let after = this.last;
    while (after !== undefined && before(timer, after)) after = after.previous;
    timer.list = this;
    timer.previous = after;
    timer.next = after === undefined ? this.first : after.next;
    if (timer.previous === undefined) this.first = timer;
    else timer.previous.next = timer;
    if (timer.next === undefined) this.last = timer;
    else timer.next.previous = timer;
  }

  unlink(timer: TimerEntry): void {
    if (timer.previous === undefined) this.first = timer.next;
    else timer.previous.next = timer.next;
    if (timer.next === undefined) this.last = timer.previous;
    else timer.next.previous = timer.previous;
    timer.list = timer.previous = timer.next = undefined;
  }
}

function before(a: TimerEntry, b: TimerEntry): boolean {
  return a.deadline < b.deadline || (a.deadline === b.deadline && a.sequence < b.sequence);
}

/**
 * Every deadline armed on Node's own timers, with one Node timer for the earliest: a Node timer per job
 * would cost a `Timeout` object and a timer list entry each. Timers wait in a list per wait, and the lists in
 * a binary heap by their first timer: jobs that share an interval share a list, and a tick takes its timer off
 * the front and puts it back at the end, whatever the number of jobs. A Node timer that fires before the
 * earliest deadline is simply armed again, so no deadline is ever met early.
 */
class SharedTimer {
  private readonly lists = new Map<number, TimerList>();
  /** The lists that hold a timer, the one with the earliest first. */
  private readonly heap: TimerList[] = [];
  private handle: ReturnType<typeof setTimeout> | undefined;
  /** The deadline the Node timer aims at. */
  private aim = Infinity;
  private armed = 0;
  /** While due timers are being called, the Node timer is aimed once, at the end. */
  private firing = false;
  /** The timers due at a fire, kept from one to the next (emptied after each) so that a fire allocates nothing. */
  private readonly due: (TimerEntry | undefined)[] = [];
  size = 0;

  add(timer: TimerEntry, time: number): void {
    timer.sequence = ++this.armed;
    this.size++;
    const wait = Math.round(timer.deadline - time);
    let list = this.lists.get(wait);
    if (list === undefined) this.lists.set(wait, (list = new TimerList(wait)));
    const empty = list.first === undefined;
    list.insert(timer);
    if (list.first !== timer) return;
    if (empty) {
      list.index = this.heap.length;
      this.heap.push(list);
    }
    this.up(list.index);
    if (timer.deadline < this.aim && !this.firing) this.arm();
  }

  remove(timer: TimerEntry): void {
    const list = timer.list!;
    const wasFirst = list.first === timer;
    list.unlink(timer);
    this.size--;
    if (list.first === undefined) {
      this.lists.delete(list.wait);
      const last = this.heap.pop()!;
      if (last !== list) {
        this.heap[list.index] = last;
        last.index = list.index;
        this.down(last.index);
        this.up(last.index);
      }
    } else if (wasFirst) this.down(list.index);
    // A Node timer aimed at a deadline that is gone fires early, finds nothing due and is aimed again: one
    // spare wake-up, cheaper than moving the Node timer each time, as stopping many jobs at once would.
    if (this.size === 0 && !this.firing) this.arm();
  }

  /** Aims the Node timer at the earliest deadline, or stops it when no timer is armed. */
  private arm(): void {
    if (this.handle !== undefined) nodeClearTimeout(this.handle);
    this.handle = undefined;
    this.aim = Infinity;
    const first = this.heap[0]?.first;
    if (first === undefined) return;
    this.aim = first.deadline;
    this.handle = detached.runInAsyncScope(nodeSetTimeout, null, this.fire, sleepUntil(first.deadline));
  }

  private readonly fire = (): void => {
    this.handle = undefined;
    this.aim = Infinity;
    this.firing = true;
    try {
      // Take every timer that is due before calling any: a timer armed by these calls, even for a deadline
      // already passed, waits for the next turn of the timers (as `jobShutdown: 0` relies on).
      const time = now();
      const { due } = this;
      let count = 0;
      for (let timer = this.heap[0]?.first; timer !== undefined && timer.deadline <= time;) {
        this.remove(timer);
        timer.list = null;
        due[count++] = timer;
        timer = this.heap[0]?.first;
      }
      for (let i = 0; i < count; i++) {
        const timer = due[i]!;
        due[i] = undefined;
        // An earlier callback may have cancelled this timer or armed it again.
        if (timer.list !== null) continue;
        timer.list = undefined;
        timer.onDeadline(time);
      }
    } finally {
      this.firing = false;
      this.arm();
    }
  };

  private up(index: number): void {
    const heap = this.heap;
    const list = heap[index];
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!before(list.first!, heap[parent].first!)) break;
      heap[index] = heap[parent];
      heap[index].index = index;
      index = parent;
    }
    heap[index] = list;
    list.index = index;
  }

  private down(index: number): void {
    const heap = this.heap;
    const list = heap[index];
    for (;;) {
      let child = 2 * index + 1;
      if (child >= heap.length) break;
      if (child + 1 < heap.length && before(heap[child + 1].first!, heap[child].first!)) child += 1;
      if (!before(heap[child].first!, list.first!)) break;
      heap[index] = heap[child];
      heap[index].index = index;
      index = child;
    }
    heap[index] = list;
    list.index = index;
  }
}

/** The shared timer of the process: made when the first deadline is armed on Node's own timers. */
let shared: SharedTimer | undefined;

/** How many deadline timers are armed on Node's own timers: for tests on real timers. */
export function armedDeadlines(): number {
  return shared?.size ?? 0;
}

/** A wait on the package's timers (a test's fake timers move it). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => new DeadlineTimer({ onDeadline: () => resolve() }).armAt(now() + ms));
}
