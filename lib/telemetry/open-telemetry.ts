import type { Attributes, Span } from '@opentelemetry/api';
import type { PeriodicEvents } from '../periodic.events.js';
import { isError, PeriodicConfigError } from '../scheduler/errors.js';
import type { JobExitReason } from '../scheduler/events.js';
import type { PeriodicContext } from '../scheduler/run.js';

type Api = typeof import('@opentelemetry/api');

/** The exit reasons whose span has status error. */
const FAILED: ReadonlySet<JobExitReason> = new Set(['error', 'timeout', 'killed', 'leaseLost']);

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
  return new RunTelemetry(api, events);
}

/**
 * A span `periodic <name>` for every run, active while the run's code executes, ended with its exit reason; and
 * the metrics `periodic.runs`, `periodic.run.duration`, `periodic.tick.lateness` and `periodic.ticks.missed`.
 */
export class RunTelemetry {
  private readonly tracer;
  /** The spans of the runs in flight, by job and run. */
  private readonly spans = new Map<string, Map<number, Span>>();

  constructor(
    private readonly api: Api,
    events: PeriodicEvents,
  ) {
    this.tracer = api.trace.getTracer('nestjs-periodic');
    const meter = api.metrics.getMeter('nestjs-periodic');
    const runs = meter.createCounter('periodic.runs', {
      description: 'Runs that ended, by job and exit reason',
    });
    const duration = meter.createHistogram('periodic.run.duration', {
      description: 'How long runs took, from start to end',
      unit: 's',
    });
    const lateness = meter.createHistogram('periodic.tick.lateness', {
      description: 'How long after its slot a run started',
      unit: 's',
    });
    const missed = meter.createCounter('periodic.ticks.missed', { description: 'Slots dropped, by job' });
    events.on('started', ({ name, startedAt, scheduledAt }) =>
      lateness.record((startedAt - scheduledAt) / 1000, { 'periodic.job.name': name }),
    );
    events.on('missed', ({ name, count }) => missed.add(count, { 'periodic.job.name': name }));
    events.on('finished', ({ name, jobId, reason, error, durationMs }) => {
      const attributes = { 'periodic.job.name': name, 'periodic.exit_reason': reason };
      runs.add(1, attributes);
      duration.record(durationMs / 1000, attributes);
      this.endSpan(name, jobId, reason, error);
    });
  }

  /** Calls the job inside the span of its run. */
  run(context: PeriodicContext, job: (context: PeriodicContext) => unknown): unknown {
    const { name, jobId, fencingToken } = context;
    const attributes: Attributes = { 'periodic.job.name': name, 'periodic.job.id': jobId };
    if (fencingToken !== undefined) attributes['periodic.fencing_token'] = fencingToken;
    const span = this.tracer.startSpan(`periodic ${name}`, { attributes });
    let runs = this.spans.get(name);
    if (runs === undefined) this.spans.set(name, (runs = new Map()));
    runs.set(jobId, span);
    const { context: contexts, trace } = this.api;
    return contexts.with(trace.setSpan(contexts.active(), span), job, undefined, context);
  }

  private endSpan(name: string, jobId: number, reason: JobExitReason, error: unknown): void {
    const span = this.spans.get(name)?.get(jobId);
    if (span === undefined) return;
    this.spans.get(name)!.delete(jobId);
    span.setAttribute('periodic.exit_reason', reason);
    if (FAILED.has(reason)) {
      span.setStatus({ code: this.api.SpanStatusCode.ERROR, message: reason });
      if (isError(error)) span.recordException(error);
    }
    span.end();
  }
}
