// The consumer test of both Jest fixtures; the package is imported by its name, as an application does.
import { describe, it } from '@jest/globals';
import { manualTick } from './manual-tick.js';

describe('Counter.increment', () => {
  it('runs once per manual tick, reports its run, and stops with the module', manualTick);
});
