import { Module } from '@nestjs/common';
import { PeriodicModule } from 'nestjs-periodic';
import { Counter } from './counter.js';

@Module({ imports: [PeriodicModule.forRoot()], providers: [Counter] })
export class AppModule {}
