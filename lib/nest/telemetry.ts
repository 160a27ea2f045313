// The module's telemetry, apart from the OpenTelemetry adapter so that the types of the module's parts do not
// name @opentelemetry/api, an optional peer that an application without telemetry does not install.
import { Injectable } from '@nestjs/common';
import type { PeriodicSchedulerOptions } from '../scheduler/options.js';
import { openTelemetry, type RunTelemetry } from './open-telemetry.js';
import { PeriodicEvents } from './events.js';
import { ModuleSettings } from './options.js';

type Job = PeriodicSchedulerOptions['run'];

/**
 * The application's telemetry, a part of the module (not of its public API): with `telemetry: true`, each run is called
 * through OpenTelemetry once the module has initialised and loaded it (`load()`); without, jobs are called as
 * they are.
 */
@Injectable()
export class PeriodicTelemetry {
  #recording: RunTelemetry | undefined;

  constructor(
    private readonly events: PeriodicEvents,
    private readonly settings: ModuleSettings,
  ) {}

  /** Loads OpenTelemetry if the module's `telemetry` option is on; rejects with what to install if it is missing. */
  async load(): Promise<void> {
    if (this.settings.options.telemetry) this.#recording ??= await openTelemetry(this.events);
  }

  /** A check-in of job `name` failed after its retry: counted in `periodic.checkins.failed`. */
  checkInFailed(name: string): void {
    this.#recording?.checkInFailed(name);
  }

  /** The job's function as the scheduler calls it: inside the run's span once OpenTelemetry is loaded. */
  traced(job: Job): Job {
    if (!this.settings.options.telemetry) return job;
    // Read on each run: jobs are made before the module loads the telemetry.
    return (context) => (this.#recording === undefined ? job(context) : this.#recording.run(context, job));
  }
}
