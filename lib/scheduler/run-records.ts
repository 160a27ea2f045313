// The records of runs of one replica's exclusive jobs on their way to the fleet's history in the store
// (docs/operations.md, "Run history"). They never delay a run: they go in steps, one out at a time so that a run's
// end never reaches the store before its start, riding with the steps of claims (slot-claims.ts) where one comes
// soon; and a store too slow to keep them gives its time to the claims and the leases instead (shedding).
import { randomBytes } from 'node:crypto';
import type { PeriodicRunEntry } from './coordinator-port.js';
import { DeadlineTimer, now } from './deadline-timer.js';
import { CLAIM_AHEAD_MS, type ClaimTimes } from './slot-claims.js';
import type { StoreCalls } from './store-calls.js';

export class RunRecords {
  /**
   * Begins the ids of this session's runs in the store: 64 random bits, short because the store keeps a record of
   * every run, and Redis's work to append one grows with its length.
   */
  readonly #session = randomBytes(8).toString('base64url');
  /** The runs of this session's jobs given an id so far. */
  #count = 0;
  /**
   * Records not sent yet, each with how many runs its job keeps: those of one turn of the event loop go together
   * at its end, with the step of claims of that turn if there is one; a run that ends in the turn it started is
   * sent once, ended.
   */
  #waiting = new Map<PeriodicRunEntry, number>();
  /** A step of records is out; and who waits for the records sent so far to be answered. */
  #sending = false;
  #flushed: (() => void)[] = [];
  /** Records wait for a step of claims until then; or are sent at the end of this turn (`#queued`). */
  readonly #due = new DeadlineTimer({ onDeadline: () => void this.flush() });
  #queued = false;
  /** On the `now()` timeline: until when no run is recorded (the store was too slow to record them). */
  #shedUntil = -Infinity;
  /** Runs whose start the store took: their end is recorded even then, so that none reads as running for ever. */
  readonly #opened = new WeakSet<PeriodicRunEntry>();

  /**
   * @param calls the calls to the store.
   * @param claims when the replica's steps of claims go out.
   */
  constructor(
    private readonly calls: StoreCalls,
    private readonly claims: ClaimTimes,
  ) {}

  /**
   * The id of a new run of one of this replica's jobs in the store, unique in the fleet: the session's and a count
   * of its runs, of every job (a jobId counts the runs of one job only).
   */
  runId(): string {
    return `${this.#session}#${++this.#count}`;
  }

  /** Whether run `id` is one of this session's (`runId`): its end is this process's to record. */
  ranHere(id: string): boolean {
    return id.startsWith(`${this.#session}#`);
  }

  /**
   * Records a run in the fleet's history, which keeps the latest `keep` of its job. Never delays a run; a record
   * the store does not take is lost (and reported). Records wait for the next step of claims, to go to the store in
   * the same round trip, where one is due within `leaseMs / 20` (a tick of this replica's jobs comes by then, or
   * its steps of claims come less than that apart), for `leaseMs / 20` at most, and not before the last slot that
   * the latest step claimed ahead has come, so that the runs of those slots go together; otherwise, and when
   * `promptly` (the record of a run that must run again if its replica dies before it ends: `delivery:
   * 'atLeastOnce'`), they go at the end of this turn of the event loop.
   */
  record(entry: PeriodicRunEntry, keep: number, promptly: boolean): void {
    // A store too slow to keep the history gives its time to the claims of slots for a lease period.
    if (now() < this.#shedUntil && !this.#opened.has(entry)) return;
    this.#waiting.set(entry, keep);
    if (!promptly) {
      // The first record waiting arranged when they go.
      if (this.#waiting.size > 1) return;
      const time = now();
      const wait = this.calls.timing.batchWaitMs;
      const { claims } = this;
      // The runs of the slots claimed ahead start until `claimedUntil`: their records go with the next claim
      // after that, or once they have started.
      const claim = claims.nextClaim(Math.max(time, claims.claimedUntil), time + wait);
      if (claim !== undefined) return this.#due.armAt(Math.min(claim + CLAIM_AHEAD_MS, time + wait));
      if (time < claims.claimedUntil) return this.#due.armAt(claims.claimedUntil + 1);
      if (claims.claimGap < wait) return this.#due.armAt(time + wait);
    }
    if (!this.#queued) {
      this.#queued = true;
      void Promise.resolve().then(() => this.flush());
    }
  }

  /**
   * Sends the records not sent yet; resolves once the store has answered them (a failure was reported). One step
   * is out at a time, so that a run's end never reaches the store before its start.
   */
  flush(): Promise<void> {
    this.#due.cancel();
    this.#queued = false;
    if (this.#waiting.size === 0 && !this.#sending) return Promise.resolve();
    return new Promise((done) => {
      this.#flushed.push(done);
      if (!this.#sending) void this.#send();
    });
  }

  async #send(): Promise<void> {
    this.#sending = true;
    // Those recorded while a step was out go next if someone waits for them (a step of claims, a reader, a
    // release); otherwise they wait for the next step of claims, as they would have.
    while (this.#waiting.size > 0 && this.#flushed.length > 0) {
      const waiting = this.#flushed.splice(0);
      const byKeep = new Map<number, PeriodicRunEntry[]>();
      for (const [entry, keep] of this.#waiting) {
        const entries = byKeep.get(keep);
        if (entries === undefined) byKeep.set(keep, [entry]);
        else entries.push(entry);
      }
      this.#waiting.clear();
      const sent = now();
      // One call per number of runs kept: one for all, where the jobs of the replica keep the same number.
      const steps = await Promise.all(Array.from(byKeep, ([keep, entries]) => this.#sendKept(entries, keep)));
      const took = now() - sent;
      const count = steps.reduce((sum, step) => sum + step.count, 0);
      const taken = steps.every((step) => step.taken);
      if (!taken || took > this.calls.timing.marginMs) this.#shed(count, took, taken);
      for (const done of waiting) done();
    }
    this.#sending = false;
    for (const done of this.#flushed.splice(0)) done();
  }

  /** Sends records of jobs that keep `keep` runs: whether the store took them. */
  async #sendKept(entries: PeriodicRunEntry[], keep: number): Promise<{ count: number; taken: boolean }> {
    // Copies: a run in flight goes on changing its own.
    const runs = entries.map((entry) => ({ ...entry }));
    const taken = await this.calls.recordRuns(runs, keep).then(
      () => true,
      () => false,
    );
    entries.forEach((entry, i) => {
      if (taken && runs[i].reason === null) this.#opened.add(entry);
      else this.#opened.delete(entry);
    });
    return { count: runs.length, taken };
  }

  /**
   * The store failed to record runs, or took more than `leaseMs / 10` to: no run is recorded for a lease period
   * (the runs waiting are dropped), so that the history does not hold up the claims of slots and the renewals
   * of leases when the store is overloaded; but the end of a run whose start was recorded still is. Said once
   * per lease period; a failure was reported already.
   */
  #shed(count: number, took: number, taken: boolean): void {
    const { leaseMs } = this.calls;
    this.#shedUntil = now() + leaseMs;
    const before = this.#waiting.size;
    for (const entry of this.#waiting.keys()) if (!this.#opened.has(entry)) this.#waiting.delete(entry);
    const dropped = before - this.#waiting.size;
    if (taken) {
      this.calls.store.slow(
        `took ${Math.round(took)}ms to record ${count} runs: no run is recorded for the next ${leaseMs}ms ` +
          `(${dropped} dropped), so that the claims of slots and the renewals of leases keep the store's time`,
      );
    }
  }
}
