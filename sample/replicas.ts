import { setTimeout as sleep } from 'node:timers/promises';
import { Injectable, Logger, Module, type OnApplicationShutdown } from '@nestjs/common';
import { Redis } from 'ioredis';
import {
  Periodic,
  type PeriodicContext,
  PeriodicModule,
  type PeriodicModuleOptions,
  RedisCoordinator,
} from '../lib/index.js';

/**
 * The Redis connection shared by the replicas. It is closed on application shutdown, which comes after every
 * job has drained and released its lease.
 */
@Injectable()
export class RedisConnection implements OnApplicationShutdown {
  // Failures are logged by the coordinator, at most once per lease period; this keeps ioredis from printing
  // each failed reconnection as well.
  readonly client = new Redis(process.env.REDIS_URL!, { maxRetriesPerRequest: 1, commandTimeout: 3000 }).on(
    'error',
    () => undefined,
  );

  // quit() waits for Redis to answer, which a Redis that is down never does: a second, then the cut.
  async onApplicationShutdown(): Promise<void> {
    await Promise.race([this.client.quit().catch(() => undefined), sleep(1000)]);
    this.client.disconnect();
  }
}

@Module({ providers: [RedisConnection], exports: [RedisConnection] })
class RedisModule {}

/** Runs in one replica at a time: start the sample twice and only the holder of the lease logs the digest. */
@Injectable()
export class Digest {
  private readonly logger = new Logger(Digest.name);

  @Periodic({ every: 3000, exclusive: true, name: 'digest' })
  send({ fencingToken }: PeriodicContext): void {
    this.logger.log(`replica ${process.pid} sends the digest, fencing token ${fencingToken}`);
  }
}

/** The periodic module with a Redis coordinator, and the exclusive job. */
export function replicas(options: Pick<PeriodicModuleOptions, 'logger'>) {
  return {
    imports: [
      RedisModule,
      PeriodicModule.forRootAsync({
        imports: [RedisModule],
        inject: [RedisConnection],
        useFactory: (redis: RedisConnection) => ({
          ...options,
          coordinator: new RedisCoordinator({
            client: redis.client,
            keyPrefix: 'periodic-sample:',
            leaseMs: 3000,
          }),
        }),
      }),
    ],
    providers: [Digest],
  };
}
