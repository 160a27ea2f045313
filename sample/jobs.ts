import { Injectable, Logger } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';
import { Periodic, type PeriodicContext } from '../lib/index.js';
import { Store } from './store.js';

/** Pretends to call a remote service that takes `ms`, and stops as soon as the run's signal is aborted. */
const remoteCall = (ms: number, signal: AbortSignal) => sleep(ms, undefined, { signal });

@Injectable()
export class Jobs {
  private readonly logger = new Logger(Jobs.name);
  /** Read by the guard of `officeHours`. */
  private open = true;

  constructor(private readonly store: Store) {}

  /** Fixed rate: starts every second on a grid that never drifts, whatever each run takes. */
  @Periodic({ every: 1000, name: 'heartbeat' })
  heartbeat(): void {}

  /** Fixed delay: the next run comes 2 s after the previous one has ended. */
  @Periodic({ every: 2000, delayMode: 'shifted', name: 'report' })
  async report({ signal }: PeriodicContext): Promise<void> {
    await this.store.write(1, 800, signal);
  }

  /**
   * A calendar schedule: every 10 seconds of the wall clock in Berlin's zone, each run 0 to 2 s after its slot
   * (jitter), so that many replicas do not all start at once.
   */
  @Periodic({ cron: '*/10 * * * * *', timezone: 'Europe/Berlin', jitter: 2000, name: 'berlin-clock' })
  berlinClock({ scheduledDate }: PeriodicContext): void {
    const slot = scheduledDate.toLocaleTimeString('de-DE', { timeZone: 'Europe/Berlin' });
    this.logger.log(`the slot of ${slot} (Berlin) has come`);
  }

  /** A guard, given the provider instance: runs only while `open`, which flips every 5 s. */
  @Periodic({ every: 1000, name: 'office-hours', when: (self: Jobs) => self.open })
  officeHours(): void {}

  @Periodic({ every: 5000, name: 'office-clock' })
  flipOpen(): void {
    this.open = !this.open;
    this.logger.log(`the office is ${this.open ? 'open' : 'closed'}`);
  }

  /** Overlap 'ignore': a run takes 2.5 s, so the ticks in between are skipped. */
  @Periodic({ every: 1000, onOverlap: 'ignore', name: 'import' })
  async import({ signal }: PeriodicContext): Promise<void> {
    await remoteCall(2500, signal);
  }

  /** Overlap 'stopPrevious': each tick aborts the run still going and starts a fresh one. */
  @Periodic({ every: 3000, onOverlap: 'stopPrevious', name: 'feed-sync' })
  async feedSync({ signal }: PeriodicContext): Promise<void> {
    await remoteCall(4000, signal);
  }

  /**
   * A timeout, and a run that honours its signal: after 1.5 s the signal is aborted; the run then rolls back
   * what it wrote, with the store still connected, even when the signal comes from Ctrl-C.
   */
  @Periodic({ every: 4000, timeout: 1500, name: 'export' })
  async export({ signal, jobId }: PeriodicContext): Promise<void> {
    try {
      await this.store.write(10, 3000, signal);
    } catch (error) {
      if (!signal.aborted) throw error;
      this.logger.warn(`export #${jobId} was stopped (${(signal.reason as Error).message}); rolling back`);
      await sleep(200);
      await this.store.write(-10, 0, new AbortController().signal);
      this.logger.warn(`export #${jobId} rolled back`);
    }
  }
}
