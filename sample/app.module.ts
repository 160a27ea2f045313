import { Module } from '@nestjs/common';
import { PeriodicModule } from '../lib/index.js';
import { Jobs } from './jobs.js';
import { Store } from './store.js';

@Module({ imports: [PeriodicModule.forRoot()], providers: [Store, Jobs] })
export class AppModule {}
