// The consumer test of the Vitest fixture: the manual tick the Jest fixtures also run, then the job in auto
// mode on Vitest's fake timers, which also fake `performance.now()`, the clock the scheduler reads.
import { Test } from '@nestjs/testing';
import { PeriodicEvents, PeriodicModule } from 'nestjs-periodic';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Counter } from '../src/counter.js';
import { manualTick } from './manual-tick.js';

describe('Counter.increment', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs once per manual tick, reports its run, and stops with the module', manualTick);

  it('ticks every 100 ms of fake time in auto mode, and no sooner', async () => {
    vi.useFakeTimers();
    const moduleRef = await Test.createTestingModule({
      imports: [PeriodicModule.forRoot({ logger: false })],
      providers: [Counter],
    }).compile();
    await moduleRef.init();
    const counter = moduleRef.get(Counter);
    const started: number[] = [];
    moduleRef.get(PeriodicEvents).on('started', (event) => started.push(event.jobId));

    await vi.advanceTimersByTimeAsync(99);
    expect(counter.count).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(counter.count).toBe(1);
    await vi.advanceTimersByTimeAsync(300);
    expect(counter.count).toBe(4);
    expect(started).toEqual([1, 2, 3, 4]);

    await moduleRef.close();
    expect(vi.getTimerCount()).toBe(0);
  });
});
