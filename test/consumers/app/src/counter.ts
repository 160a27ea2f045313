import { Injectable, Logger, type OnApplicationShutdown } from '@nestjs/common';
import { Periodic, type PeriodicContext } from 'nestjs-periodic';

@Injectable()
export class Counter implements OnApplicationShutdown {
  private readonly logger = new Logger(Counter.name);
  count = 0;

  @Periodic({ every: 100, onOverlap: 'ignore' })
  async increment({ jobId }: PeriodicContext): Promise<void> {
    this.count += 1;
    this.logger.log(`run ${jobId} counted to ${this.count}`);
  }

  onApplicationShutdown(signal?: string): void {
    this.logger.log(`shut down on ${signal} after ${this.count} runs`);
  }
}
