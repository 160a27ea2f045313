import { randomUUID } from 'node:crypto';
import { CoordinatorCalls, type PeriodicFleetSchedule, type StoreLog } from './coordinator-port.js';
import { DeadlineTimer, now } from './deadline-timer.js';
import { messageOf } from './errors.js';

/**
 * Told when the lease is taken, with the job's schedule as the store keeps it, and when it is lost; a lease
 * released on purpose is not "lost".
 */
export interface LeaseHolder {
  leaseAcquired(fencingToken: number, schedule: PeriodicFleetSchedule | null): void;
  leaseLost(reason: string): void;
}

/**
 * One job's lease as one replica sees it. It tries to acquire the lease every `leaseMs / 3`, with jitter, and
 * renews it every `leaseMs / 3` while it holds it. It counts the lease valid until `sent + leaseMs − margin`
 * on its own monotonic clock, `sent` being read before the command that took or renewed it went out, so it
 * stops holding before the store lets the lease expire; a holder whose validity ran out while it was paused
 * renews nothing and gives the lease up. One command is in flight at a time, but for the writes of the
 * job's schedule. Whether the lease is held is answered from memory.
 */
export class Lease {
  /** The fencing token of the current holding; 0 while the lease is not held. */
  fencingToken = 0;
  private token = '';
  private validUntil = 0;
  /** `retired`: acquires no more, renews what it holds until released. `released`: done. */
  private phase: 'competing' | 'retired' | 'released' = 'competing';
  private inFlight = false;
  /** The next acquire or renew. */
  private readonly step = new DeadlineTimer({ onDeadline: () => this.nextStep() });
  private readonly expiry = new DeadlineTimer({
    onDeadline: () => this.lose('no renewal succeeded before the lease ran out'),
  });
  private readonly store: CoordinatorCalls;
  private readonly interval: number;
  private readonly margin: number;

  constructor(
    store: StoreLog,
    private readonly name: string,
    private readonly holder: LeaseHolder,
  ) {
    this.store = new CoordinatorCalls(store);
    this.interval = this.store.leaseMs / 3;
    this.margin = this.store.leaseMs / 10;
  }

  /** Whether this replica holds the lease now: acquired, and not yet past its validity. */
  get held(): boolean {
    return this.fencingToken !== 0 && now() < this.validUntil;
  }

  /** Tries to acquire the lease at once, and keeps at it. */
  start(): void {
    this.nextStep();
  }

  /** Acquires no more; a lease held now is still renewed, until `release()`. */
  retire(): void {
    if (this.phase === 'competing') this.phase = 'retired';
    if (this.fencingToken === 0) this.step.cancel();
  }

  /**
   * Stops for good and gives the lease up in the store if it is held, once `after` has settled (the last
   * write of the job's schedule), so that another replica takes over without waiting for it to expire.
   * Resolves when the store has answered, or after `leaseMs / 3` if it does not.
   */
  release(after?: Promise<unknown>): Promise<void> {
    this.phase = 'released';
    this.step.cancel();
    this.expiry.cancel();
    if (this.fencingToken === 0) {
      this.store.silence();
      return Promise.resolve();
    }
    const { token } = this;
    return new Promise((resolve) => {
      // A failed release was reported; the lease then expires by itself. Whatever the store answers after
      // this, the replica has moved on (its application has closed): it is not reported.
      const done = () => {
        timer.cancel();
        this.store.silence();
        resolve();
      };
      const timer = new DeadlineTimer({ onDeadline: done });
      timer.armAt(now() + this.interval);
      const release = () => {
        this.fencingToken = 0;
        this.store.release(this.name, token).then(done, done);
      };
      Promise.resolve(after).then(release, release);
    });
  }

  private nextStep(): void {
    if (this.phase === 'released') return;
    // A command still out (the store slow or away) is waited for; the expiry timer ends a holding meanwhile.
    if (this.inFlight) return this.retry();
    if (this.fencingToken === 0) {
      if (this.phase === 'competing') void this.acquire();
    } else if (now() < this.validUntil) {
      this.renew();
    } else {
      // The process was paused past the lease's validity: renewing now could extend a lease that another
      // replica may by now consider free. It gives the lease up instead, so that another one takes it at once.
      const { token } = this;
      this.lose(
        'the lease ran out before it could be renewed (the process was paused or its event loop blocked)',
      );
      this.store.release(this.name, token).catch(() => undefined);
    }
  }

  /** Takes the lease, then reads the job's schedule: the replica holds the lease once it knows both. */
  private async acquire(): Promise<void> {
    const token = randomUUID();
    const sent = now();
    this.inFlight = true;
    let fencingToken = 0;
    let schedule: PeriodicFleetSchedule | null = null;
    try {
      fencingToken = await this.store.acquire(this.name, token);
      if (fencingToken !== 0) schedule = await this.store.readSchedule(this.name);
    } catch {
      // A failure was reported. A lease taken without its schedule is given back.
      this.inFlight = false;
      if (fencingToken !== 0) this.store.release(this.name, token).catch(() => undefined);
      return this.retry();
    }
    this.inFlight = false;
    if (fencingToken === 0) return this.retry();
    if (this.phase !== 'competing' || now() >= sent + this.store.leaseMs - this.margin) {
      // Taken after this replica stopped competing, or answered too late to be trusted: given back.
      this.store.release(this.name, token).catch(() => undefined);
      return this.retry();
    }
    this.token = token;
    this.fencingToken = fencingToken;
    this.hold(sent);
    this.holder.leaseAcquired(fencingToken, schedule);
  }

  /**
   * Stores the job's schedule, if this replica holds the lease: resolves whether the store took it. A failure
   * is reported, and resolves false.
   */
  async writeSchedule(schedule: PeriodicFleetSchedule): Promise<boolean> {
    if (!this.held) return false;
    return this.store.writeSchedule(this.name, this.token, this.fencingToken, schedule).catch(() => false);
  }

  private renew(): void {
    const { token } = this;
    const sent = now();
    this.inFlight = true;
    this.store.renew(this.name, token).then(
      (renewed) => {
        this.inFlight = false;
        if (!this.holds(token)) return;
        if (renewed) this.hold(sent);
        else this.lose('the store refused the renewal: the lease had expired or another replica holds it');
      },
      (error: unknown) => {
        this.inFlight = false;
        if (!this.holds(token)) return;
        this.lose(`the renewal failed: ${messageOf(error)}`);
      },
    );
  }

  /** Whether the holding that `token` started is still the current one. */
  private holds(token: string): boolean {
    return this.fencingToken !== 0 && this.token === token;
  }

  private hold(sent: number): void {
    this.validUntil = sent + this.store.leaseMs - this.margin;
    this.expiry.armAt(this.validUntil);
    this.step.armAt(sent + this.interval);
  }

  private lose(reason: string): void {
    if (this.fencingToken === 0) return;
    this.fencingToken = 0;
    this.expiry.cancel();
    this.step.cancel();
    this.holder.leaseLost(reason);
    this.retry();
  }

  /** The next acquire comes between 0.7 and 0.95 of `leaseMs / 3` from now, so replicas spread out. */
  private retry(): void {
    if (this.phase !== 'competing' && this.fencingToken === 0) return;
    this.step.armAt(now() + this.interval * (0.7 + 0.25 * Math.random()));
  }
}
