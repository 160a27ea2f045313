import { Injectable, Logger } from '@nestjs/common';
import { Periodic, PeriodicRegistry } from '../lib/index.js';

/** Reads the jobs' status as an operator would (docs/operations.md serves it over HTTP). */
@Injectable()
export class Operations {
  private readonly logger = new Logger(Operations.name);

  constructor(private readonly registry: PeriodicRegistry) {}

  /** Every 10 s, a line: each job's runs so far and how the last one ended. */
  @Periodic({ every: 10_000, name: 'status-report' })
  report(): void {
    const jobs = this.registry.statusAll().map(({ name, counts, lastFinished }) => {
      const last = lastFinished === null ? '' : ` (last ${lastFinished.reason})`;
      return `${name} ${counts.started}${last}`;
    });
    this.logger.log(`runs so far: ${jobs.join(', ')}`);
  }
}
