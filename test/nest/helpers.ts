import { afterEach } from '@jest/globals';
import type { LoggerService, ModuleMetadata } from '@nestjs/common';
import { Test, type TestingModule } from '@nestjs/testing';
import { PeriodicEvents, type PeriodicEvent, PeriodicRegistry } from '../../lib/index.js';

type Level = 'log' | 'error' | 'warn' | 'debug' | 'verbose' | 'fatal';

/** One line logged through Nest's Logger. */
export interface LogLine {
  level: Level;
  message: string;
  context: string | undefined;
  stack?: string;
}

/** A Nest logger that keeps every line, to assert on what the package logs. */
export class LogCapture implements LoggerService {
  readonly lines: LogLine[] = [];

  log(message: unknown, ...params: unknown[]): void {
    this.keep('log', message, params);
  }
  error(message: unknown, ...params: unknown[]): void {
    this.keep('error', message, params);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.keep('warn', message, params);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.keep('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]): void {
    this.keep('verbose', message, params);
  }
  fatal(message: unknown, ...params: unknown[]): void {
    this.keep('fatal', message, params);
  }

  /** The lines logged with context `Periodic`, as `level: message`. */
  periodic(): string[] {
    return this.lines
      .filter((line) => line.context === 'Periodic')
      .map((line) => `${line.level}: ${line.message}`);
  }

  private keep(level: Level, message: unknown, params: unknown[]): void {
    const context = params.length > 0 ? (params[params.length - 1] as string | undefined) : undefined;
    const stack =
      (level === 'error' || level === 'fatal') && params.length > 1
        ? (params[0] as string | undefined)
        : undefined;
    this.lines.push({ level, message: String(message), context, ...(stack === undefined ? {} : { stack }) });
  }
}

/** An application under test: its module, its registry and emitter, every event, and every log line. */
export interface TestApp {
  moduleRef: TestingModule;
  registry: PeriodicRegistry;
  events: PeriodicEvents;
  /** Every event since the application was compiled. */
  seen: PeriodicEvent[];
  logs: LogCapture;
  /** Initialises the module. An application whose init fails is not closed after the test: Nest 11 rejects
   * close() with the same error, and the jobs of such an application never started. */
  init(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Compiles a testing module (and initialises it unless `init: false`); every application the calling file
 * creates is closed after each test, if the test did not close it.
 */
export function useApps(): (metadata: ModuleMetadata, options?: { init?: boolean }) => Promise<TestApp> {
  const open = new Set<TestApp>();
  afterEach(async () => {
    for (const app of open) await app.close();
  });
  return async (metadata, { init = true } = {}) => {
    const logs = new LogCapture();
    const moduleRef = await Test.createTestingModule(metadata).setLogger(logs).compile();
    const events = moduleRef.get(PeriodicEvents);
    const seen: PeriodicEvent[] = [];
    events.on('*', (event) => seen.push(event));
    let closed: Promise<void> | undefined;
    const app: TestApp = {
      moduleRef,
      registry: moduleRef.get(PeriodicRegistry),
      events,
      seen,
      logs,
      init: async () => {
        try {
          await moduleRef.init();
        } catch (error) {
          open.delete(app);
          throw error;
        }
      },
      close: () => {
        open.delete(app);
        return (closed ??= moduleRef.close());
      },
    };
    open.add(app);
    if (init) await app.init();
    return app;
  };
}

/** The types of the events seen, without `nextTick`, e.g. `['started', 'finished']`. */
export function typesOf(events: PeriodicEvent[]): string[] {
  return events.filter((event) => event.type !== 'nextTick').map((event) => event.type);
}

/** Polls `check` until it returns a value other than undefined; fails after `ms`. */
export async function until<T>(check: () => T | undefined | Promise<T | undefined>, ms = 10_000): Promise<T> {
  const end = performance.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (performance.now() > end) throw new Error(`not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
