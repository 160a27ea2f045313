// The feed that brings the store's changes of stored schedules to a replica (StoredFeed), against a store whose
// reads the test answers: a count of changes lower than applied means a store that lost its data only when the
// heartbeat that counted it went out after the store answered the read of those applied; and a loss heard while
// a read is under way is read again from the first change, so that no schedule is taken for gone.
import { afterEach, describe, expect, it } from '@jest/globals';
import type { PeriodicStoredChanges, PeriodicStoredRecord } from '../../lib/scheduler/coordinator-port.js';
import { now } from '../../lib/scheduler/deadline-timer.js';
import type { StoreCalls } from '../../lib/scheduler/store-calls.js';
import { StoredFeed } from '../../lib/scheduler/stored-schedules.js';

const record = (name: string, change: number): PeriodicStoredRecord => ({
  name,
  handler: 'report',
  definition: '{"v":1,"options":{"every":60000}}',
  version: 1,
  createdAt: 0,
  updatedAt: 0,
  updatedBy: null,
  change,
});

/** A store of stored schedules, whose reads are answered at once or, once `hold()` is called, when released. */
function storeOf(records: PeriodicStoredRecord[]) {
  const reads: number[] = [];
  let held: (() => void) | undefined;
  let holding = false;
  const calls = {
    coordinator: {},
    timing: { heartbeatMs: 60_000 },
    async readStoredChanges(since: number): Promise<PeriodicStoredChanges> {
      reads.push(since);
      if (holding) {
        holding = false;
        await new Promise<void>((resolve) => (held = resolve));
      }
      const page = records.filter((one) => one.change > since);
      return {
        records: page,
        removed: [],
        change: Math.max(since, ...records.map((one) => one.change)),
        complete: true,
      };
    },
  } as unknown as StoreCalls;
  return {
    calls,
    reads,
    records,
    hold: () => (holding = true),
    release: () => held?.(),
  };
}

/** A feed over `store`, and the names it has applied. */
function feedOf(store: ReturnType<typeof storeOf>) {
  const names = new Set<string>();
  const removedEver: string[] = [];
  const feed = new StoredFeed(
    store.calls,
    (changes, gone) => {
      for (const one of changes.records) names.add(one.name);
      for (const name of [...changes.removed, ...gone]) {
        names.delete(name);
        removedEver.push(name);
      }
    },
    () => [...names],
  );
  return { feed, names, removedEver };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('StoredFeed', () => {
  let stop: (() => void) | undefined;
  afterEach(() => stop?.());

  it('takes a lower count from a heartbeat sent before the store answered its read for a stale one', async () => {
    const store = storeOf([record('once', 1)]);
    const { feed, names, removedEver } = feedOf(store);
    stop = () => feed.stop();
    const before = now();
    await feed.start();
    expect([...names]).toEqual(['once']);
    // PostgreSQL answers a statement as the store was when it began: a heartbeat sent before the write counts 0.
    feed.heard(0, before);
    await settle();
    expect(store.reads).toEqual([0]);
    expect(removedEver).toEqual([]);
    // One sent after the read was answered that counts fewer: the store lost them, and the feed reads it all again.
    store.records.length = 0;
    feed.heard(0, now() + 1);
    await settle();
    expect(store.reads).toEqual([0, 0]);
    expect(removedEver).toEqual(['once']);
  });

  it('reads again from the first change a loss heard while a read is under way, and removes nothing still stored', async () => {
    const store = storeOf([record('once', 1)]);
    const { feed, names, removedEver } = feedOf(store);
    stop = () => feed.stop();
    await feed.start();
    store.records.push(record('other', 2));
    store.hold();
    feed.heard(2, now() + 1);
    await settle();
    expect(store.reads).toEqual([0, 1]);
    // While the read of the changes after 1 is under way, a heartbeat counts fewer than applied.
    feed.heard(0, now() + 1);
    store.release();
    await settle();
    await settle();
    // The read after 1 is applied as it is; then everything is read again.
    expect(store.reads.slice(0, 3)).toEqual([0, 1, 0]);
    expect([...names].sort()).toEqual(['once', 'other']);
    expect(removedEver).toEqual([]);
  });
});
