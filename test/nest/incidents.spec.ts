// Incidents through the Nest module (SPEC 25): the module's `incidents` option, checked at forRoot; an incident of
// a decorated job reaches PeriodicEvents and diagnostics_channel; a tick that comes late because the event loop was
// kept busy opens a 'late' incident, which the next good slot closes.
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { Periodic, PeriodicConfigError, PeriodicModule } from '../../lib/index.js';
import { until, useApps } from './helpers.js';

describe('the incidents option of the module', () => {
  it.each([
    [
      { failedSlots: 0 },
      /"incidents": "failedSlots" must be an integer from 1 to 1000 \(slots in a row .*\), got 0/,
    ],
    [
      { lateAfter: 10 },
      /"incidents": "lateAfter" must be an integer number of milliseconds from 100 .*got 10/,
    ],
    [{ hungAfter: -1 }, /"incidents": "hungAfter" .*got -1/],
    [{ recoverAfter: 1.5 }, /"incidents": "recoverAfter" .*got 1\.5/],
    [{ hungafter: 1000 }, /"incidents".*"hungafter".*"hungAfter"/],
    [
      'on',
      /"incidents" must be true \(the defaults\), false \(none\), or an object such as \{ failedSlots: 3/,
    ],
  ])('refuses %j, naming the option and the value', (incidents, message) => {
    const made = () => PeriodicModule.forRoot({ incidents: incidents as never });
    expect(made).toThrow(PeriodicConfigError);
    expect(made).toThrow(message);
  });
});

describe('incidents of decorated jobs', () => {
  const createApp = useApps();

  it('an incident and its recovery reach PeriodicEvents and diagnostics_channel, once each', async () => {
    let failing = true;
    @Injectable()
    class Feed {
      @Periodic({ every: 100, name: 'feed' })
      pull(): void {
        if (failing) throw new TypeError('the feed answered 503');
      }
    }
    const published: unknown[] = [];
    const onIncident = (message: unknown) => published.push(message);
    subscribe('nestjs-periodic:incident', onIncident);
    try {
      const app = await createApp({
        imports: [PeriodicModule.forRoot({ logger: false, incidents: { failedSlots: 2 } })],
        providers: [Feed],
      });
      const incident = await app.events.once('incident');
      expect(incident).toMatchObject({ type: 'incident', name: 'feed', kind: 'failing' });
      expect(published).toEqual([incident]);
      failing = false;
      const recovered = await app.events.once('recovered');
      expect(recovered).toMatchObject({ name: 'feed', kind: 'failing', since: incident.since });
      expect(app.seen.filter(({ type }) => type === 'incident')).toHaveLength(1);
    } finally {
      unsubscribe('nestjs-periodic:incident', onIncident);
    }
  });

  it("a tick that comes lateAfter after its slot, the event loop kept busy, opens a 'late' incident; a good slot closes it", async () => {
    @Injectable()
    class Busy {
      @Periodic({ every: 100, name: 'busy' })
      tick(): void {}
    }
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ logger: false, incidents: { lateAfter: 200 } })],
      providers: [Busy],
    });
    await app.events.once('finished');
    // The event loop is kept busy for 600 ms: the next tick comes at least 500 ms after its slot.
    const end = performance.now() + 600;
    while (performance.now() < end);
    const late = await until(() => app.seen.find((event) => event.type === 'incident'), 5000);
    expect(late).toMatchObject({ name: 'busy', kind: 'late' });
    expect((late as { detail: string }).detail).toMatch(
      /^the slot due at \S+Z started \d+ ms late: this replica's timer came late \(an event loop kept busy, or a process suspended\)$/,
    );
    await until(() => app.seen.find((event) => event.type === 'recovered'), 5000);
  });
});
