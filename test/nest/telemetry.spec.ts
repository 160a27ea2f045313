// OpenTelemetry (docs/health-and-telemetry.md): the real SDK, recording into in-memory exporters, with the
// AsyncLocalStorage context manager; spans and metrics of runs with `telemetry: true`.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { context, metrics, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  AggregationTemporality,
  type DataPoint,
  type Histogram,
  MeterProvider,
  MetricReader,
} from '@opentelemetry/sdk-metrics';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { InMemoryCoordinator, PeriodicConfigError, PeriodicEvents, PeriodicModule } from '../../lib/index.js';
import { openTelemetry } from '../../lib/nest/open-telemetry.js';
import { honouringRun, stuckRun } from '../scheduler/helpers.js';
import { useApps } from './helpers.js';

/** A reader that collects when asked. */
class Reader extends MetricReader {
  constructor() {
    super({ aggregationTemporalitySelector: () => AggregationTemporality.CUMULATIVE });
  }
  protected onForceFlush(): Promise<void> {
    return Promise.resolve();
  }
  protected onShutdown(): Promise<void> {
    return Promise.resolve();
  }
}

const spans = new InMemorySpanExporter();
const reader = new Reader();
const contextManager = new AsyncLocalStorageContextManager();

beforeAll(() => {
  context.setGlobalContextManager(contextManager.enable());
  trace.setGlobalTracerProvider(
    new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }),
  );
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
});

afterAll(() => {
  trace.disable();
  metrics.disable();
  context.disable();
});

/** The data points of a metric, by the attributes named, e.g. `{ 'fail|error': 2 }`. */
async function points(name: string, keys: string[]): Promise<Record<string, DataPoint<unknown>>> {
  const { resourceMetrics } = await reader.collect();
  const found: Record<string, DataPoint<unknown>> = {};
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      if (metric.descriptor.name !== name) continue;
      for (const point of metric.dataPoints as DataPoint<unknown>[]) {
        found[keys.map((key) => point.attributes[key]).join('|')] = point;
      }
    }
  }
  return found;
}

const ofJob = (name: string) => (span: ReadableSpan) => span.name === `periodic ${name}`;

describe('telemetry: true', () => {
  const createApp = useApps();

  it('a span per run, named and with attributes, its status set by the exit reason', async () => {
    spans.reset();
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false, telemetry: true })],
    });
    const { registry } = app;
    registry.add('ok', () => undefined, { every: 1000 });
    registry.add('fail', () => Promise.reject(new Error('disk full')), { every: 1000 });
    registry.add('slow', stuckRun, { every: 1000, timeout: 10, jobShutdown: 0 });
    registry.add('latest', honouringRun, { every: 1000, onOverlap: 'stopPrevious' });
    registry.add('drained', honouringRun, { every: 1000 });
    await registry.syncTick('ok');
    await registry.syncTick('fail');
    await registry.syncTick('slow');
    await registry.tick('latest');
    await registry.tick('latest');
    await registry.tick('drained');
    await app.close();
    const ended = spans.getFinishedSpans();
    const reasonOf = (span: ReadableSpan) => span.attributes['periodic.exit_reason'];
    expect(
      ended.map((span) => [span.name, reasonOf(span), span.status.code, span.attributes['periodic.job.id']]),
    ).toEqual([
      ['periodic ok', 'normal', SpanStatusCode.UNSET, 1],
      ['periodic fail', 'error', SpanStatusCode.ERROR, 1],
      ['periodic slow', 'timeout', SpanStatusCode.ERROR, 1],
      ['periodic latest', 'killed', SpanStatusCode.ERROR, 1],
      ['periodic latest', 'shutdown', SpanStatusCode.UNSET, 2],
      ['periodic drained', 'shutdown', SpanStatusCode.UNSET, 1],
    ]);
    const [fail] = ended.filter(ofJob('fail'));
    expect(fail.attributes).toEqual({
      'periodic.job.name': 'fail',
      'periodic.job.id': 1,
      'periodic.exit_reason': 'error',
    });
    expect(fail.events.map((event) => [event.name, event.attributes?.['exception.message']])).toEqual([
      ['exception', 'disk full'],
    ]);
  });

  it("a retry is a span of its own, with its attempt, linked to its slot's first attempt", async () => {
    spans.reset();
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false, telemetry: true })],
    });
    let calls = 0;
    app.registry.add(
      'flaky',
      () => {
        if (++calls === 1) throw new Error('connection reset');
      },
      { every: 60_000, retry: { attempts: 1, backoff: { initial: 10, factor: 1, max: 10 } } },
    );
    await app.registry.syncTick('flaky');
    await app.events.once('finished', (event) => event.name === 'flaky');
    const [first, retry] = spans.getFinishedSpans().filter(ofJob('flaky'));
    expect(first.attributes).not.toHaveProperty('periodic.attempt');
    expect(retry.attributes).toMatchObject({ 'periodic.attempt': 2, 'periodic.exit_reason': 'normal' });
    expect(retry.spanContext().spanId).not.toBe(first.spanContext().spanId);
    expect(retry.links.map((link) => link.context.spanId)).toEqual([first.spanContext().spanId]);
  });

  it('the retries of slots that overlap link each to the first attempt of its own slot', async () => {
    spans.reset();
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false, telemetry: true })],
    });
    const slots = new Map<number, number>();
    app.registry.add(
      'overlapping',
      ({ jobId, scheduledDate }) => {
        slots.set(jobId, scheduledDate.getTime());
        if (slots.size <= 2) throw new Error('connection reset');
      },
      { every: 60_000, retry: { attempts: 1, backoff: { initial: 50, factor: 1, max: 50 } } },
    );
    let retried = 0;
    const bothRetried = new Promise<void>((resolve) =>
      app.events.on('finished', ({ reason }) => {
        if (reason === 'normal' && ++retried === 2) resolve();
      }),
    );
    await app.registry.syncTick('overlapping');
    // The second slot is another millisecond of the wall clock, and fails while the first one's retry waits.
    const first = Date.now();
    while (Date.now() === first) await new Promise((resolve) => setTimeout(resolve, 1));
    await app.registry.syncTick('overlapping');
    await bothRetried;
    const ended = spans.getFinishedSpans().filter(ofJob('overlapping'));
    const slotOf = (span: ReadableSpan) => slots.get(span.attributes['periodic.job.id'] as number);
    const retries = ended.filter((span) => span.attributes['periodic.attempt'] === 2);
    // Each retry's span links to the span whose run had the retry's slot (the retries may come in either order).
    const linked = retries.map((retry) => [
      slotOf(retry),
      ...retry.links.map(({ context }) =>
        slotOf(ended.find((span) => span.spanContext().spanId === context.spanId)!),
      ),
    ]);
    expect(linked).toHaveLength(2);
    expect(new Set(linked.map(([slot]) => slot)).size).toBe(2);
    for (const [slot, ...links] of linked) expect(links).toEqual([slot]);
  });

  it("the run's span is active while its code runs: a span started there, even after an await, is its child", async () => {
    spans.reset();
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false, telemetry: true })],
    });
    app.registry.add(
      'query',
      async () => {
        await new Promise((resolve) => setTimeout(resolve, 1));
        trace.getTracer('db').startSpan('SELECT').end();
      },
      { every: 1000 },
    );
    await app.registry.syncTick('query');
    const [query] = spans.getFinishedSpans().filter((span) => span.name === 'SELECT');
    const [run] = spans.getFinishedSpans().filter(ofJob('query'));
    expect(query.parentSpanContext?.spanId).toBe(run.spanContext().spanId);
    expect(query.spanContext().traceId).toBe(run.spanContext().traceId);
    // Outside the run no span is active.
    expect(trace.getActiveSpan()).toBeUndefined();
  });

  it('an exclusive run: its span has the fencing token, and ends leaseLost with status error', async () => {
    spans.reset();
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false, coordinator, telemetry: true })],
    });
    app.registry.add('lease', honouringRun, { every: 1000, exclusive: true });
    const { fencingToken } = await app.events.once('leaseAcquired');
    await app.registry.tick('lease');
    const finished = app.events.once('finished');
    coordinator.renew = () => Promise.resolve(false);
    await finished;
    const [span] = spans.getFinishedSpans().filter(ofJob('lease'));
    expect(span.attributes).toMatchObject({
      'periodic.fencing_token': fencingToken,
      'periodic.exit_reason': 'leaseLost',
    });
    expect(span.status.code).toBe(SpanStatusCode.ERROR);
  });

  it('the metrics: runs by job and exit reason, durations, lateness, missed ticks', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false, telemetry: true })],
    });
    const { registry } = app;
    let fail = false;
    registry.add(
      'counted',
      () => {
        if (fail) throw new Error('disk full');
      },
      { every: 1000 },
    );
    let release: (value: boolean) => void = () => undefined;
    registry.add('guarded', () => undefined, {
      every: 1000,
      when: () => new Promise<boolean>((resolve) => (release = resolve)),
    });
    const before = await points('periodic.runs', ['periodic.job.name', 'periodic.exit_reason']);
    const count = (key: string, found: Record<string, DataPoint<unknown>>) =>
      (found[key]?.value as number) ?? 0;
    await registry.syncTick('counted');
    await registry.syncTick('counted');
    fail = true;
    await registry.syncTick('counted');
    // A tick while the guard of the previous one is pending is missed.
    const pending = registry.tick('guarded');
    await registry.tick('guarded');
    await registry.tick('guarded');
    release(false);
    await pending;

    const runs = await points('periodic.runs', ['periodic.job.name', 'periodic.exit_reason']);
    expect(count('counted|normal', runs) - count('counted|normal', before)).toBe(2);
    expect(count('counted|error', runs) - count('counted|error', before)).toBe(1);
    const durations = await points('periodic.run.duration', ['periodic.job.name', 'periodic.exit_reason']);
    expect((durations['counted|normal'].value as Histogram).count).toBeGreaterThanOrEqual(2);
    expect((durations['counted|normal'].value as Histogram).sum).toBeLessThan(1);
    const lateness = await points('periodic.tick.lateness', ['periodic.job.name']);
    expect((lateness.counted.value as Histogram).count).toBeGreaterThanOrEqual(3);
    const missed = await points('periodic.ticks.missed', ['periodic.job.name']);
    expect(missed.guarded.value).toBe(2);
    const { resourceMetrics } = await reader.collect();
    const descriptors = resourceMetrics.scopeMetrics
      .flatMap((scope) => scope.metrics)
      .map(({ descriptor }) => [descriptor.name, descriptor.unit]);
    expect(descriptors).toEqual(
      expect.arrayContaining([
        ['periodic.runs', '{run}'],
        ['periodic.run.duration', 's'],
        ['periodic.tick.lateness', 's'],
        ['periodic.ticks.missed', '{tick}'],
      ]),
    );
  });

  it('periodic.incidents.open goes up by job and kind when an incident opens, and down when it closes', async () => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false, telemetry: true })],
    });
    let failing = true;
    app.registry.add(
      'flaky',
      () => {
        if (failing) throw new Error('down');
      },
      { every: 1000 },
    );
    const open = async () =>
      (await points('periodic.incidents.open', ['periodic.job.name', 'periodic.incident.kind']))[
        'flaky|failing'
      ]?.value;
    for (let run = 0; run < 3; run++) await app.registry.syncTick('flaky');
    expect(await open()).toBe(1);
    failing = false;
    await app.registry.syncTick('flaky');
    expect(await open()).toBe(0);
  });

  it('periodic.checkins.failed counts the check-ins that failed after their retry, by job', async () => {
    const app = await createApp({
      imports: [
        PeriodicModule.forRoot({
          mode: 'manual',
          logger: false,
          telemetry: true,
          checkIns: {
            send: () => {
              throw new Error('the monitor is down');
            },
          },
        }),
      ],
    });
    app.registry.add('pinged', () => undefined, { every: 1000 });
    await app.registry.syncTick('pinged');
    const failed = async () =>
      (await points('periodic.checkins.failed', ['periodic.job.name'])).pinged?.value;
    for (let waited = 0; (await failed()) !== 2 && waited < 5000; waited += 20) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // The start and the end of the run, each sent twice.
    expect(await failed()).toBe(2);
  });

  it("a scheduled run starts a trace of its own, whatever context armed the job's timer", async () => {
    spans.reset();
    const app = await createApp({ imports: [PeriodicModule.forRoot({ logger: false, telemetry: true })] });
    app.registry.add('early', () => undefined, { every: 20 });
    await app.events.once('finished', (event) => event.name === 'early');
    // A job added while a request is handled, due before the other: the process's timer is armed again there.
    trace.getTracer('http').startActiveSpan('POST /jobs', (request) => {
      app.registry.add('added', () => undefined, { every: 5 });
      request.end();
    });
    for (let runs = 0; runs < 3; runs++) {
      await app.events.once('finished', (event) => event.name === 'early');
    }
    await app.close();
    const runs = spans.getFinishedSpans().filter((span) => span.name.startsWith('periodic '));
    expect(runs.length).toBeGreaterThan(4);
    expect(runs.map((span) => span.parentSpanContext?.spanId)).toEqual(runs.map(() => undefined));
  });

  it('OpenTelemetry failing (a span processor that throws) is logged once and changes nothing of the runs', async () => {
    trace.disable();
    const broken = {
      onStart: () => {
        throw new Error('processor onStart');
      },
      onEnd: () => undefined,
      forceFlush: () => Promise.resolve(),
      shutdown: () => Promise.resolve(),
    };
    trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [broken] }));
    try {
      const app = await createApp({
        imports: [PeriodicModule.forRoot({ mode: 'manual', telemetry: true })],
      });
      let calls = 0;
      app.registry.add('p', () => void calls++, { every: 1000 });
      expect(await app.registry.syncTick('p')).toMatchObject({ ok: true, reason: 'normal' });
      expect(await app.registry.syncTick('p')).toMatchObject({ ok: true, reason: 'normal' });
      expect(calls).toBe(2);
      expect(app.registry.status('p').consecutiveFailures).toBe(0);
      expect(app.logs.periodic()).toEqual([
        'error: OpenTelemetry failed while recording a run of p; runs go on without what it fails to record ' +
          '(logged again once it has worked in between): processor onStart',
      ]);
    } finally {
      trace.disable();
      trace.setGlobalTracerProvider(
        new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] }),
      );
    }
  });

  it('without a context manager that propagates: warned once at bootstrap, since spans a run creates cannot be its children', async () => {
    const quiet = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual', telemetry: true })] });
    expect(quiet.logs.periodic()).toEqual([]);
    context.disable();
    try {
      const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual', telemetry: true })] });
      app.registry.add('a', () => undefined, { every: 1000 });
      await app.registry.syncTick('a');
      expect(app.logs.periodic()).toEqual([
        expect.stringMatching(
          /^warn: "telemetry: true" finds no OpenTelemetry context manager: spans that runs create .* will not be children of the run's span; register one .*AsyncLocalStorageContextManager/,
        ),
      ]);
    } finally {
      context.setGlobalContextManager(contextManager.enable());
    }
  });

  it('telemetry: false (the default) records nothing', async () => {
    spans.reset();
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })] });
    app.registry.add('quiet', () => undefined, { every: 1000 });
    await app.registry.syncTick('quiet');
    expect(spans.getFinishedSpans()).toEqual([]);
    expect(await points('periodic.runs', ['periodic.job.name'])).not.toHaveProperty('quiet');
  });

  it('without @opentelemetry/api: a PeriodicConfigError that says what to install', async () => {
    const missing = Object.assign(new Error("Cannot find package '@opentelemetry/api'"), {
      code: 'ERR_MODULE_NOT_FOUND',
    });
    const loading = openTelemetry(new PeriodicEvents(), () => Promise.reject(missing));
    await expect(loading).rejects.toThrow(PeriodicConfigError);
    await expect(loading).rejects.toThrow(
      'PeriodicModule: "telemetry: true" needs @opentelemetry/api, which cannot be loaded: install it ' +
        '(npm install @opentelemetry/api)',
    );
  });

  it('"telemetry" must be a boolean', () => {
    expect(() => PeriodicModule.forRoot({ telemetry: 'yes' as never })).toThrow(
      'PeriodicModule.forRoot(): "telemetry" must be true or false, got "yes"',
    );
  });
});
