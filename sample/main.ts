// A Nest application with a few periodic jobs that show fixed-rate and fixed-delay ticks, a guard, the
// overlap policies, a timeout and a run that honours its signal. The log says what happens, in the words of
// the package's logger. Ctrl-C (or SIGTERM, to this process or to the `npm start` that started it, which
// hands it on: the start script execs node) closes the application gracefully: ticking stops, the runs in
// flight see their signal aborted and end, the store disconnects after them, and the process exits.
// With REDIS_URL set, it also has an exclusive job: start it in two terminals and one of them runs it; stop
// that one and the other takes over. The dashboard is at the address the log prints (port PORT, default 3000,
// or any free port when that one is taken).
import 'reflect-metadata';
import { Logger } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { AppModule } from './app.module.js';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: ['log', 'warn', 'error', 'debug'] });
  app.enableShutdownHooks();
  const logger = new Logger('Sample');
  const port = Number(process.env.PORT ?? 3000);
  await app.listen(port, '127.0.0.1').catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EADDRINUSE' || process.env.PORT !== undefined) throw error;
    logger.warn(`port ${port} is taken: listening on a free port instead`);
    return app.listen(0, '127.0.0.1');
  });
  const url = (await app.getUrl()).replace('[::1]', 'localhost').replace('127.0.0.1', 'localhost');
  logger.log(`the dashboard is at ${url}/periodic (open to anyone here: development only)`);
  logger.log('the jobs are running; press Ctrl-C to stop them gracefully');
  if (process.env.REDIS_URL === undefined) {
    logger.log('set REDIS_URL (e.g. redis://127.0.0.1:6379) and start two of me to see an exclusive job');
  }
}

void bootstrap();
