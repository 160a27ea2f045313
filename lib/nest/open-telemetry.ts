import { Logger } from '@nestjs/common';
import type { Attributes, Context, Link, Span, SpanContext } from '@opentelemetry/api';
import { LOGGER_CONTEXT } from './constants.js';
import { PeriodicEvents } from './events.js';
import { logError } from './logger.js';
import { isError, PeriodicConfigError } from '../scheduler/errors.js';
import { FAILED_RUNS, type JobExitReason } from '../scheduler/events.js';
import type { PeriodicContext } from '../scheduler/run.js';

type Api = typeof import('@opentelemetry/api');

/** Seconds: from a few milliseconds to an hour. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
/** Seconds: a tick on time is late by a millisecond or two. */
const LATENESS_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30];

/**
 * Loads `@opentelemetry/api` (an optional peer) and records the runs of the application's jobs through it: a
 * `PeriodicConfigError` that says what to install if it is missing. `load` is the import, for tests.
 */
export async function openTelemetry(
  events: PeriodicEvents,
  load: () => Promise<Api> = () => import('@opentelemetry/api'),
): Promise<RunTelemetry> {
  let api: Api;
  try {
    api = await load();
  } catch (error) {
    throw new PeriodicConfigError(
      'PeriodicModule: "telemetry: true" needs @opentelemetry/api, which cannot be loaded: install it ' +
        '(npm install @opentelemetry/api) with an OpenTelemetry SDK that records what it reports, or remove ' +
        '"telemetry"',
      { cause: error },
    );
  }
  warnWithoutContextManager(api);
  return new RunTelemetry(api, events);
}

/**
 * Without a context manager (`trace.setGlobalTracerProvider` alone registers none), `context.with` makes nothing
 * active: the run's span is made, but the spans the run creates are roots of traces of their own.
 */
function warnWithoutContextManager(api: Api): void {
  const key = api.createContextKey('nestjs-periodic: does the context propagate?');
  const probe = api.context.active().setValue(key, true);
  if (api.context.with(probe, () => api.context.active().getValue(key) === true)) return;
  new Logger(LOGGER_CONTEXT).warn(
    '"telemetry: true" finds no OpenTelemetry context manager: spans that runs create (queries, HTTP calls) ' +
      "will not be children of the run's span; register one before the application starts: the NodeSDK of " +
      '@opentelemetry/sdk-node does, or context.setGlobalContextManager(new ' +
      'AsyncLocalStorageContextManager().enable()) from @opentelemetry/context-async-hooks',
  );
}

/** How many slots of a job keep the span of their first attempt, for the links of their retries. */
const FIRSTS_KEPT = 16;

/**
 * A span `periodic <name>` for every run, active while the run's code executes, ended with its exit reason; and
 * the metrics `periodic.runs`, `periodic.run.duration`, `periodic.tick.lateness` and `periodic.ticks.missed`.
 * A failure of OpenTelemetry itself (an SDK that throws) is logged and changes nothing of the runs.
 */
export class RunTelemetry {
  private readonly tracer;
  /** The spans of the runs in flight, by job and run. */
  private readonly spans = new Map<string, Map<number, Span>>();
  /**
   * Per job, the spans of the first attempts of its latest FIRSTS_KEPT slots, by slot: the spans of their retries
   * link to them (slots whose runs overlap may retry at once).
   */
  private readonly firsts = new Map<string, Map<number, SpanContext>>();
  private readonly logger = new Logger(LOGGER_CONTEXT);
  /**
   * What failed and was logged, making spans or recording what runs did: the next such failures are not
   * logged, until that works again.
   */
  private readonly failing = { span: false, record: false };

  constructor(
    private readonly api: Api,
    events: PeriodicEvents,
  ) {
    this.tracer = api.trace.getTracer('nestjs-periodic');
    const meter = api.metrics.getMeter('nestjs-periodic');
    const runs = meter.createCounter('periodic.runs', {
      description: 'Runs that ended, by job and exit reason',
      unit: '{run}',
    });
    const duration = meter.createHistogram('periodic.run.duration', {
      description: 'How long runs took, from start to end',
      unit: 's',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    });
    const lateness = meter.createHistogram('periodic.tick.lateness', {
      description: 'How long after its slot a run started',
      unit: 's',
      advice: { explicitBucketBoundaries: LATENESS_BUCKETS },
    });
    const missed = meter.createCounter('periodic.ticks.missed', {
      description: 'Slots dropped, by job',
      unit: '{tick}',
    });
    this.checkInsFailed = meter.createCounter('periodic.checkins.failed', {
      description: 'Check-ins that failed after their retry, by job',
      unit: '{check-in}',
    });
    const incidents = meter.createUpDownCounter('periodic.incidents.open', {
      description:
        'Incidents open, by job and kind: one more when this replica opens one, one less when it closes one',
      unit: '{incident}',
    });
    events.on('incident', ({ name, kind }) =>
      this.guarded(name, () =>
        incidents.add(1, { 'periodic.job.name': name, 'periodic.incident.kind': kind }),
      ),
    );
    events.on('recovered', ({ name, kind }) =>
      this.guarded(name, () =>
        incidents.add(-1, { 'periodic.job.name': name, 'periodic.incident.kind': kind }),
      ),
    );
    events.on('started', ({ name, startedAt, scheduledAt }) =>
      this.guarded(name, () =>
        lateness.record((startedAt - scheduledAt) / 1000, { 'periodic.job.name': name }),
      ),
    );
    events.on('missed', ({ name, count }) =>
      this.guarded(name, () => missed.add(count, { 'periodic.job.name': name })),
    );
    events.on('finished', ({ name, jobId, reason, error, durationMs }) =>
      this.guarded(name, () => {
        const attributes = { 'periodic.job.name': name, 'periodic.exit_reason': reason };
        runs.add(1, attributes);
        duration.record(durationMs / 1000, attributes);
        this.endSpan(name, jobId, reason, error);
      }),
    );
  }

  /** The counter of check-ins that failed. */
  private readonly checkInsFailed;

  /** A check-in of job `name` failed after its retry. */
  checkInFailed(name: string): void {
    this.guarded(name, () => this.checkInsFailed.add(1, { 'periodic.job.name': name }));
  }

  /** Calls the job inside the span of its run; without one if OpenTelemetry fails to make it. */
  run(context: PeriodicContext, job: (context: PeriodicContext) => unknown): unknown {
    const { name, jobId, fencingToken, attempt } = context;
    const { context: contexts, trace } = this.api;
    let active: Context;
    try {
      const attributes: Attributes = { 'periodic.job.name': name, 'periodic.job.id': jobId };
      if (fencingToken !== undefined) attributes['periodic.fencing_token'] = fencingToken;
      // A retry is a span of its own, which says its attempt and links to its slot's first attempt.
      const slot = context.scheduledDate.getTime();
      let links: Link[] | undefined;
      if (attempt > 1) {
        attributes['periodic.attempt'] = attempt;
        const first = this.firsts.get(name)?.get(slot);
        if (first !== undefined) links = [{ context: first }];
      }
      const span = this.tracer.startSpan(`periodic ${name}`, { attributes, links });
      if (attempt === 1) this.firstAttempt(name, slot, span.spanContext());
      let runs = this.spans.get(name);
      if (runs === undefined) this.spans.set(name, (runs = new Map()));
      runs.set(jobId, span);
      active = trace.setSpan(contexts.active(), span);
      this.failing.span = false;
    } catch (error) {
      this.failed('span', name, error);
      return job(context);
    }
    return contexts.with(active, job, undefined, context);
  }

  private firstAttempt(name: string, slot: number, context: SpanContext): void {
    let slots = this.firsts.get(name);
    if (slots === undefined) this.firsts.set(name, (slots = new Map()));
    slots.delete(slot);
    slots.set(slot, context);
    if (slots.size > FIRSTS_KEPT) slots.delete(slots.keys().next().value!);
  }

  private endSpan(name: string, jobId: number, reason: JobExitReason, error: unknown): void {
    const runs = this.spans.get(name);
    const span = runs?.get(jobId);
    if (span === undefined) return;
    runs!.delete(jobId);
    if (runs!.size === 0) this.spans.delete(name);
    span.setAttribute('periodic.exit_reason', reason);
    if (FAILED_RUNS.has(reason)) {
      span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: reason });
      if (isError(error)) span.recordException(error);
    }
    span.end();
  }

  private guarded(name: string, record: () => void): void {
    try {
      record();
      this.failing.record = false;
    } catch (error) {
      this.failed('record', name, error);
    }
  }

  private failed(what: 'span' | 'record', name: string, error: unknown): void {
    if (this.failing[what]) return;
    this.failing[what] = true;
    logError(
      this.logger,
      `OpenTelemetry failed while recording a run of ${name}; runs go on without what it fails to record ` +
        '(logged again once it has worked in between)',
      error,
    );
  }
}
