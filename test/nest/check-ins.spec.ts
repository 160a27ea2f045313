// Check-ins (SPEC 25, docs/alerts.md) against a local HTTP server standing for the monitor: the paths and bodies of
// the pings, the module's `checkIns` and a job's `checkIn` over it, `send` instead of HTTP, a monitor that hangs or
// refuses (the runs are not delayed; the failures are logged once), and the checks of the options.
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  Periodic,
  type PeriodicCheckInEvent,
  PeriodicConfigError,
  type PeriodicContext,
  PeriodicModule,
  PeriodicScheduler,
} from '../../lib/index.js';
import { until, useApps } from './helpers.js';

interface Ping {
  path: string;
  body: string;
  at: number;
}

/** The monitor: records each ping; `hang` leaves requests unanswered, `status` answers with it. */
const monitor = { pings: [] as Ping[], hang: false, status: 200 };
let server: Server;
let base: string;

beforeAll(async () => {
  server = createServer((request: IncomingMessage, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    request.on('end', () => {
      monitor.pings.push({ path: `${request.method} ${request.url}`, body, at: Date.now() });
      if (monitor.hang) return;
      response.statusCode = monitor.status;
      response.end('OK');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});
afterEach(() => {
  monitor.pings = [];
  monitor.hang = false;
  monitor.status = 200;
});

describe('check-ins', () => {
  const createApp = useApps();

  @Injectable()
  class Jobs {
    calls = 0;

    @Periodic({ every: 200, name: 'ok' })
    ok(): void {}

    @Periodic({ every: 200, name: 'failing' })
    failing(): void {
      throw new TypeError('the feed answered 503');
    }

    @Periodic({ every: 200, name: 'quiet', checkIn: false })
    quiet(): void {}

    @Periodic({ every: 200, name: 'own', checkIn: { url: 'http://127.0.0.1:1/never' } })
    own(ctx: PeriodicContext): Promise<void> {
      return new Promise((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    }
  }

  const paths = (name: string) => monitor.pings.filter((ping) => ping.path.includes(`/ping/${name}`));

  it('each run pings <url>/start, then <url> or <url>/fail with the error; checkIn false sends none', async () => {
    const app = await createApp({
      imports: [
        PeriodicModule.forRoot({
          logger: false,
          checkIns: { url: (job) => (job.name === 'own' ? undefined : `${base}/ping/${job.name}`) },
          jobs: { own: { checkIn: false } },
        }),
      ],
      providers: [Jobs],
    });
    await until(() => (paths('ok').length >= 4 && paths('failing').length >= 4 ? true : undefined));
    await app.close();
    // Each run's end comes after its start: at every point the monitor has had no more ends than starts. (The
    // next run's start may come before an end, when a ping takes longer than the job's interval.)
    const inOrder = (pings: { path: string }[]) =>
      pings.every(
        (_, i) => pings.slice(0, i + 1).filter(({ path }) => path.endsWith('/start')).length * 2 >= i + 1,
      );
    const ok = paths('ok');
    expect(ok[0]).toEqual({ path: 'POST /ping/ok/start', body: '', at: expect.any(Number) });
    expect(ok).toContainEqual({ path: 'POST /ping/ok', body: '', at: expect.any(Number) });
    expect(inOrder(ok)).toBe(true);
    const failing = paths('failing');
    expect(failing[0]).toEqual({ path: 'POST /ping/failing/start', body: '', at: expect.any(Number) });
    expect(failing).toContainEqual({
      path: 'POST /ping/failing/fail',
      body: 'TypeError: the feed answered 503',
      at: expect.any(Number),
    });
    expect(inOrder(failing)).toBe(true);
    expect(paths('quiet')).toEqual([]);
  });

  it("with errors: 'name', a failed run's ping says only the error's class", async () => {
    const app = await createApp({
      imports: [
        PeriodicModule.forRoot({ logger: false, errors: 'name', checkIns: { url: `${base}/ping/all` } }),
      ],
      providers: [Jobs],
    });
    await until(() => (monitor.pings.some((ping) => ping.path === 'POST /ping/all/fail') ? true : undefined));
    await app.close();
    expect(monitor.pings.find((ping) => ping.path === 'POST /ping/all/fail')?.body).toBe('TypeError');
  });

  it('a monitor that hangs delays no run; one that refuses is tried once more, and logged once', async () => {
    monitor.hang = true;
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ checkIns: { url: (job) => `${base}/ping/${job.name}` } })],
      providers: [Jobs],
    });
    const finished = () => app.seen.filter((event) => event.type === 'finished' && event.name === 'ok');
    await until(() => (finished().length >= 5 ? true : undefined));
    // Runs of a job that returns at once, each well under the monitor's 5 s.
    for (const event of finished()) expect(event).toMatchObject({ reason: 'normal' });
    expect(finished().every((event) => (event as { durationMs: number }).durationMs < 1000)).toBe(true);
    // The job of its own monitor: nothing listens there, each ping refused, then again.
    await until(() =>
      app.logs.periodic().some((line) => line.startsWith('warn: the check-ins of own fail'))
        ? true
        : undefined,
    );
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(app.logs.periodic().filter((line) => line.includes('the check-ins of own fail'))).toHaveLength(1);
    await app.close();
  });

  it('send replaces the pings: each event with its job, run, kind and slot; one that throws changes nothing', async () => {
    const events: PeriodicCheckInEvent[] = [];
    let calls = 0;
    const scheduler = new PeriodicScheduler(
      {
        name: 'job',
        every: 100,
        checkIn: {
          send: (event) => {
            events.push(event);
            if (++calls % 3 === 0) throw new Error('the vendor is down');
          },
        },
        run: ({ jobId }) => {
          if (jobId === 2) throw new Error('second');
        },
      },
      undefined,
      { checkIns: { module: undefined, reports: { failed: () => undefined } } },
    );
    scheduler.start();
    await until(() => (events.filter((event) => event.kind !== 'start').length >= 3 ? true : undefined));
    await scheduler.stop();
    const first = events.filter((event) => event.jobId === 1);
    expect(first[0]).toEqual({ name: 'job', jobId: 1, kind: 'start', slot: expect.any(Date) });
    expect(first.at(-1)).toEqual({ name: 'job', jobId: 1, kind: 'success', slot: first[0].slot });
    expect(events.find((event) => event.jobId === 2 && event.kind === 'fail')).toEqual({
      name: 'job',
      jobId: 2,
      kind: 'fail',
      slot: expect.any(Date),
      error: 'Error: second',
    });
    expect(scheduler.status().counts.error).toBe(1);
  });

  it('checks the options: an address that is not http(s), has a query, or a url function that returns one', async () => {
    const made = (checkIn: unknown) => () =>
      new PeriodicScheduler({ name: 'job', every: 1000, checkIn: checkIn as never, run: () => undefined });
    expect(made({ url: 'ftp://monitor.example/ping' })).toThrow(
      /"checkIn" must be \{ url: .*, got \{ url: 'ftp:\/\/monitor.example\/ping' \}: its scheme is ftp:/,
    );
    expect(made({ url: 'https://hc-ping.com/abc?x=1' })).toThrow(/it has a query or a fragment/);
    expect(made({ url: 'https://a.example', send: () => undefined })).toThrow(PeriodicConfigError);
    expect(made(true)).toThrow(/"checkIn" must be/);
    await expect(
      createApp({
        imports: [PeriodicModule.forRoot({ checkIns: { url: () => 'not a url' } })],
        providers: [Jobs],
      }),
    ).rejects.toThrow(
      /checkIns\.url\(job\) must return an http\(s\) URL without a query, or undefined for none, got "not a url"/,
    );
    expect(() => PeriodicModule.forRoot({ checkIns: { mail: 'ops' } as never })).toThrow(
      /"checkIns" must be \{ url: \(job\) => .*, got \{ mail: 'ops' \}/,
    );
  });
});
