// Incidents of a job that is not exclusive (SPEC 25): kept by its own process. `failedSlots` slots in a row that
// failed after their retries open a 'failing' incident, once; a run past `hungAfter` opens a 'hung' one, and is not
// stopped; `recoverAfter` good slots close them, each with one `recovered` event; both are in the audit trail.
import { describe, expect, it } from '@jest/globals';
import { PeriodicScheduler } from '../../lib/scheduler/periodic-scheduler.js';
import type { PeriodicContext } from '../../lib/scheduler/run.js';
import { INCIDENT_DEFAULTS, incidentSettings } from '../../lib/scheduler/incidents.js';
import { PeriodicConfigError } from '../../lib/scheduler/errors.js';
import { advance, deferred, EventLog, startScheduler, honouringRun, useFakeTimers } from './helpers.js';

useFakeTimers();

/** A run that fails while `state.failing`, with the error `feed answered 503`. */
function flaky(state: { failing: boolean }) {
  return () => {
    if (state.failing) throw new TypeError('feed answered 503');
  };
}

function withIncidents(options: { run: (context: PeriodicContext) => unknown }, incidents: object | false) {
  const log = new EventLog();
  const made = new PeriodicScheduler({ name: 'feed', every: 1000, ...options }, log.sink, {
    incidents: incidents === false ? false : { ...INCIDENT_DEFAULTS, ...incidents },
  });
  made.start();
  return { scheduler: made, log };
}

describe('incidents of a job that is not exclusive', () => {
  it("opens one 'failing' incident once failedSlots slots in a row failed, and closes it after a good slot", async () => {
    const state = { failing: true };
    const { scheduler, log } = startScheduler({ every: 1000, run: flaky(state) });
    await advance(2000);
    expect(log.of('incident')).toEqual([]);
    await advance(1000);
    const [incident, ...more] = log.of('incident');
    expect(more).toEqual([]);
    expect(incident).toEqual({
      type: 'incident',
      name: 'job',
      kind: 'failing',
      since: expect.any(Date),
      detail: '3 slots in a row failed after their retries; the last: TypeError: feed answered 503',
    });
    // More failures open nothing more.
    await advance(3000);
    expect(log.of('incident')).toHaveLength(1);
    const status = await scheduler.fleetStatus();
    expect(status.incidents).toEqual([{ kind: 'failing', since: incident.since, detail: incident.detail }]);

    state.failing = false;
    await advance(1000);
    const recovered = log.of('recovered');
    expect(recovered).toEqual([
      { type: 'recovered', name: 'job', kind: 'failing', since: incident.since, durationMs: 4000 },
    ]);
    expect((await scheduler.fleetStatus()).incidents).toEqual([]);
    const audit = await scheduler.audit();
    expect(audit.map(({ action, by, note }) => [action, by, note])).toEqual([
      ['recovered', null, 'failing: a good slot'],
      ['incident', null, `failing: ${incident.detail}`],
    ]);
    await scheduler.stop();
  });

  it('waits for recoverAfter good slots in a row: a failure between starts the count again', async () => {
    const state = { failing: true };
    const { scheduler, log } = withIncidents({ run: flaky(state) }, { failedSlots: 1, recoverAfter: 2 });
    await advance(1000);
    expect(log.of('incident').map(({ kind }) => kind)).toEqual(['failing']);
    state.failing = false;
    await advance(1000);
    state.failing = true;
    await advance(1000);
    state.failing = false;
    await advance(1000);
    expect(log.of('recovered')).toEqual([]);
    await advance(1000);
    expect(log.of('recovered').map(({ kind }) => kind)).toEqual(['failing']);
    // The failure between did not open a second incident: one was open.
    expect(log.of('incident')).toHaveLength(1);
    await scheduler.stop();
  });

  it("opens a 'hung' incident for a run past hungAfter, which goes on; a good slot after it closes it", async () => {
    const first = deferred();
    let calls = 0;
    const { scheduler, log } = withIncidents(
      { run: () => (++calls === 1 ? first.promise : undefined) },
      { hungAfter: 5000 },
    );
    // Runs in flight are looked at once a second: the run is hung from 5 s, and found within a second.
    await advance(1000);
    await advance(4999);
    expect(log.of('incident')).toEqual([]);
    await advance(1000);
    const [hung] = log.of('incident');
    expect(hung).toMatchObject({ kind: 'hung', name: 'feed' });
    expect(hung.detail).toMatch(/^run #1, started at \S+Z, is still running after 5000 ms$/);
    expect(scheduler.running).toBe(1);
    // The hung run ending is not a good slot after the incident opened (its slot came before); the next slot is.
    first.resolve();
    await advance(0);
    expect(log.of('recovered')).toEqual([]);
    await advance(1000);
    expect(log.of('recovered').map(({ kind }) => kind)).toEqual(['hung']);
    await scheduler.stop();
  });

  it('a run that ends before hungAfter opens nothing; the next, still in flight past it, does', async () => {
    let calls = 0;
    const { scheduler, log } = withIncidents(
      {
        run: (context) =>
          ++calls === 1 ? new Promise((ended) => setTimeout(ended, 500)) : honouringRun(context),
      },
      { hungAfter: 1500 },
    );
    await advance(2000 + 1499);
    expect(log.of('incident')).toEqual([]);
    await advance(1000);
    const [hung] = log.of('incident');
    expect(hung.detail).toMatch(/^run #2, /);
    await scheduler.stop();
  });

  it('opens none with incidents: false', async () => {
    const { scheduler, log } = withIncidents({ run: flaky({ failing: true }) }, false);
    await advance(10_000);
    expect(log.of('incident')).toEqual([]);
    expect((await scheduler.fleetStatus()).incidents).toEqual([]);
    await scheduler.stop();
  });
});

describe('the incidents option', () => {
  it('fills in the defaults', () => {
    expect(incidentSettings('forRoot()', { failedSlots: 5 })).toEqual({
      failedSlots: 5,
      lateAfter: 60_000,
      hungAfter: 3_600_000,
      recoverAfter: 1,
    });
    expect(incidentSettings('forRoot()', undefined)).toEqual(INCIDENT_DEFAULTS);
    expect(incidentSettings('forRoot()', false)).toBe(false);
    expect(incidentSettings('forRoot()', true)).toEqual(INCIDENT_DEFAULTS);
  });

  it.each([
    [{ failedSlots: 0 }, /"incidents": "failedSlots" must be an integer from 1 to 1000.*got 0/],
    [{ lateAfter: 50 }, /"incidents": "lateAfter" must be an integer number of milliseconds from 100/],
    [{ hungAfter: 1.5 }, /"hungAfter" .*got 1\.5/],
    [{ recoverAfter: '1' }, /"recoverAfter" .*got "1"/],
    [{ failSlots: 3 }, /"incidents".*failSlots.*failedSlots/],
  ])('refuses %j with a message that names it', (given, message) => {
    expect(() => incidentSettings('forRoot()', given as never)).toThrow(PeriodicConfigError);
    expect(() => incidentSettings('forRoot()', given as never)).toThrow(message);
  });
});
