/**
 * Monotonic time in milliseconds. Reads the global `performance` at each call: Jest's fake timers replace
 * `globalThis.performance`, not the object exported by `node:perf_hooks`.
 */
export function now(): number {
  return globalThis.performance.now();
}

/** Node's longest timer; a longer delay would fire after 1 ms. */
export const MAX_TIMER_DELAY = 2 ** 31 - 1;

/** What a {@link DeadlineTimer} calls: an object with a method rather than a closure, to keep jobs small. */
export interface DeadlineListener {
  onDeadline(): void;
}

/**
 * Calls its listener once `now()` has reached the deadline, never before. A deadline timer costs no Node
 * timer of its own: all of them share one, aimed at the earliest deadline (see {@link SharedTimer}).
 */
export class DeadlineTimer {
  /** On the `now()` timeline. */
  deadline = 0;
  /** Orders timers of the same deadline by when they were armed, as Node orders its own timers. */
  sequence = 0;
  /** Its place in its shared timer's heap; -1 when not armed, -2 while due and about to be called. */
  index = -1;
  private shared: SharedTimer | undefined;

  constructor(readonly listener: DeadlineListener) {}

  /** Arms the timer for `deadline` on the `now()` timeline, replacing any pending deadline. */
  armAt(deadline: number): void {
    this.cancel();
    this.deadline = deadline;
    this.shared = sharedTimerOf(globalThis.setTimeout, globalThis.clearTimeout);
    this.shared.add(this);
  }

  cancel(): void {
    if (this.index >= 0) this.shared!.remove(this);
    // -2: taken from the heap as due, its call still to come; now it will not come.
    this.index = -1;
  }
}

/**
 * The deadline timers armed through one `setTimeout` (the real one, or a test's fake one) in a binary heap,
 * with one Node timer for the earliest. Node timers have whole-millisecond steps and may fire up to 1 ms
 * early; the wait is rounded to the nearest millisecond, and a timer that fires before the earliest deadline
 * is simply armed again, so no deadline is ever met early. Waits past {@link MAX_TIMER_DELAY} are chunked.
 */
class SharedTimer {
  private readonly heap: DeadlineTimer[] = [];
  private handle: ReturnType<typeof setTimeout> | undefined;
  /** The deadline the Node timer aims at. */
  private aim = Infinity;
  private armed = 0;
  /** While due timers are being called, the Node timer is aimed once, at the end. */
  private firing = false;

  constructor(
    private readonly setTimer: typeof setTimeout,
    private readonly clearTimer: typeof clearTimeout,
  ) {}

  get size(): number {
    return this.heap.length;
  }

  add(timer: DeadlineTimer): void {
    timer.sequence = ++this.armed;
    timer.index = this.heap.length;
    this.heap.push(timer);
    this.up(timer.index);
    if (timer.index === 0 && timer.deadline < this.aim && !this.firing) this.arm();
  }

  remove(timer: DeadlineTimer): void {
    const index = timer.index;
    const last = this.heap.pop()!;
    timer.index = -1;
    if (last !== timer) {
      this.heap[index] = last;
      last.index = index;
      this.down(index);
      this.up(last.index);
    }
    // A Node timer aimed at a deadline that is gone fires early, finds nothing due and is aimed again: one
    // spare wake-up, cheaper than moving the Node timer each time, as stopping many jobs at once would.
    if (this.heap.length === 0 && !this.firing) this.arm();
  }

  /** Aims the Node timer at the earliest deadline, or stops it when no timer is armed. */
  private arm(): void {
    if (this.handle !== undefined) this.clearTimer(this.handle);
    this.handle = undefined;
    this.aim = Infinity;
    const first = this.heap[0];
    if (first === undefined) return;
    this.aim = first.deadline;
    const wait = first.deadline - now();
    const delay = wait <= 0 ? 0 : Math.min(Math.max(Math.round(wait), 1), MAX_TIMER_DELAY);
    this.handle = this.setTimer(this.fire, delay);
  }

  private readonly fire = (): void => {
    this.handle = undefined;
    this.aim = Infinity;
    this.firing = true;
    try {
      // Take every timer that is due before calling any: a timer armed by these calls, even for a deadline
      // already passed, waits for the next turn of the timers (as `jobShutdown: 0` relies on).
      const time = now();
      const due: DeadlineTimer[] = [];
      while (this.heap.length > 0 && this.heap[0].deadline <= time) {
        const timer = this.heap[0];
        this.remove(timer);
        timer.index = -2;
        due.push(timer);
      }
      for (const timer of due) {
        // An earlier callback may have cancelled this timer (-1) or armed it again (≥ 0).
        if (timer.index !== -2) continue;
        timer.index = -1;
        timer.listener.onDeadline();
      }
    } finally {
      this.firing = false;
      this.arm();
    }
  };

  private before(a: DeadlineTimer, b: DeadlineTimer): boolean {
    return a.deadline < b.deadline || (a.deadline === b.deadline && a.sequence < b.sequence);
  }

  private up(index: number): void {
    const heap = this.heap;
    const timer = heap[index];
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!this.before(timer, heap[parent])) break;
      heap[index] = heap[parent];
      heap[index].index = index;
      index = parent;
    }
    heap[index] = timer;
    timer.index = index;
  }

  private down(index: number): void {
    const heap = this.heap;
    const timer = heap[index];
    for (;;) {
      let child = 2 * index + 1;
      if (child >= heap.length) break;
      if (child + 1 < heap.length && this.before(heap[child + 1], heap[child])) child += 1;
      if (!this.before(heap[child], timer)) break;
      heap[index] = heap[child];
      heap[index].index = index;
      index = child;
    }
    heap[index] = timer;
    timer.index = index;
  }
}

/** How many deadline timers are armed through the current `setTimeout`: for tests. */
export function armedDeadlines(): number {
  return sharedTimerOf(globalThis.setTimeout, globalThis.clearTimeout).size;
}

/** One shared timer per `setTimeout`, so that a test's fake timers never share a Node timer with real ones. */
const sharedTimers = new WeakMap<typeof setTimeout, SharedTimer>();
let lastSetTimer: typeof setTimeout | undefined;
let lastShared: SharedTimer | undefined;

function sharedTimerOf(setTimer: typeof setTimeout, clearTimer: typeof clearTimeout): SharedTimer {
  if (setTimer === lastSetTimer) return lastShared!;
  let shared = sharedTimers.get(setTimer);
  if (shared === undefined) sharedTimers.set(setTimer, (shared = new SharedTimer(setTimer, clearTimer)));
  lastSetTimer = setTimer;
  lastShared = shared;
  return shared;
}
