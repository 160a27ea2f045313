// The run history a job keeps in memory (run-ring.ts): rows of numbers that read back as the records a store
// would give, the latest `keep` of them.
import { describe, expect, it } from '@jest/globals';
import type { PeriodicRunEntry } from '../../lib/scheduler/coordinator-port.js';
import { RunRing } from '../../lib/scheduler/run-ring.js';

const T0 = Date.UTC(2026, 0, 1);

/** Runs 1 … count of a job every second, each ended 'normal' after 12.5 ms. */
function ringOf(keep: number, count: number): RunRing {
  const ring = new RunRing('job', 'pod-0', keep);
  for (let jobId = 1; jobId <= count; jobId++) {
    ring.started(jobId, T0 + jobId * 1000, T0 + jobId * 1000, 'schedule', 1, null);
    ring.ended(jobId, 'normal', 12.5, null, false);
  }
  return ring;
}

const ids = (entries: PeriodicRunEntry[]) => entries.map((entry) => entry.jobId);

describe('the runs a job keeps in memory', () => {
  it('reads back every field of a record as it was written, a run in flight with no end', () => {
    const ring = new RunRing('report', 'pod-7', 10);
    ring.started(41, T0, T0 - 5, 'retry', 3, 12);
    ring.started(42, T0 + 1, null, 'trigger', 1, null);
    ring.ended(41, 'error', 1234.567, { name: 'TypeError', message: 'boom' }, true);
    expect(ring.read(10, null)).toEqual([
      {
        id: '',
        name: 'report',
        jobId: 42,
        replica: 'pod-7',
        fencingToken: null,
        slot: null,
        origin: 'trigger',
        attempt: 1,
        startedAt: T0 + 1,
        finishedAt: null,
        reason: null,
        durationMs: null,
        error: null,
      },
      {
        id: '',
        name: 'report',
        jobId: 41,
        replica: 'pod-7',
        fencingToken: 12,
        slot: T0 - 5,
        origin: 'retry',
        attempt: 3,
        startedAt: T0,
        finishedAt: T0 + 1235,
        reason: 'error',
        durationMs: 1234.567,
        error: { name: 'TypeError', message: 'boom' },
        retrying: true,
      },
    ]);
  });

  it('tells every origin and exit reason apart, and attempts far past a byte', () => {
    const ring = new RunRing('job', 'pod-0', 100);
    const origins = ['schedule', 'trigger', 'manual', 'retry', 'recovery'] as const;
    const reasons = ['normal', 'error', 'timeout', 'killed', 'shutdown', 'leaseLost'] as const;
    let jobId = 0;
    for (const origin of origins) {
      for (const reason of reasons) {
        jobId++;
        ring.started(jobId, T0 + jobId, null, origin, 70_000 + jobId, null);
        ring.ended(jobId, reason, 1, null, jobId % 2 === 0);
      }
    }
    const read = ring.read(100, null).reverse();
    expect(read.map((entry) => [entry.origin, entry.reason, entry.attempt, entry.retrying ?? false])).toEqual(
      origins.flatMap((origin, o) =>
        reasons.map((reason, r) => {
          const id = o * reasons.length + r + 1;
          return [origin, reason, 70_000 + id, id % 2 === 0];
        }),
      ),
    );
  });

  it('keeps the latest `keep`, the oldest written over, through the rows it grows by', () => {
    for (const [keep, count] of [
      [1, 5],
      [3, 3],
      [8, 9],
      [100, 99],
      [100, 250],
    ]) {
      const ring = ringOf(keep, count);
      const expected = Array.from({ length: Math.min(keep, count) }, (_, i) => count - i);
      expect(ids(ring.read(keep, null))).toEqual(expected);
      expect(ring.last?.jobId).toBe(count);
    }
    expect(new RunRing('job', 'pod-0', 5).last).toBeUndefined();
    expect(new RunRing('job', 'pod-0', 5).read(5, null)).toEqual([]);
  });

  it('reads the first `limit` of those started before `before`', () => {
    const ring = ringOf(10, 10);
    expect(ids(ring.read(3, null))).toEqual([10, 9, 8]);
    expect(ids(ring.read(3, T0 + 5000))).toEqual([4, 3, 2]);
    expect(ids(ring.read(10, T0 + 1000))).toEqual([]);
  });

  it('ends the run it is told, in flight among others, and drops the end of a run no longer kept', () => {
    const ring = new RunRing('job', 'pod-0', 3);
    for (let jobId = 1; jobId <= 3; jobId++) ring.started(jobId, T0 + jobId, null, 'schedule', 1, null);
    ring.ended(2, 'timeout', 5, null, false);
    ring.started(4, T0 + 4, null, 'schedule', 1, null);
    // Run 1 was written over by run 4: its end changes nothing.
    ring.ended(1, 'normal', 7, null, false);
    ring.ended(3, 'killed', 9, null, false);
    expect(ring.read(3, null).map((entry) => [entry.jobId, entry.reason])).toEqual([
      [4, null],
      [3, 'killed'],
      [2, 'timeout'],
    ]);
  });

  it('keeps each run’s own error, and gives copies that a reader may change', () => {
    const ring = new RunRing('job', 'pod-0', 4);
    const errors = [
      { name: 'Error', message: 'same' },
      { name: 'Error', message: 'same' },
      { name: 'Error', message: 'other' },
      null,
      { name: 'RangeError', message: 'same' },
    ];
    errors.forEach((error, i) => {
      ring.started(i + 1, T0 + i, null, 'schedule', 1, null);
      ring.ended(i + 1, error === null ? 'normal' : 'error', 1, error, false);
    });
    const read = ring.read(4, null);
    expect(read.map((entry) => entry.error)).toEqual(errors.slice(1).reverse());
    read[3]!.error!.message = 'changed';
    expect(ring.read(4, null)[3]!.error).toEqual({ name: 'Error', message: 'same' });
    // A run written over a failed one starts with no error.
    ring.started(6, T0 + 6, null, 'schedule', 1, null);
    expect(ring.last).toMatchObject({ jobId: 6, error: null });
  });
});
