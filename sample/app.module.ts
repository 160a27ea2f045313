import { Module } from '@nestjs/common';
import { PeriodicModule } from '../lib/index.js';
import { Jobs } from './jobs.js';
import { replicas } from './replicas.js';
import { Store } from './store.js';

// With REDIS_URL, the application can run as several replicas: the "digest" job runs in one of them at a time.
const shared = process.env.REDIS_URL === undefined ? undefined : replicas;

@Module({
  imports: shared?.imports ?? [PeriodicModule.forRoot()],
  providers: [Store, Jobs, ...(shared?.providers ?? [])],
})
export class AppModule {}
