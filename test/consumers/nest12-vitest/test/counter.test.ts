// The consumer test of the Vitest fixture: the manual tick the Jest fixtures also run, then the job in auto
// mode on Vitest's fake timers, which also fake `performance.now()`, the clock the scheduler reads, and a cron
// job on Vitest's fake system time.
import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { Periodic, type PeriodicContext, PeriodicEvents, PeriodicModule } from 'nestjs-periodic';
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

// Decorated by calls: the fixture compiles decorators in src/ only.
class Clock {
  readonly slots: string[] = [];

  chime({ scheduledDate }: PeriodicContext): void {
    this.slots.push(scheduledDate.toISOString());
  }
}
Periodic({ cron: '*/10 * * * * *', timezone: 'UTC' })(
  Clock.prototype,
  'chime',
  Object.getOwnPropertyDescriptor(Clock.prototype, 'chime')!,
);
Injectable()(Clock);

describe('a cron job', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('runs the slots of fake time once each, after vi.setSystemTime too', async () => {
    vi.useFakeTimers({ now: new Date('2026-01-01T00:00:00Z') });
    const moduleRef = await Test.createTestingModule({
      imports: [PeriodicModule.forRoot({ logger: false })],
      providers: [Clock],
    }).compile();
    await moduleRef.init();
    const clock = moduleRef.get(Clock);

    await vi.advanceTimersByTimeAsync(25_000);
    expect(clock.slots).toEqual(['2026-01-01T00:00:10.000Z', '2026-01-01T00:00:20.000Z']);
    // The clock set forward by a minute: with the next advance, one run for the latest slot that passed
    // (00:01:20; the five before it are missed), then the pattern's slots that fall in the advance.
    vi.setSystemTime(new Date('2026-01-01T00:01:25Z'));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(clock.slots.slice(2)).toEqual(['2026-01-01T00:01:20.000Z', '2026-01-01T00:01:30.000Z']);

    await moduleRef.close();
    expect(vi.getTimerCount()).toBe(0);
  });
});
