import { Injectable, Logger, type OnModuleDestroy, type OnModuleInit } from '@nestjs/common';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Stands for a database: it connects asynchronously when the application starts and disconnects when it
 * stops. The jobs that use it start only once it is connected and are drained before it disconnects.
 */
@Injectable()
export class Store implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger(Store.name);
  private connected = false;
  private rows = 0;

  async onModuleInit(): Promise<void> {
    await sleep(500);
    this.connected = true;
    this.logger.log('connected');
  }

  onModuleDestroy(): void {
    this.connected = false;
    this.logger.log('disconnected');
  }

  /** Writes `count` rows, taking `ms`; stops early when `signal` is aborted. */
  async write(count: number, ms: number, signal: AbortSignal): Promise<number> {
    if (!this.connected) throw new Error('the store is not connected');
    await sleep(ms, undefined, { signal });
    this.rows += count;
    return this.rows;
  }
}
