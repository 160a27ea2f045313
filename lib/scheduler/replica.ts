// One replica of the fleet, for one coordinator: the leases of every exclusive job of the replica, renewed,
// taken and given up together in a heartbeat every leaseMs / 3, so that the replica's traffic to the store
// does not grow with its number of jobs; and the jobs spread over the live replicas by rendezvous hashing.
import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import {
  type PeriodicFleetMember,
  type PeriodicFleetSchedule,
  type PeriodicHeartbeat,
  type PeriodicLeaseHeld,
  type PeriodicScheduleWritten,
  type PeriodicTriggerRequest,
} from './coordinator-port.js';
import { type HeartbeatAnswer, StoreCalls } from './store-calls.js';
import { type StoreLog } from './store-log.js';
import { DeadlineTimer, now } from './deadline-timer.js';
import { messageOf } from './errors.js';
import { hash, spreadIndexes } from './spread.js';
import { RunRecords } from './run-records.js';
import { type AheadClaimer, SlotClaims } from './slot-claims.js';

/** What a job tells the lease it holds, and is told by it. */
export interface LeaseHolder {
  /** The lease is taken, with the job's schedule as the store keeps it. */
  leaseAcquired(fencingToken: number, schedule: PeriodicFleetSchedule | null): void;
  /** The lease is no longer held: lost, or handed over once the job was idle. Its runs are stopped. */
  leaseLost(reason: string): void;
  /** Runs in flight, retries waiting, or a claim pending: a lease handed over to another replica waits for them to end. */
  readonly busy: boolean;
  /** The lease is about to be given up on purpose: a slot claimed and not started goes back to the fleet. */
  givingUp(): Promise<void>;
  /** Whether the fleet has paused the job, as a heartbeat sent at `sent` (on the `now()` timeline) found it. */
  fleetPaused(paused: boolean, sent: number): void;
  /**
   * Whether the job keeps a pause of its own (it was paused, resumed or triggered here, or heard of a pause): told
   * of the fleet's at each heartbeat. One that does not is told only when the fleet has paused it.
   */
  readonly heedsPause: boolean;
  /** A trigger asked of another replica, taken from the store: carried out here, and answered. */
  carry(request: PeriodicTriggerRequest): void;
}

/** A job's lease as this replica sees it; whether it is held is answered from memory. */
export class Lease {
  /** The fencing token of the current holding; 0 while the lease is not held. */
  fencingToken = 0;
  /** @internal On the `now()` timeline: until when the holding counts, a margin before the store's expiry. */
  validUntil = 0;
  /**
   * @internal `competing`: the replica takes the lease when the fleet's spread gives it the job. `handing`: held,
   * and given to the replica the spread gives it now, once the job's runs have ended; it starts nothing meanwhile.
   * `givingUp`: so given, a slot claimed and not started first given back; it starts nothing. `retired`: the job
   * stopped; held until `release()`, taken no more. `released`: done.
   */
  phase: 'competing' | 'handing' | 'givingUp' | 'retired' | 'released' = 'competing';
  /** @internal Whether the fleet's spread gives this replica the job. */
  owned = false;
  /** @internal On the `now()` timeline: when the job's next tick claims a slot that may be claimed ahead; 0 if none. */
  aheadAt = 0;
  /** @internal Who claims its slots ahead: the job's `FleetSlots`, which sets itself here. */
  claimer: AheadClaimer | undefined;
  /**
   * @internal The name's hash, which the fleet's spread orders the jobs by, as a signed 32-bit integer: V8 keeps
   * such a number in the object's field itself, and a larger one in a number object of its own (`seed >>> 0`).
   */
  readonly seed: number;

  constructor(
    /** @internal */ readonly replica: Replica,
    readonly name: string,
    /** @internal */ readonly holder: LeaseHolder,
  ) {
    this.seed = hash(name) | 0;
  }

  /** Whether the replica holds the lease now, to start runs: taken, not past its validity, not being handed over. */
  get held(): boolean {
    const { phase } = this;
    return this.holding && phase !== 'handing' && phase !== 'givingUp';
  }

  /**
   * Whether the replica holds the lease for the slots it has started: taken and not past its validity, handed over
   * or not. A retry of such a slot runs while the lease is being handed over, as its runs drain.
   */
  get holding(): boolean {
    return this.fencingToken !== 0 && now() < this.validUntil;
  }

  /** Competes for the lease: the replica takes it at its next heartbeat if the fleet's spread gives it the job. */
  start(): void {
    this.replica.join(this);
  }

  /** Takes the lease no more; one held now is still renewed, until `release()`. */
  retire(): void {
    if (this.phase === 'released') return;
    this.phase = 'retired';
    if (this.fencingToken === 0) this.replica.leave(this);
  }

  /**
   * Stops for good, and gives the lease up in the store if it is held, once `after` has settled (the last write
   * of the job's schedule), so that another replica takes over without waiting for it to expire. Resolves when
   * the store has answered, or after `leaseMs / 3` if it does not.
   */
  release(after?: Promise<unknown>): Promise<void> {
    this.phase = 'released';
    return this.replica.release(this, after);
  }

  /** @internal The job's next tick comes `at` (`now()` timeline; 0: none), and its `claimer` may claim its slot ahead. */
  expect(at: number): void {
    this.replica.expect(this, at);
  }

  /** The job's runs, retries and claims have ended: a lease being handed over is given up now. */
  idle(): void {
    if (this.phase === 'handing' && !this.holder.busy) this.replica.handOver(this);
  }

  /**
   * Writes the job's schedule, if this replica holds the lease (being handed over included: the last run's end
   * and a slot given back are written before the lease goes): resolves whether the store took it, and
   * `'paused'` when it did and the fleet has paused the job.
   */
  writeSchedule(schedule: PeriodicFleetSchedule): Promise<PeriodicScheduleWritten> {
    if (this.fencingToken === 0 || now() >= this.validUntil) return Promise.resolve(false);
    const { last, next } = schedule;
    return this.replica.write(this, {
      ...schedule,
      last: Math.min(last, LAST_SLOT),
      next: Math.min(next, LAST_SLOT),
    });
  }
}

/**
 * The latest time a slot is written as: the last instant a Date holds, a safe integer every store keeps exactly.
 * A later slot (`every: 2 ** 53 - 1` after now) never comes, and is written as this one, which never comes either.
 */
export const LAST_SLOT = 8_640_000_000_000_000;

/** How many leases a heartbeat takes at most; the next heartbeat takes more. */
export const ACQUIRE_PER_HEARTBEAT = 1000;

/** What one replica's name is by default: the machine and the process. */
export function defaultReplicaName(): string {
  return `${hostname()}:${process.pid}`;
}

/**
 * One replica of the fleet for one coordinator: every exclusive job of the replica holds its lease through it.
 * Every `leaseMs / 3` it sends one heartbeat: its member record, the renewal of every lease it holds, and the
 * taking of those the fleet's spread gives it (rendezvous hashing of job names over the live members, so that
 * each of R replicas holds about N/R of N jobs, and a member that comes or goes moves only its share). Writes of
 * schedules (the claims of slots) go to the store in steps, one out at a time, each with all that came while
 * the one before was out. A lease that the spread gives to another member is handed over: the job starts
 * nothing more, and once its runs have ended its lease is given up and the other takes it at its next
 * heartbeat. A holding counts until `sent + leaseMs − margin` on this
 * replica's monotonic clock, `sent` read before the heartbeat that took or renewed it went out.
 */
export class Replica {
  /** This replica's session: the owner of its leases in the store, new with each process. */
  readonly owner: string;
  readonly calls: StoreCalls;
  /** The claims of the jobs' slots on their way to the store. */
  readonly #claims: SlotClaims;
  /** @internal The records of the jobs' runs on their way to the fleet's history. */
  readonly records: RunRecords;
  /** The leases of the replica's jobs, by job name. */
  private readonly leases = new Map<string, Lease>();
  /** Those of jobs that keep a pause of their own (`LeaseHolder.heedsPause`), told of the fleet's at each heartbeat. */
  readonly #heeding = new Set<Lease>();
  /** The live members, as the last heartbeat found them; until the first answer, this replica alone. */
  private members: PeriodicFleetMember[] = [];
  /** The job digest and the members' owners, as the spread was last computed from them. */
  private spread = '';
  private digest = '';
  /** The sum of the SHA-1 digests of the jobs' names, in four 32-bit lanes (`count`). */
  private readonly names = new Uint32Array(4);
  private readonly interval: number;
  private readonly margin: number;
  /** When the spread last changed, on the `now()` timeline: leases it gives are expected for a lease period. */
  private spreadAt = -Infinity;
  /**
   * When the last spread was computed (`now()` timeline), the members it was computed over, and until when the
   * next waits if only the jobs changed: fifty times as long as it took, a quarter heartbeat period at most.
   */
  private spreadDone = -Infinity;
  private spreadMembers = '';
  private spreadWait = 0;
  /** Jobs joined or left since the last spread, which the next counts. */
  private unspread = false;
  private readonly beat = new DeadlineTimer({ onDeadline: () => void this.heartbeat() });
  private readonly expiry = new DeadlineTimer({ onDeadline: () => this.expire() });
  /**
   * No holding counts less long than this (`now()` timeline; Infinity: none held), and the expiry timer is armed
   * at it: a renewal moves a validity later, and the timer looks for the earliest again when it comes.
   */
  private expiresAt = Infinity;
  private beating = false;
  /** A job joined while a heartbeat was out: the next comes at once. */
  private soon = false;
  /** The first heartbeat only writes the member record: the next takes leases, knowing the fleet. */
  private known = false;
  /** The last heartbeat left leases to take for the next, which comes as soon as it is answered. */
  private more = false;
  /** Leases of stopped jobs to give up, with this turn's others. */
  private releases: { held: PeriodicLeaseHeld | undefined; done: () => void }[] = [];
  /** What names the fleet's records in the store, as the last heartbeat read it (`PeriodicHeartbeatReply.fleet`). */
  private fleet: string | undefined;
  /** Told what the store lost when a heartbeat finds the fleet's records gone (the `storeReset` event). */
  onStoreReset: ((lost: string[]) => void) | undefined;
  /** The handlers of stored schedules this replica can run, for its member record; undefined when it runs none. */
  handlers: string[] | undefined;
  /**
   * Told the store's count of changes to its stored schedules, with each heartbeat's answer that has it, and when
   * that heartbeat was sent (on the `now()` timeline).
   */
  onStoredCount: ((count: number, sent: number) => void) | undefined;
  /** Whether the replica stays in the fleet without a lease (`stay()`). */
  private staying = false;
  /** @internal Called after each heartbeat the store answered (the fleet's incidents are read again then). */
  afterHeartbeat: (() => void) | undefined;

  /**
   * @param store the coordinator, and where its failures are reported.
   * @param name the replica's name, as status and logs show it.
   */
  constructor(
    store: StoreLog,
    readonly name: string = defaultReplicaName(),
  ) {
    this.calls = new StoreCalls(store);
    this.owner = `${name}/${randomUUID()}`;
    this.#claims = new SlotClaims(this.calls, this.owner, () => void this.records.flush());
    this.records = new RunRecords(this.calls, this.#claims);
    this.interval = this.calls.timing.heartbeatMs;
    this.margin = this.calls.timing.marginMs;
  }

  /**
   * Keeps this replica in the fleet while it has no lease: a replica that runs stored schedules (its member record
   * names its handlers, and its heartbeat reads the store's count of their changes) from the module's start
   * to its close, whatever leases it holds meanwhile.
   */
  stay(): void {
    if (this.staying) return;
    this.arrive();
    this.staying = true;
    if (!this.beating) this.beatNow();
  }

  /** No longer kept in the fleet without a lease: one without leases leaves it now. */
  async go(): Promise<void> {
    if (!this.staying) return;
    this.staying = false;
    if (this.leases.size > 0) return;
    this.stopWhenEmpty();
    await this.giveUp(undefined);
  }

  /** Whether the replica is in the fleet: it has jobs, or `stay()`s. */
  private get present(): boolean {
    return this.leases.size > 0 || this.staying;
  }

  /** (Again) the first job, or `stay()`: the replica joins the fleet, and learns who is in it before it takes leases. */
  private arrive(): void {
    if (this.present) return;
    this.calls.silence(false);
    this.known = false;
  }

  /** @internal The lease of a job that starts: taken at the next heartbeat, which comes at once if none is due. */
  join(lease: Lease): void {
    this.arrive();
    const before = this.leases.get(lease.name);
    if (before === undefined) this.count(lease.name, 1);
    else this.#heeding.delete(before);
    this.leases.set(lease.name, lease);
    if (lease.holder.heedsPause) this.#heeding.add(lease);
    // Which member the spread gives the job is known at the next heartbeat, which counts it.
    this.digest = '';
    this.spread = '';
    if (this.beating) this.soon = true;
    else this.beatNow();
  }

  /** A heartbeat at the end of this turn: the jobs that start together are taken together. */
  private beatNow(): void {
    this.beat.cancel();
    void Promise.resolve().then(() => this.heartbeat());
  }

  /** @internal The job of `lease` keeps a pause of its own from now on (`LeaseHolder.heedsPause`). */
  heedPause(lease: Lease): void {
    if (this.leases.get(lease.name) === lease) this.#heeding.add(lease);
  }

  /** @internal A job that holds no lease and stops. */
  leave(lease: Lease): void {
    if (this.leases.get(lease.name) !== lease) return;
    this.expect(lease, 0);
    this.leases.delete(lease.name);
    this.#heeding.delete(lease);
    this.count(lease.name, -1);
    this.digest = '';
    this.stopWhenEmpty();
  }

  /** @internal The job's next tick comes `at` (0: none to claim ahead): a step of claims near it may claim its slot. */
  expect(lease: Lease, at: number): void {
    this.#claims.expect(lease, at);
  }

  /** @internal Writes a schedule in the next step of claims (slot-claims.ts). */
  write(lease: Lease, schedule: PeriodicFleetSchedule): Promise<PeriodicScheduleWritten> {
    return this.#claims.write(lease, schedule);
  }

  /**
   * @internal Gives a stopped job's lease up, once `after` has settled, with the other releases of that turn (an
   * application that closes releases all its leases at once); the last job's also leaves the fleet.
   */
  async release(lease: Lease, after?: Promise<unknown>): Promise<void> {
    await after?.catch(() => undefined);
    const { fencingToken, name } = lease;
    lease.fencingToken = 0;
    this.leave(lease);
    await this.giveUp(fencingToken === 0 ? undefined : { name, fencingToken });
  }

  /**
   * Gives a lease up in the store with the others of this turn, in one step (and with none, lets the store
   * know the replica left, if its last job has stopped). A failure was reported; the lease then expires.
   */
  private giveUp(held: PeriodicLeaseHeld | undefined): Promise<void> {
    return new Promise<void>((done) => {
      if (this.releases.length === 0) void Promise.resolve().then(() => this.flushReleases());
      this.releases.push({ held, done });
    });
  }

  private async flushReleases(): Promise<void> {
    // The records of the runs drained go first: the replica that takes a lease next finds their ends.
    await this.records.flush();
    const releases = this.releases;
    this.releases = [];
    const held = releases.flatMap((release) => (release.held === undefined ? [] : [release.held]));
    const last = !this.present;
    if (held.length > 0 || last) await this.calls.releaseAll(this.owner, held, last).catch(() => undefined);
    // The replica has left: whatever the store answers from now on is not reported.
    if (last) this.calls.silence();
    for (const release of releases) release.done();
  }

  private async heartbeat(): Promise<void> {
    if (this.beating || !this.present) return;
    this.beating = true;
    const request = this.request();
    const sent = now();
    let reply: HeartbeatAnswer | undefined;
    try {
      reply = await this.calls.heartbeat(request);
    } catch (error) {
      // Reported. A renewal that fails loses the lease at once (a store that is slow to answer keeps it until its
      // validity runs out); the next heartbeat tries again.
      for (const { name, fencingToken } of request.renew) {
        const lease = this.leases.get(name);
        if (lease?.fencingToken === fencingToken) this.lose(lease, `the renewal failed: ${messageOf(error)}`);
      }
    }
    this.beating = false;
    const spread = this.spread;
    if (reply !== undefined) this.answered(request, reply, sent);
    if (!this.present) return;
    // The first answer names the fleet, and a change of its members may give this replica leases that are
    // free (a member closed or died): they are taken at once.
    const first = reply !== undefined && !this.known;
    if (first) this.known = true;
    const expecting = reply !== undefined && this.expecting();
    const more = reply !== undefined && this.more;
    if (first || more || this.soon || (expecting && this.spread !== spread)) this.beatNow();
    else {
      const next = sent + (expecting ? this.calls.timing.handoverBeatMs : this.interval);
      this.beat.armAt(this.unspread ? Math.min(next, this.spreadDone + this.spreadWait) : next);
    }
    this.soon = false;
    for (const lease of this.leases.values()) lease.idle();
  }

  /**
   * Whether leases the spread gave this replica lately are still held elsewhere: their holders give them up
   * once their runs end, within a heartbeat of theirs, and this replica asks for them eight times as often
   * meanwhile, for one lease period, so that a handover leaves a gap of `leaseMs / 24` at most, not a heartbeat.
   */
  private expecting(): boolean {
    if (now() - this.spreadAt > this.calls.leaseMs) return false;
    for (const lease of this.leases.values()) {
      if (lease.owned && lease.phase === 'competing' && lease.fencingToken === 0) return true;
    }
    return false;
  }

  private request(): PeriodicHeartbeat {
    // A holding past its validity (the process was paused, its event loop blocked) is not renewed: renewing now
    // could extend a lease that another replica may by now consider free. It is given up instead.
    this.expire();
    this.spreadJobs();
    const renew: PeriodicLeaseHeld[] = [];
    const acquire: string[] = [];
    this.more = false;
    // A heartbeat that comes early (more leases to take, a job that joined, a handover expected) renews only the
    // leases renewed more than half a period ago: the others are renewed by the next regular one, well within
    // their validity, and a replica that takes 100,000 leases a thousand at a time does not send every one it
    // holds with each step.
    const stale = now() + this.calls.leaseMs - this.margin - this.interval / 2;
    for (const lease of this.leases.values()) {
      if (lease.fencingToken !== 0) {
        if (lease.validUntil < stale) renew.push({ name: lease.name, fencingToken: lease.fencingToken });
      } else if (lease.phase !== 'competing' || !lease.owned || !this.known) continue;
      // A replica that starts alone, or takes over from one that died, takes thousands of leases: a few at a
      // time, the next heartbeat right after the answer, so that no step holds the store up for long, and one
      // that times out (and still runs in the store) has not taken many.
      else if (acquire.length < ACQUIRE_PER_HEARTBEAT) acquire.push(lease.name);
      else this.more = true;
    }
    const { handlers } = this;
    const member: PeriodicFleetMember = { owner: this.owner, replica: this.name, jobs: this.jobsDigest() };
    if (handlers !== undefined) member.handlers = handlers;
    return { member, renew, acquire };
  }

  private answered(request: PeriodicHeartbeat, reply: HeartbeatAnswer, sent: number): void {
    if (reply.fleet !== undefined) {
      if (this.fleet !== undefined && reply.fleet !== this.fleet) this.storeReset();
      this.fleet = reply.fleet;
    }
    const refused = new Map((reply.refused ?? []).map(({ name, error }) => [name, error]));
    for (const [name, error] of refused) this.calls.store.refused(name, error);
    const validUntil = sent + this.calls.leaseMs - this.margin;
    const late = now() >= validUntil;
    request.renew.forEach(({ name, fencingToken }, i) => {
      const lease = this.leases.get(name);
      if (lease === undefined || lease.fencingToken !== fencingToken) return;
      const failure = reply.failedRenewals?.get(name);
      if (failure !== undefined) this.lose(lease, `the renewal failed: ${messageOf(failure)}`);
      else if (refused.has(name)) this.lose(lease, `the store refused the job's data: ${refused.get(name)}`);
      else if (!reply.renewed[i]) {
        this.lose(lease, 'the store refused the renewal: the lease had expired or another replica holds it');
      } else if (!late) {
        lease.validUntil = validUntil;
        this.expectExpiry(validUntil);
      }
    });
    request.acquire.forEach((name, i) => {
      const taken = reply.acquired[i];
      if (taken === null) return;
      const lease = this.leases.get(name);
      if (lease === undefined || lease.phase !== 'competing' || lease.fencingToken !== 0 || late) {
        // Taken after the job stopped, or answered too late to be trusted: given back.
        void this.giveUp({ name, fencingToken: taken.fencingToken });
        return;
      }
      lease.fencingToken = taken.fencingToken;
      lease.validUntil = validUntil;
      this.expectExpiry(validUntil);
      lease.holder.leaseAcquired(taken.fencingToken, taken.schedule);
    });
    if (reply.paused !== undefined) {
      // A job that keeps no pause of its own has nothing to forget: only those the fleet paused are told so.
      const paused = new Set(reply.paused);
      for (const name of paused) this.leases.get(name)?.holder.fleetPaused(true, sent);
      for (const lease of this.#heeding) if (!paused.has(lease.name)) lease.holder.fleetPaused(false, sent);
    }
    for (const request of reply.triggers ?? []) this.leases.get(request.name)?.holder.carry(request);
    if (reply.schedules !== undefined) this.onStoredCount?.(reply.schedules, sent);
    this.afterHeartbeat?.();
    this.members = reply.members;
    this.spreadJobs();
  }

  /** The owners of the live members, sorted, as `watchesSlotsOf` last read them, and the members they came from. */
  #watchers: { of: PeriodicFleetMember[]; owners: string[] } | undefined;

  /**
   * @internal Whether this replica looks for late slots of job `name` while another holds it (docs/alerts.md):
   * two of the live members do, by a hash of the name (two, as one of them may be the holder that stopped), so
   * that the store is read for each job by two replicas at most, not by every one.
   */
  watchesSlotsOf(name: string): boolean {
    const { members } = this;
    if (this.#watchers?.of !== members) {
      this.#watchers = { of: members, owners: members.map(({ owner }) => owner).sort() };
    }
    const { owners } = this.#watchers;
    if (owners.length <= 2) return true;
    const at = hash(name) % owners.length;
    return owners[at] === this.owner || owners[(at + 1) % owners.length] === this.owner;
  }

  /** The live members as the last heartbeat found them. */
  get fleetMembers(): readonly PeriodicFleetMember[] {
    return this.members;
  }

  /** The store lost the fleet's records since the last heartbeat: said once, in the log and as an event. */
  private storeReset(): void {
    const { calls } = this;
    const lost = [
      ...(calls.operated ? ['pauses', 'audit'] : []),
      ...(calls.recorded ? ['history'] : []),
      ...(this.onStoredCount !== undefined ? ['stored schedules'] : []),
    ];
    calls.store.reset(lost);
    try {
      this.onStoreReset?.(lost);
    } catch {
      // A listener's failure is its own (the events' emitter logs it); it never stops the heartbeat.
    }
  }

  /** Which jobs the fleet's spread gives this replica, computed again when the members change. */
  private spreadJobs(): void {
    // Over the members with the same jobs (replicas of one version of the application): each job they share has
    // one owner among them; replicas with other jobs (another version, during a rolling deploy, or other
    // processes of the application) spread theirs among themselves, and a job of both is held by one of the
    // two owners, whichever takes it first.
    const jobs = this.jobsDigest();
    const owners = this.members
      .filter((member) => member.jobs === jobs || member.owner === this.owner)
      .map((member) => member.owner)
      .sort();
    const members = owners.join('\n');
    const spread = `${jobs}\n${members}`;
    if (spread === this.spread) return;
    // Each spread weighs every job: jobs that come in a burst (a replica applying thousands of stored schedules,
    // a page at a time) are spread again once the replica has spent fifty times as long on other work, so that
    // spreading takes a fiftieth of it at most; a few jobs are spread at once, and new members always are.
    const time = now();
    if (members === this.spreadMembers && time < this.spreadDone + this.spreadWait) {
      this.unspread = true;
      return;
    }
    this.unspread = false;
    this.spreadMembers = members;
    this.spread = spread;
    this.spreadAt = time;
    const leases = [...this.leases.values()];
    const owner = spreadIndexes(
      leases.map((lease) => lease.name),
      owners,
      leases.map((lease) => lease.seed >>> 0),
    );
    const mine = owners.indexOf(this.owner);
    leases.forEach((lease, i) => {
      // A lease held that the spread gives another member is handed over.
      lease.owned = owner[i] === mine;
      if (!lease.owned && lease.phase === 'competing' && lease.fencingToken !== 0) lease.phase = 'handing';
      else if (lease.owned && lease.phase === 'handing') lease.phase = 'competing';
    });
    this.spreadDone = now();
    this.spreadWait = Math.min(this.interval / 4, 50 * (this.spreadDone - time));
  }

  /** @internal Gives up a lease handed over whose job is idle, for its new owner to take. */
  handOver(lease: Lease): void {
    const { name, fencingToken } = lease;
    // Not held from now on: no tick starts a run while the slot is given back, which the next holder runs.
    lease.phase = 'givingUp';
    lease.holder.leaseLost("handed over: the fleet's spread gives the job to another replica");
    void lease.holder.givingUp().then(() => {
      if (lease.phase === 'givingUp') lease.phase = 'competing';
      if (lease.fencingToken !== fencingToken) return;
      lease.fencingToken = 0;
      return this.giveUp({ name, fencingToken });
    });
  }

  /** Holdings taken or renewed count until `validUntil`: the expiry timer comes then at the latest. */
  private expectExpiry(validUntil: number): void {
    if (validUntil >= this.expiresAt) return;
    this.expiresAt = validUntil;
    this.expiry.armAt(validUntil);
  }

  /**
   * Holdings past their validity are lost, and given up in the store, so that another replica takes them at once
   * (a store that does not answer lets them expire by themselves). None is before `expiresAt`: the leases are
   * looked at only from then, and the timer is armed at the earliest validity of those still held.
   */
  private expire(): void {
    const time = now();
    if (time < this.expiresAt) return;
    let earliest = Infinity;
    for (const lease of this.leases.values()) {
      const { fencingToken, name, validUntil } = lease;
      if (fencingToken === 0) continue;
      if (time < validUntil) earliest = Math.min(earliest, validUntil);
      else {
        this.lose(lease, 'no renewal succeeded before the lease ran out');
        void this.giveUp({ name, fencingToken });
      }
    }
    this.expiresAt = earliest;
    if (earliest === Infinity) this.expiry.cancel();
    else this.expiry.armAt(earliest);
  }

  private lose(lease: Lease, reason: string): void {
    lease.fencingToken = 0;
    if (lease.phase === 'handing' || lease.phase === 'givingUp') lease.phase = 'competing';
    if (lease.phase === 'retired') this.leave(lease);
    lease.holder.leaseLost(reason);
  }

  private stopWhenEmpty(): void {
    if (this.present) return;
    this.beat.cancel();
    this.expiry.cancel();
    this.expiresAt = Infinity;
  }

  /**
   * A job named `name` joins (1) or leaves (-1): the sum of the names' SHA-1 digests, 128 bits in four lanes,
   * goes up or down by its digest. Kept as jobs come and go, as no sort of 100,000 names is.
   */
  private count(name: string, sign: 1 | -1): void {
    const digest = createHash('sha1').update(name).digest();
    for (let lane = 0; lane < 4; lane++) {
      this.names[lane] = (this.names[lane]! + sign * digest.readUInt32LE(lane * 4)) >>> 0;
    }
  }

  /**
   * A digest of the replica's job names: replicas of one version of an application have the same. It is their
   * digests' sum with their count: two sets of names that differ have the same only if the digests of the names
   * in one and not the other add up alike, which names typed by users cannot bring about between versions (the
   * names both have cancel out).
   */
  private jobsDigest(): string {
    if (this.digest === '') {
      const sum = Buffer.alloc(20);
      for (let lane = 0; lane < 4; lane++) sum.writeUInt32LE(this.names[lane]!, lane * 4);
      sum.writeUInt32LE(this.leases.size, 16);
      this.digest = sum.toString('base64url');
    }
    return this.digest;
  }
}
