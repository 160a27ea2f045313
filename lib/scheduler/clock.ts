/**
 * Monotonic time in milliseconds. Reads the global `performance` at each call: Jest's fake timers replace
 * `globalThis.performance`, not the object exported by `node:perf_hooks`.
 */
export function now(): number {
  return globalThis.performance.now();
}

/** Node's longest timer; a longer delay would fire after 1 ms. */
export const MAX_TIMER_DELAY = 2 ** 31 - 1;

/**
 * Calls `onDeadline` once `now()` has reached the deadline, never before. Node timers may fire up to 1 ms
 * early and cannot wait longer than {@link MAX_TIMER_DELAY}, so a timer that fires before the deadline is
 * armed again for what remains.
 */
export class DeadlineTimer {
  private handle: ReturnType<typeof setTimeout> | undefined;
  private deadline = 0;

  constructor(private readonly onDeadline: () => void) {}

  /** Arms the timer for `deadline` on the `now()` timeline, replacing any pending deadline. */
  armAt(deadline: number): void {
    this.cancel();
    this.deadline = deadline;
    this.arm();
  }

  cancel(): void {
    if (this.handle !== undefined) {
      clearTimeout(this.handle);
      this.handle = undefined;
    }
  }

  private arm(): void {
    const wait = Math.min(Math.max(Math.ceil(this.deadline - now()), 0), MAX_TIMER_DELAY);
    this.handle = setTimeout(this.fire, wait);
  }

  private readonly fire = (): void => {
    this.handle = undefined;
    if (now() < this.deadline) this.arm();
    else this.onDeadline();
  };
}
