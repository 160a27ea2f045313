import type { PeriodicFleetSchedule, PeriodicScheduleWritten } from './coordinator-port.js';
import type { Lease } from './replica.js';
import { type AheadClaimer, CLAIM_AHEAD_MS } from './slot-claims.js';
import type { ResolvedPeriodicOptions } from './options.js';

/**
 * What a replica keeps of the fleet's schedule of a job once it claims its slots: made when it first does, as the
 * replicas that never hold a job's lease (most of them, for most jobs) need none of it.
 */
class Claims {
  /** Shifted mode: the slot claimed whose run has not ended yet; 0 if none. */
  claimed = 0;
  /** The last claim of a slot, until the store has answered. */
  claiming: Promise<unknown> | undefined = undefined;
  /** The slot claimed whose tick has neither started its run nor ended without one (its guard is pending); 0 if none. */
  unstarted = 0;
  /** A claim of a slot that went out ahead of its tick, which takes its answer if the lease is the same holding. */
  early: { slot: number; fencingToken: number; write: Promise<PeriodicScheduleWritten> } | undefined =
    undefined;
  /** Claims waiting for the store's answer. */
  asking = 0;
  /** `maxRuns`: the last slot counted (claimed again, it counts once). */
  counted = 0;
  /** A backfill under way, which every write of the schedule carries while it lasts. */
  backfill: { next: number; to: number } | undefined = undefined;
  /** The last slot and the next, as this replica last wrote them or found them when it took the lease. */
  last = 0;
  next = 0;
}

/**
 * The schedule of an exclusive job is the fleet's, kept in its coordinator (docs/replicas.md, "One schedule for
 * the whole fleet"). The holder claims each slot in the store before it runs it, so no slot runs twice; a replica
 * that takes the lease over continues from what the store says. This is one replica's part in it.
 */
export class FleetSlots implements AheadClaimer {
  /** The options that make the job's grid, as the store keeps them: made when the job first needs it. */
  #grid: string | undefined;
  /** What this replica keeps once it claims the job's slots. */
  #claims: Claims | undefined;
  /** The latest slot that came while this replica did not hold the lease; 0 if none. */
  private unheldSlot = 0;
  /** The slot of the job's next tick, while its claim may go out ahead of it; 0 if none. */
  private expected = 0;
  /**
   * When the job's options last changed, if known (a stored schedule's edit; wall-clock ms): a new grid starts
   * after it. 0 when not known (a deploy): a new grid starts after the last slot that ran anywhere.
   */
  changedAt = 0;
  /**
   * When the job was created, if known (a stored schedule, created again after a removal; wall-clock ms): no slot
   * of the grid the store kept from before runs, and the grid starts again after it. 0 when not known.
   */
  createdAt = 0;
  /**
   * `maxRuns`: how many slots of the grid the fleet has claimed, as the store said when this replica took the lease
   * and as its own claims counted since.
   */
  #runs = 0;
  /** Whether the job counts the fleet's slots (`maxRuns`): every write of its schedule carries the count. */
  readonly #counts: boolean;
  /** The latest slot the store took as claimed, as `lastClaimed` says. */
  #taken = 0;

  /**
   * @param lease the job's lease, which this replica must hold to start a run.
   * @param job tells the slot after a time on the job's own grid or calendar; 0 if the calendar has none.
   */
  constructor(
    readonly lease: Lease,
    private readonly options: ResolvedPeriodicOptions,
    private readonly job: { slotAfter(slot: number): number },
  ) {
    this.#counts = options.maxRuns !== undefined;
    lease.claimer = this;
  }

  /** What this replica keeps once it claims the job's slots, made now if it was not. */
  get #claimsMade(): Claims {
    return (this.#claims ??= new Claims());
  }

  /** The options that make the job's grid, as the store keeps them. */
  get grid(): string {
    return (this.#grid ??= gridOf(this.options));
  }

  /** The last slot the store said this replica claimed, or had been claimed when it took the lease; 0 if none. */
  get lastClaimed(): number {
    return this.#taken;
  }

  /** `maxRuns`: the slots of the grid the fleet has claimed, this replica's last claim included. */
  get runs(): number {
    return this.#runs;
  }

  /** `maxRuns`: the fleet's count, as a replica without the lease read it from the store. */
  heard(runs: number): void {
    if (!this.lease.held) this.#runs = runs;
  }

  /** A backfill under way, as the store had it when this replica took the lease. */
  get backfill(): { next: number; to: number } | undefined {
    return this.#claims?.backfill;
  }

  /** Where the backfill under way stands now (undefined: none is): written to the store at once. */
  backfilled(backfill: { next: number; to: number } | undefined): Promise<PeriodicScheduleWritten> {
    const claims = this.#claimsMade;
    claims.backfill = backfill === undefined ? undefined : { ...backfill };
    return this.lease.writeSchedule(this.written(claims.last, claims.next));
  }

  /** The fleet has run `maxRuns` slots: no next slot is due, as the store tells every replica. */
  ended(): void {
    void this.lease.writeSchedule(this.written(this.#claims?.last ?? 0, 0));
  }

  /** A write of the job's schedule, with the count of the fleet's slots and a backfill, if it has them. */
  private written(last: number, next: number): PeriodicFleetSchedule {
    const claims = this.#claimsMade;
    claims.last = last;
    claims.next = next;
    const schedule: PeriodicFleetSchedule = { grid: this.grid, last, next };
    if (this.#counts) schedule.runs = this.#runs;
    if (claims.backfill !== undefined) schedule.backfill = claims.backfill;
    return schedule;
  }

  /**
   * Claims `slot` in the store: resolves whether this replica holds it, and `'paused'` when it does but the
   * fleet has paused the job (the tick starts nothing). A claimed slot is this replica's until
   * its tick has started a run or ended without one (`settled()`); one still unsettled when the replica gives
   * the lease up is given back to the fleet, due now, and the next holder runs it.
   */
  async claim(slot: number): Promise<PeriodicScheduleWritten> {
    const { lease } = this;
    const claims = this.#claimsMade;
    if (this.expected === slot) this.expect(0, 0);
    const early = claims.early;
    if (early !== undefined && early.slot <= slot) claims.early = undefined;
    const same = early?.slot === slot && early.fencingToken === lease.fencingToken;
    const write = same ? early.write : this.ask(lease.writeSchedule(this.claimOf(slot)));
    claims.claiming = write;
    const taken = await write;
    // A slot claimed while the lease was being handed over or lost is given back with the lease.
    if (taken !== false) {
      claims.unstarted = slot;
      this.#taken = Math.max(this.#taken, slot);
    }
    return lease.held && taken;
  }

  /**
   * The job's next tick comes at `at` (on the `now()` timeline), for `slot`: a step of other claims that goes out
   * shortly before may take its claim along (`CLAIM_AHEAD_MS`). Not with `jitter` (the tick claims after its
   * delay, and the claim before it must come first), nor with `delivery: 'atLeastOnce'` (a recovery takes the
   * store's last slot for the last one started), nor for a job every less than twice `CLAIM_AHEAD_MS`.
   */
  armed(slot: number, at: number): void {
    const { cron, delivery, every, jitter } = this.options;
    const often = cron === undefined && every < 2 * CLAIM_AHEAD_MS;
    if (jitter === 0 && delivery !== 'atLeastOnce' && !often && this.#claims?.early?.slot !== slot)
      this.expect(slot, at);
  }

  /**
   * The job was paused or resumed here: a claim sent ahead before says what the fleet said then, and the tick
   * claims its slot again (the store takes the same slot twice) to learn what it says now.
   */
  operated(): void {
    if (this.#claims !== undefined) this.#claims.early = undefined;
  }

  private expect(slot: number, at: number): void {
    this.expected = slot;
    this.lease.expect(at);
  }

  /** @internal */
  claimAhead(): PeriodicFleetSchedule | undefined {
    const slot = this.expected;
    // The slot claimed before it is started first, so that the store's last slot was started or is this one.
    const claims = this.#claims;
    if (slot === 0 || (claims !== undefined && (claims.asking > 0 || claims.unstarted !== 0)))
      return undefined;
    return this.claimOf(slot);
  }

  /** @internal */
  claimedAhead(write: Promise<PeriodicScheduleWritten>): void {
    const slot = this.expected;
    const claims = this.#claimsMade;
    const early = { slot, fencingToken: this.lease.fencingToken, write: this.ask(write) };
    claims.early = early;
    this.expected = 0;
    claims.claiming = early.write;
    // Claimed, and not started until its tick: given back with the lease if the replica gives it up before.
    void early.write.then((taken) => {
      if (taken !== false && claims.early === early) claims.unstarted = slot;
    });
  }

  /** The write that claims `slot`: counted once, however often it is claimed (`maxRuns`). */
  private claimOf(slot: number): PeriodicFleetSchedule {
    const claims = this.#claimsMade;
    if (this.#counts && slot !== claims.counted) {
      claims.counted = slot;
      this.#runs++;
    }
    return this.written(slot, this.options.delayMode === 'regular' ? this.job.slotAfter(slot) : 0);
  }

  /** A claim on its way: no other goes ahead of the job's ticks until it is answered. */
  private ask(write: Promise<PeriodicScheduleWritten>): Promise<PeriodicScheduleWritten> {
    const claims = this.#claimsMade;
    claims.asking++;
    return write.finally(() => claims.asking--);
  }

  /** The claimed slot's tick has started its run, or ended without one on purpose. */
  settled(): void {
    if (this.#claims !== undefined) this.#claims.unstarted = 0;
  }

  /** A slot came while this replica did not hold the lease: a first holder runs it at once (`takeOver`). */
  unheld(slot: number): void {
    this.unheldSlot = slot;
  }

  /** The claimed slot is this replica's to run; in shifted mode, its end sets the fleet's next tick. */
  hold(slot: number): void {
    if (this.options.delayMode === 'shifted') this.#claimsMade.claimed = slot;
  }

  /** Shifted mode: the run of the slot held has ended, and the fleet's next tick is due at `next`. */
  ranUntil(next: number): void {
    const claims = this.#claims;
    if (claims === undefined || claims.claimed === 0) return;
    void this.lease.writeSchedule(this.written(claims.claimed, next));
    claims.claimed = 0;
  }

  /**
   * This replica just took the lease over: the wall-clock time of its next tick, or undefined when it keeps its
   * own grid, next due at `slot`. When nothing ran yet under any options, its own grid becomes the fleet's, so
   * that a restart does not begin it anew, and a slot that came before it held the lease is due now.
   */
  takeOver(stored: PeriodicFleetSchedule | null, slot: number, wallNow: number): number | undefined {
    const unheld = this.unheldSlot;
    this.unheldSlot = 0;
    const claims = this.#claimsMade;
    claims.early = undefined;
    const same = stored?.grid === this.grid;
    this.#runs = same ? (stored.runs ?? 0) : 0;
    claims.counted = same ? stored.last : 0;
    // A backfill goes on from where the last holder left it, on a grid of other options too.
    claims.backfill = stored?.backfill;
    claims.last = stored?.last ?? 0;
    claims.next = stored?.next ?? 0;
    this.#taken = Math.max(this.#taken, claims.last);
    const next = fleetNext(
      stored,
      this.grid,
      (slot) => this.job.slotAfter(slot),
      wallNow,
      this.changedAt,
      this.createdAt,
    );
    if (next !== undefined) return next;
    void this.lease.writeSchedule(this.written(0, unheld || slot));
    return unheld || undefined;
  }

  /**
   * Gives the slot claimed but not started back to the fleet, due now, once the last claim has settled: the
   * lease is about to be given up, and the next holder runs it.
   */
  async giveBack(): Promise<void> {
    const claims = this.#claims;
    if (claims === undefined) return;
    await claims.claiming;
    const slot = claims.unstarted;
    claims.unstarted = 0;
    if (slot !== 0) await this.lease.writeSchedule(this.written(slot, slot));
  }

  /** Gives the slot claimed but not started back, then the lease up. */
  release(): Promise<void> {
    return this.lease.release(this.giveBack());
  }
}

/** The options that make a job's grid, as the store keeps them: a holder with other options starts a new grid. */
function gridOf({ every, delayMode, cron, timezone, policy }: ResolvedPeriodicOptions): string {
  if (policy !== undefined && !Number.isNaN(policy.at)) return `at ${policy.at}`;
  return cron === undefined ? `every ${every} ${delayMode}` : `cron ${cron} ${timezone}`;
}

/**
 * The wall-clock time of the next tick of a replica that just took the lease over (`after` gives the slot that
 * follows a time on the job's own grid or calendar), or undefined when nothing
 * ran yet under any options (the replica keeps its own grid, which then becomes the fleet's). Slots of the same
 * grid that passed meanwhile are the tick's to count: one run, and a `missed` event, as after a stall.
 */
function fleetNext(
  stored: PeriodicFleetSchedule | null,
  grid: string,
  after: (slot: number) => number,
  wallNow: number,
  changedAt: number,
  createdAt: number,
): number | undefined {
  if (stored === null) return undefined;
  if (stored.grid === grid) {
    // A shifted-mode run whose end the store never learnt (its replica died): it ended by the takeover.
    const next = stored.next !== 0 ? stored.next : after(wallNow);
    // No slot is left (the one of `at` ran, say); or the grid of a job of the same name that was removed before
    // this one was created: none of its slots runs.
    if (next === 0) return 0;
    return next < createdAt ? after(createdAt) : next;
  }
  // The options changed: a new grid starts from the change, when it is known (a stored schedule edited: no slot of
  // the new timing before the edit runs); else (a deploy) from the last slot that ran anywhere, so that replicas
  // of the old and the new version that hand the job to each other do not put its next slot off each time.
  if (stored.last === 0) return undefined;
  return after(Math.max(stored.last, changedAt));
}
