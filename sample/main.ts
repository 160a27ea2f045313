// A Nest application with a few periodic jobs that show fixed-rate and fixed-delay ticks, a guard, the
// overlap policies, a timeout and a run that honours its signal. The log says what happens, in the words of
// the package's logger. Ctrl-C (or SIGTERM) closes the application gracefully: ticking stops, the runs in
// flight see their signal aborted and end, the store disconnects after them, and the process exits.
import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.createApplicationContext(AppModule, {
    logger: ['log', 'warn', 'error', 'debug'],
  });
  app.enableShutdownHooks();
  new Logger('Sample').log('the jobs are running; press Ctrl-C to stop them gracefully');
}

void bootstrap();
