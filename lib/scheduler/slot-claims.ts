// The claims of slots of one replica's exclusive jobs on their way to the store. The writes of their schedules go
// in steps, one out at a time, each with all that came while the one before was out; and a step also claims the
// slots that the jobs which allow it tick within `CLAIM_AHEAD_MS`, ahead of their ticks. The records of runs ride
// with the steps (run-records.ts), so the claims tell when the next ones go.
import type {
  PeriodicFleetSchedule,
  PeriodicScheduleWrite,
  PeriodicScheduleWritten,
} from './coordinator-port.js';
import { now } from './deadline-timer.js';
import type { StoreCalls } from './store-calls.js';

/**
 * A slot due within this many ms of a step of claims going out is claimed in that step, ahead of its tick, which
 * then finds the answer: a replica sends about one step of claims per window, however many instants its jobs
 * tick at.
 */
export const CLAIM_AHEAD_MS = 50;

/** A job whose next tick's claim may go out ahead of it, with another job's step. */
export interface AheadClaimer {
  /** The write that claims the slot of the job's next tick, or undefined if that claim must wait for its tick. */
  claimAhead(): PeriodicFleetSchedule | undefined;
  /** That claim went out: its answer, which the tick takes. */
  claimedAhead(write: Promise<PeriodicScheduleWritten>): void;
}

/** A job's lease as the claims of its slots see it: the replica's `Lease`. */
export interface ClaimingLease {
  readonly name: string;
  /** 0 while the lease is not held. */
  readonly fencingToken: number;
  /** On the `now()` timeline: until when the holding counts. */
  readonly validUntil: number;
  /** Whether the replica holds the lease now, to start runs. */
  readonly held: boolean;
  readonly phase: string;
  /** On the `now()` timeline: when the job's next tick claims a slot that may be claimed ahead; 0 if none. */
  aheadAt: number;
  readonly claimer: AheadClaimer | undefined;
}

/** A write waiting for its step, and who waits for its answer. */
interface Write {
  lease: ClaimingLease;
  schedule: PeriodicFleetSchedule;
  done: (written: PeriodicScheduleWritten) => void;
}

/** When the steps of claims go out: what the records of runs wait for. */
export interface ClaimTimes {
  /** On the `now()` timeline: when the last slot claimed ahead by the latest step comes. */
  readonly claimedUntil: number;
  /** How long after the step before the latest step went out. */
  readonly claimGap: number;
  /** When the first tick after `from` and until `until` comes that claims its slot at its time (its lease held). */
  nextClaim(from: number, until: number): number | undefined;
}

export class SlotClaims implements ClaimTimes {
  /** Writes not sent yet. */
  #writes: Write[] = [];
  /** A step of writes is out. */
  #writing = false;
  /** Leases whose next slot may be claimed ahead, by the window of `CLAIM_AHEAD_MS` their tick falls in. */
  readonly #ahead = new Map<number, Set<ClaimingLease>>();
  /** When the latest step went out, on the `now()` timeline. */
  #claimedAt = -Infinity;
  #claimGap = Infinity;
  #claimedUntil = -Infinity;

  /**
   * @param calls the calls to the store.
   * @param owner the replica's session, which holds the leases.
   * @param stepping told as each step goes out: the records of runs waiting go with it.
   */
  constructor(
    private readonly calls: StoreCalls,
    private readonly owner: string,
    private readonly stepping: () => void,
  ) {}

  /** The job's next tick comes `at` (0: none to claim ahead): a step of claims near it may claim its slot. */
  expect(lease: ClaimingLease, at: number): void {
    if (lease.aheadAt !== 0) {
      const window = Math.floor(lease.aheadAt / CLAIM_AHEAD_MS);
      const leases = this.#ahead.get(window);
      leases?.delete(lease);
      if (leases?.size === 0) this.#ahead.delete(window);
    }
    lease.aheadAt = at;
    if (at === 0) return;
    const window = Math.floor(at / CLAIM_AHEAD_MS);
    const leases = this.#ahead.get(window);
    if (leases === undefined) this.#ahead.set(window, new Set([lease]));
    else leases.add(lease);
  }

  /**
   * Writes a schedule with the others of this turn of the event loop, in one step; while a step is out, with all
   * that come until it is answered. The ticks that the shared timer fires together claim their slots together,
   * and a replica whose jobs tick at many different instants sends one step per round trip to the store at most,
   * however many: under load, the steps grow rather than queue up one by one.
   */
  write(lease: ClaimingLease, schedule: PeriodicFleetSchedule): Promise<PeriodicScheduleWritten> {
    return new Promise((done) => {
      if (this.#writes.length === 0 && !this.#writing) void Promise.resolve().then(() => this.#flush());
      this.#writes.push({ lease, schedule, done });
    });
  }

  get claimGap(): number {
    return this.#claimGap;
  }

  get claimedUntil(): number {
    return this.#claimedUntil;
  }

  nextClaim(from: number, until: number): number | undefined {
    for (let window = Math.floor(from / CLAIM_AHEAD_MS); window <= until / CLAIM_AHEAD_MS; window++) {
      let earliest = Infinity;
      for (const { aheadAt, fencingToken } of this.#ahead.get(window) ?? []) {
        if (fencingToken !== 0 && aheadAt > from && aheadAt <= until) earliest = Math.min(earliest, aheadAt);
      }
      if (earliest !== Infinity) return earliest;
    }
    return undefined;
  }

  async #flush(): Promise<void> {
    const writes = this.#writes;
    this.#writes = [];
    const sent: PeriodicScheduleWrite[] = [];
    const pending: Write[] = [];
    const names = new Set<string>();
    const time = now();
    for (const write of writes) {
      // The lease may have been lost, or run out, while the write waited for the step before.
      const { fencingToken, name, validUntil } = write.lease;
      if (fencingToken === 0 || time >= validUntil) write.done(false);
      // A job's second write goes in the next step, to be checked against its first.
      else if (names.has(name)) this.#writes.push(write);
      else {
        names.add(name);
        sent.push({ name, fencingToken, schedule: write.schedule });
        pending.push(write);
      }
    }
    if (sent.length === 0) return;
    this.#claimAhead(time, names, sent, pending);
    this.#claimGap = time - this.#claimedAt;
    this.#claimedAt = time;
    this.stepping();
    this.#writing = true;
    // A failure was reported, and drops the writes: a slot whose claim failed is not run.
    const taken = await this.calls
      .writeSchedules(this.owner, sent)
      .catch(() => sent.map((): PeriodicScheduleWritten => false));
    this.#writing = false;
    pending.forEach((write, i) => write.done(taken[i]));
    if (this.#writes.length > 0) void this.#flush();
  }

  /**
   * Adds to a step of claims those of the slots due within `CLAIM_AHEAD_MS` whose jobs allow it (`AheadClaimer`),
   * if the lease is still valid when they come.
   */
  #claimAhead(time: number, names: Set<string>, sent: PeriodicScheduleWrite[], pending: Write[]): void {
    const until = time + CLAIM_AHEAD_MS;
    for (let window = Math.floor(time / CLAIM_AHEAD_MS); window <= until / CLAIM_AHEAD_MS; window++) {
      for (const lease of this.#ahead.get(window) ?? []) {
        const { aheadAt, claimer, fencingToken, name } = lease;
        if (aheadAt <= time || aheadAt > until || names.has(name)) continue;
        if (lease.phase !== 'competing' || !lease.held) continue;
        const schedule = lease.validUntil > aheadAt ? claimer?.claimAhead() : undefined;
        if (schedule === undefined) continue;
        this.#claimedUntil = Math.max(this.#claimedUntil, aheadAt);
        this.expect(lease, 0);
        names.add(name);
        sent.push({ name, fencingToken, schedule });
        claimer!.claimedAhead(new Promise((done) => pending.push({ lease, schedule, done })));
      }
    }
  }
}
