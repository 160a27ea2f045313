// One shape of a run's record: a coordinator's reply must be it whole (RUN), and a record a store kept, which
// another version of the package may have written, is read leniently (readRun, and runOf for stored text).
import { describe, expect, it } from '@jest/globals';
import type { PeriodicRunEntry } from '../../lib/scheduler/coordinator-port.js';
import { readRun, RUN } from '../../lib/scheduler/reply-checks.js';
import { runOf } from '../../lib/coordinators/replies.js';

const run: PeriodicRunEntry = {
  id: 'r#1',
  name: 'job',
  jobId: 3,
  replica: 'a',
  fencingToken: 7,
  slot: 1000,
  origin: 'retry',
  attempt: 2,
  startedAt: 1005,
  finishedAt: 1010,
  reason: 'error',
  durationMs: 4.5,
  error: { name: 'TypeError', message: 'boom' },
};

/** A value of the wrong kind for each field. */
const wrong: Record<Exclude<keyof PeriodicRunEntry, 'retrying'>, unknown> = {
  id: 1,
  name: null,
  jobId: -1,
  replica: 2,
  fencingToken: '7',
  slot: 1.5,
  origin: 'cron',
  attempt: 'twice',
  startedAt: null,
  finishedAt: 'later',
  reason: 'crashed',
  durationMs: '4',
  error: { name: 'TypeError' },
};

describe("a coordinator's reply (RUN)", () => {
  it('is a run when every field is of its kind', () => {
    expect(RUN.accepts(run)).toBe(true);
    expect(RUN.accepts({ ...run, fencingToken: null, slot: null, finishedAt: null, reason: null })).toBe(
      true,
    );
    expect(RUN.accepts({ ...run, durationMs: null, error: null, retrying: true })).toBe(true);
  });

  it.each(Object.keys(wrong) as (keyof typeof wrong)[])('is refused with a wrong %s', (field) => {
    expect(RUN.accepts({ ...run, [field]: wrong[field] })).toBe(false);
  });

  it('is refused when it is not an object', () => {
    for (const value of [null, undefined, 'run', 3]) expect(RUN.accepts(value)).toBe(false);
  });
});

describe('a record a store kept (readRun, runOf)', () => {
  it('reads a field of the wrong kind as its default, and keeps the others', () => {
    const read = readRun({ ...wrong, id: run.id, name: run.name, startedAt: run.startedAt, extra: 1 });
    expect(read).toEqual({
      ...run,
      jobId: 0,
      replica: 'unknown',
      fencingToken: null,
      slot: null,
      origin: 'schedule',
      attempt: 1,
      finishedAt: null,
      reason: null,
      durationMs: null,
      error: { name: 'TypeError', message: '' },
    });
    expect(RUN.accepts(read)).toBe(true);
  });

  it("keeps only an error's name and message", () => {
    const read = readRun({ ...run, error: { name: 'E', message: 'm', stack: 'secret' } });
    expect(read?.error).toEqual({ name: 'E', message: 'm' });
  });

  it('is not a run without its id, its name or its start', () => {
    for (const field of ['id', 'name', 'startedAt'] as const) {
      expect(readRun({ ...run, [field]: undefined })).toBeUndefined();
      expect(() => runOf(JSON.stringify({ ...run, [field]: undefined }))).toThrow('which is not a run');
    }
  });

  it('reads the array form, named by its job, as the object form', () => {
    const fields = [run.id, run.jobId, run.replica, run.fencingToken, run.slot, run.origin, run.attempt];
    const array = [
      2,
      ...fields,
      run.startedAt,
      run.finishedAt,
      run.reason,
      run.durationMs,
      ['TypeError', 'boom'],
    ];
    expect(runOf(JSON.stringify(array), 'job')).toEqual(run);
    expect(runOf(JSON.stringify(run))).toEqual(run);
  });
});
