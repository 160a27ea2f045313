// Stored schedules (docs/schedules.md) with real replica processes on Redis and PostgreSQL: schedules written by
// one process run in the others, each slot once, through a SIGKILL of a holder and a restart, with a change of
// data seen by all; and a rolling deploy in which a replica of an older version, without the handler, never runs
// them. The replicas are replica.ts with HANDLERS; a writer is one more, with WRITE, that upserts and closes.
import { describe, expect, it } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Store, type StoredRunEntry, stores, useReplicas } from './stores.js';

const LEASE_MS = 1500;
/** The quiet decorated job of replica.ts, which these tests do not look at. */
const QUIET = { LEASE_MS: String(LEASE_MS), EVERY: String(3_600_000), JOB: 'quiet' };
const EVERY = 1000;

describe.each(stores)('on %s', (_, store, describeStore) => {
  describeStore('stored schedules across replica processes', () => storedFleet(store));
});

function storedFleet(store: Store): void {
  const { replicas, start, end, holder } = useReplicas(store);
  let counted = 0;

  /** The runs of stored schedules recorded since the test began. */
  async function runs(): Promise<StoredRunEntry[]> {
    return (await store.entries<StoredRunEntry>('runs')).slice(counted).filter((run) => run.length === 8);
  }

  /** Waits until `done(runs)` holds, for at most `ms`. */
  async function until(done: (recorded: StoredRunEntry[]) => boolean, what: string, ms = 30_000) {
    for (let waited = 0; waited < ms; waited += 50) {
      const recorded = await runs();
      if (done(recorded)) return recorded;
      await sleep(50);
    }
    throw new Error(`${what} within ${ms} ms: ${JSON.stringify(await runs())}`);
  }

  /** Upserts `definitions` from a writer process, which closes once they are stored. */
  async function write(definitions: unknown[]): Promise<void> {
    const writer = start(`writer-${Date.now()}`, {
      ...QUIET,
      HANDLERS: 'tenant-report',
      WRITE: JSON.stringify(definitions),
    });
    await writer.waitFor('written');
    const { code } = await writer.exited;
    expect(code).toBe(0);
  }

  /** Each schedule's slots, which must each have run once. */
  function expectEachSlotOnce(recorded: StoredRunEntry[]): void {
    const keys = recorded.map((run) => `${run[6]} ${run[4]}`);
    expect(keys.length - new Set(keys).size).toBe(0);
  }

  async function endAll(): Promise<StoredRunEntry[]> {
    await Promise.all([...replicas.keys()].map((name) => end(name, 'SIGTERM')));
    const recorded = await runs();
    counted = (await store.entries('runs')).length;
    return recorded;
  }

  const schedules = (names: string[], version: number) =>
    names.map((name) => ({ name, handler: 'tenant-report', every: EVERY, data: { version } }));

  it('written by one process, run by the others: each slot once through a SIGKILL and a restart, and a change of data reaches them all', async () => {
    const names = Array.from({ length: 6 }, (_, i) => `report:${store.name}:${i}`);
    for (const name of ['A', 'B', 'C']) {
      await start(name, { ...QUIET, HANDLERS: 'tenant-report' }).waitFor('ready');
    }
    await write(schedules(names, 1));
    const ranEach = (recorded: StoredRunEntry[], from: number, version: number) =>
      names.every((name) =>
        recorded.some((run) => run[6] === name && run[5] >= from && run[7].version === version),
      );
    await until((recorded) => ranEach(recorded, 0, 1), 'every schedule did not run');

    // The holder of the first schedule is killed: its schedules go on elsewhere, and a new replica joins.
    const killed = (await holder(names[0]))!;
    expect(['A', 'B', 'C']).toContain(killed);
    await end(killed, 'SIGKILL');
    const afterKill = Date.now();
    await start('D', { ...QUIET, HANDLERS: 'tenant-report' }).waitFor('ready');
    await until(
      (recorded) => ranEach(recorded, afterKill + LEASE_MS, 1),
      'not every schedule ran after the kill',
    );

    // A change of data, written by another process, reaches every schedule's next runs, wherever they run.
    await write(schedules(names, 2));
    const changed = Date.now();
    await until((recorded) => ranEach(recorded, changed, 2), 'the new data did not reach every schedule');
    const recorded = await endAll();
    expectEachSlotOnce(recorded);
    expect(recorded.filter((run) => run[0] === killed && run[5] > afterKill)).toEqual([]);
    // Once a run had the new data, no later slot of the schedule ran with the old.
    for (const name of names) {
      const mine = recorded.filter((run) => run[6] === name).sort((a, b) => a[4] - b[4]);
      const first = mine.findIndex((run) => run[7].version === 2);
      expect(mine.slice(first).every((run) => run[7].version === 2)).toBe(true);
    }
    // More than one replica ran them: the schedules are spread.
    expect(new Set(recorded.map((run) => run[0])).size).toBeGreaterThan(1);
  }, 120_000);

  it('a rolling deploy: a replica of an older version, without the handler, never takes the lease; the new one runs every slot once', async () => {
    const names = Array.from({ length: 4 }, (_, i) => `deploy:${store.name}:${i}`);
    await start('old-1', { ...QUIET, HANDLERS: 'sync' }).waitFor('ready');
    await start('new-1', { ...QUIET, HANDLERS: 'tenant-report' }).waitFor('ready');
    await write(schedules(names, 1));
    const ranEach = (recorded: StoredRunEntry[], from: number) =>
      names.every((name) => recorded.some((run) => run[6] === name && run[5] >= from));
    await until((recorded) => ranEach(recorded, 0), 'every schedule did not run');

    // The new replica goes: the old one is alone, has the schedules and runs none of them.
    await end('new-1', 'SIGTERM');
    const alone = Date.now();
    await sleep(3 * EVERY + LEASE_MS);
    expect((await runs()).filter((run) => run[5] > alone + LEASE_MS)).toEqual([]);
    for (const name of names) expect(await holder(name)).toBeUndefined();

    // The next new replica runs them again.
    const back = Date.now();
    await start('new-2', { ...QUIET, HANDLERS: 'tenant-report' }).waitFor('ready');
    await until((recorded) => ranEach(recorded, back), 'the new replica did not run every schedule');
    const recorded = await endAll();
    expect(recorded.filter((run) => run[0] === 'old-1')).toEqual([]);
    expectEachSlotOnce(recorded);
  }, 120_000);
}
