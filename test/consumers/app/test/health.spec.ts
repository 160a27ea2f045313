// The health indicator from the subpath nestjs-periodic/terminus, as an application imports it: in the Jest
// fixtures, so that the subpath is proven in CommonJS (Nest 11, terminus 11) and in ES modules (Nest 12).
import { strict as assert } from 'node:assert';
import { describe, it } from '@jest/globals';
import { TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { PeriodicModule, PeriodicRegistry } from 'nestjs-periodic';
import { PeriodicHealthIndicator } from 'nestjs-periodic/terminus';
import { Counter } from '../src/counter.js';

describe('PeriodicHealthIndicator', () => {
  it('reports the job up, then down once it has been stopped while the application runs', async () => {
    const moduleRef = await Test.createTestingModule({
      // Auto mode (a manual job is always up), with a long interval from the module's options: no run.
      imports: [TerminusModule, PeriodicModule.forRoot({ jobs: { 'Counter.increment': { every: 60_000 } } })],
      providers: [Counter, PeriodicHealthIndicator],
    }).compile();
    await moduleRef.init();
    const indicator = moduleRef.get(PeriodicHealthIndicator);
    const up = indicator.isHealthy('periodic');
    assert.equal(up.periodic.status, 'up');
    await moduleRef.get(PeriodicRegistry).get('Counter.increment').stop();
    const down = indicator.isHealthy('periodic');
    assert.equal(down.periodic.status, 'down');
    assert.deepEqual(Object.keys(down.periodic.jobs), ['Counter.increment']);
    await moduleRef.close();
  });
});
