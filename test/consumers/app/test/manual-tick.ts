// The check every fixture runs, with Node's assert so that Jest and Vitest share it: boot a module in manual
// mode, tick the job by hand, see its run and its event, and close.
import { strict as assert } from 'node:assert';
import { Test } from '@nestjs/testing';
import { PeriodicEvents, PeriodicModule, PeriodicRegistry } from 'nestjs-periodic';
import { Counter } from '../src/counter.js';

export async function manualTick(): Promise<void> {
  const moduleRef = await Test.createTestingModule({
    imports: [PeriodicModule.forRoot({ mode: 'manual' })],
    providers: [Counter],
  }).compile();
  await moduleRef.init();
  const registry = moduleRef.get(PeriodicRegistry);
  const finished = moduleRef.get(PeriodicEvents).once('finished');

  const result = await registry.syncTick('Counter.increment');
  assert.equal(result.ok && result.reason, 'normal');
  const event = await finished;
  assert.deepEqual([event.name, event.jobId, event.reason], ['Counter.increment', 1, 'normal']);
  assert.equal(moduleRef.get(Counter).count, 1);

  await moduleRef.close();
  assert.equal(registry.get('Counter.increment').state, 'stopped');
}
