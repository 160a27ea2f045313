import { Module } from '@nestjs/common';
import { PeriodicModule, type PeriodicModuleOptions } from '../lib/index.js';
import { PeriodicDashboardModule } from '../lib/dashboard/index.js';
import { Jobs } from './jobs.js';
import { Operations } from './operations.js';
import { replicas } from './replicas.js';
import { Store } from './store.js';

// A healthy run logs nothing by default; the sample shows the original's run lines, at debug level.
const options: PeriodicModuleOptions = { logger: { started: 'debug', finished: 'debug' } };

// With REDIS_URL, the application can run as several replicas: the "digest" job runs in one of them at a time.
const shared = process.env.REDIS_URL === undefined ? undefined : replicas(options);

/**
 * The dashboard at /periodic. DEVELOPMENT ONLY: this `access` lets anyone who reaches the port see and operate
 * every job. An application decides from the request, as a guard does, e.g.
 * `access: (req) => (req.user?.roles.includes('ops') ? 'operate' : 'none')`.
 */
const dashboard = PeriodicDashboardModule.forRoot({
  access: () => 'operate',
  actor: () => 'sample-user',
});

@Module({
  imports: [...(shared?.imports ?? [PeriodicModule.forRoot(options)]), dashboard],
  providers: [Store, Jobs, Operations, ...(shared?.providers ?? [])],
})
export class AppModule {}
