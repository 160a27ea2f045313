// The contract every PeriodicCoordinator keeps, as checks that any test runner can run: each entry is a
// name and an async function that throws (node:assert) when the coordinator breaks the rule. The package's
// own coordinators run them in test/coordinators, test/redis and test/postgres; a custom coordinator runs them
// from the `nestjs-periodic/testing` subpath the same way:
//
//   import { coordinatorContract } from 'nestjs-periodic/testing';
//   for (const [rule, check] of coordinatorContract(subject)) it(rule, check);
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  PeriodicCoordinator,
  PeriodicFleetSchedule,
  PeriodicOperation,
  PeriodicRunEntry,
  PeriodicStoredRecord,
} from '../scheduler/coordinator-port.js';

/** What the contract needs of a store. */
export interface ContractSubject {
  /** A coordinator with this lease on a store shared by every coordinator this subject makes. */
  make(leaseMs: number): PeriodicCoordinator | Promise<PeriodicCoordinator>;
  /** Loses all of the store's data, as a restart without persistence, FLUSHALL or TRUNCATE would. */
  wipe(): Promise<void>;
  /** A coordinator whose store answers what no store of its kind answers, if the subject can make one. */
  garbled?(): PeriodicCoordinator;
}

/** Long enough for a round trip to a store on this machine and for a loaded machine's delays, short enough to wait for. */
const LEASE = 600;
/**
 * The lease of the checks that renew at 0.6 of it and look at 1.2 (past the first expiry, before the second):
 * a sleep on a loaded machine, with a round trip or two, may overrun by 0.4 of it (a Redis Cluster under load
 * overran 240 ms).
 */
const RENEWING = 2 * LEASE;
/** The slot of run 1 of the records' checks; run `i` is for the slot `i - 1` seconds after it. */
const AT = 1_700_000_000_000;

/**
 * Run `i` of job `name` in `replica` under `fencingToken`, started at its slot: in flight (`reason` null), or ended
 * 5 ms later, with an error to keep whole if it failed with `'error'`.
 */
function runEntry(
  name: string,
  i: number,
  fencingToken: number,
  reason: PeriodicRunEntry['reason'],
  replica = `replica-${fencingToken}`,
): PeriodicRunEntry {
  return {
    id: `${replica}/${name}#${i}`,
    name,
    jobId: i,
    replica,
    fencingToken,
    slot: AT + i * 1000,
    origin: 'schedule',
    attempt: 1,
    startedAt: AT + i * 1000,
    finishedAt: reason === null ? null : AT + i * 1000 + 5,
    reason,
    durationMs: reason === null ? null : 5.25,
    error: reason === 'error' ? { name: 'TypeError', message: 'a "quoted",\nmessage' } : null,
  };
}

export function coordinatorContract(subject: ContractSubject): [string, () => Promise<void>][] {
  let jobs = 0;
  /** A job name no other check uses. */
  const job = () => `job-${process.pid}-${++jobs}`;
  const checks: [string, () => Promise<void>][] = [
    [
      'acquire of a free lease resolves a positive safe integer, at least the clock in microseconds',
      async () => {
        const coordinator = await subject.make(LEASE);
        const token = await coordinator.acquire(job(), 'a');
        assert.ok(Number.isSafeInteger(token) && token > 0, `token ${token}`);
        // The store's clock, allowing it a minute of skew from this machine's.
        assert.ok(token >= (Date.now() - 60_000) * 1000, `token ${token} is below the clock in microseconds`);
      },
    ],
    [
      'acquire of a held lease resolves 0, for another owner and for the holder itself',
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        assert.ok((await coordinator.acquire(name, 'a')) > 0);
        assert.equal(await coordinator.acquire(name, 'b'), 0);
        assert.equal(await coordinator.acquire(name, 'a'), 0);
      },
    ],
    [
      'a lease not renewed expires after leaseMs: another owner takes it',
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        await coordinator.acquire(name, 'a');
        await sleep(LEASE * 1.5);
        assert.ok((await coordinator.acquire(name, 'b')) > 0);
      },
    ],
    [
      'renew by the holder extends the lease by leaseMs; by anyone else it fails and changes nothing',
      async () => {
        const coordinator = await subject.make(RENEWING);
        const name = job();
        await coordinator.acquire(name, 'a');
        await sleep(RENEWING * 0.6);
        assert.equal(await coordinator.renew(name, 'b'), false);
        assert.equal(await coordinator.renew(name, 'a'), true);
        await sleep(RENEWING * 0.6);
        assert.equal(await coordinator.acquire(name, 'b'), 0, 'the renewed lease is still held');
        await sleep(RENEWING * 0.6);
        assert.ok((await coordinator.acquire(name, 'b')) > 0, 'the lease expires leaseMs after its renewal');
      },
    ],
    [
      'renew of an expired lease fails and does not bring it back',
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        await coordinator.acquire(name, 'a');
        await sleep(LEASE * 1.5);
        assert.equal(await coordinator.renew(name, 'a'), false);
        assert.ok((await coordinator.acquire(name, 'b')) > 0);
      },
    ],
    [
      'release by anyone but the holder fails and leaves the lease; by the holder it frees it at once',
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        await coordinator.acquire(name, 'a');
        assert.equal(await coordinator.release(name, 'b'), false);
        assert.equal(await coordinator.acquire(name, 'b'), 0);
        assert.equal(await coordinator.release(name, 'a'), true);
        assert.ok((await coordinator.acquire(name, 'b')) > 0);
        assert.equal(await coordinator.release(name, 'a'), false);
      },
    ],
    [
      'fencing tokens grow strictly from holder to holder, per job',
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        const tokens: number[] = [];
        for (const owner of ['a', 'b', 'c', 'd', 'e']) {
          tokens.push(await coordinator.acquire(name, owner));
          await coordinator.release(name, owner);
        }
        for (let i = 1; i < tokens.length; i++) assert.ok(tokens[i] > tokens[i - 1], `tokens ${tokens}`);
        assert.ok((await coordinator.acquire(job(), 'a')) > 0, 'another job has a lease of its own');
      },
    ],
    [
      "fencing tokens still grow after the store's data is wiped, and the schedule is gone with it",
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        const before = await coordinator.acquire(name, 'a');
        const schedule = { grid: 'every 1000 regular', last: 1000, next: 2000 };
        assert.equal(await coordinator.writeSchedule(name, 'a', before, schedule), true);
        await subject.wipe();
        const after = await coordinator.acquire(name, 'b');
        assert.ok(after > before, `token ${after} after the wipe, ${before} before`);
        assert.equal(await coordinator.readSchedule(name), null, 'the schedule is lost with the data');
      },
    ],
    [
      'readSchedule resolves null for a job whose schedule was never written',
      async () => {
        const coordinator = await subject.make(LEASE);
        assert.equal(await coordinator.readSchedule(job()), null);
      },
    ],
    [
      'the holder writes the schedule with its token; it outlives the lease, and the next holder reads it',
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        const token = await coordinator.acquire(name, 'a');
        const schedule = { grid: 'every 60000 regular', last: Date.now(), next: Date.now() + 60_000 };
        assert.equal(await coordinator.writeSchedule(name, 'a', token, schedule), true);
        assert.deepEqual(await coordinator.readSchedule(name), schedule);
        assert.equal(await coordinator.readSchedule(job()), null, 'another job has a schedule of its own');
        await coordinator.release(name, 'a');
        assert.deepEqual(await coordinator.readSchedule(name), schedule, 'after a release');
        const next = await coordinator.acquire(name, 'b');
        await sleep(LEASE * 1.5);
        assert.deepEqual(await coordinator.readSchedule(name), schedule, 'after an expiry');
        assert.equal(await coordinator.writeSchedule(name, 'b', next, schedule), false, 'after an expiry');
      },
    ],
    [
      'writeSchedule by anyone but the holder, or with a token not its own, fails and changes nothing',
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        const first = await coordinator.acquire(name, 'a');
        const kept = { grid: 'every 1000 shifted', last: 1000, next: 0 };
        assert.equal(await coordinator.writeSchedule(name, 'a', first, kept), true);
        await coordinator.release(name, 'a');
        const second = await coordinator.acquire(name, 'b');
        const moved = { grid: 'every 1000 shifted', last: 5000, next: 6000 };
        assert.equal(await coordinator.writeSchedule(name, 'a', first, moved), false, 'the former holder');
        assert.equal(await coordinator.writeSchedule(name, 'b', first, moved), false, 'a stale token');
        assert.equal(await coordinator.writeSchedule(name, 'c', second, moved), false, 'another owner');
        assert.equal(
          await coordinator.writeSchedule(job(), 'b', second, moved),
          false,
          'a job it does not hold',
        );
        assert.deepEqual(await coordinator.readSchedule(name), kept);
      },
    ],
    [
      'writeSchedule never moves the last slot back; the same slot may be written again',
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        const token = await coordinator.acquire(name, 'a');
        const write = (last: number, next: number) =>
          coordinator.writeSchedule(name, 'a', token, { grid: 'every 1000 shifted', last, next });
        assert.equal(await write(2000, 0), true);
        assert.equal(await write(2000, 3500), true, 'the end of the run of slot 2000');
        assert.equal(await write(1000, 2000), false);
        assert.deepEqual(await coordinator.readSchedule(name), {
          grid: 'every 1000 shifted',
          last: 2000,
          next: 3500,
        });
      },
    ],
    [
      "a schedule's count of claimed slots (maxRuns) and its backfill are read back as written; a write without has none",
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        const token = await coordinator.acquire(name, 'a');
        const grid = 'every 1000 regular';
        const write = (schedule: PeriodicFleetSchedule) =>
          coordinator.writeSchedule(name, 'a', token, schedule);
        assert.equal(await write({ grid, last: 1000, next: 2000, runs: 1 }), true);
        assert.equal(await write({ grid, last: 2000, next: 3000, runs: 2 }), true);
        assert.deepEqual(await coordinator.readSchedule(name), { grid, last: 2000, next: 3000, runs: 2 });
        const backfill = { next: 500, to: 900 };
        assert.equal(
          await write({ grid, last: 2000, next: 3000, backfill }),
          true,
          'a backfill without a count',
        );
        assert.deepEqual(await coordinator.readSchedule(name), { grid, last: 2000, next: 3000, backfill });
        const both = { grid, last: 2000, next: 3000, runs: 3, backfill };
        assert.equal(await write(both), true);
        assert.deepEqual(await coordinator.readSchedule(name), both);
        assert.equal(await write({ grid, last: 2000, next: 3500 }), true, 'a write without either');
        assert.deepEqual(await coordinator.readSchedule(name), { grid, last: 2000, next: 3500 });
        assert.equal(await coordinator.readSchedule(job()).then((read) => read?.runs), undefined);
      },
    ],
  ];
  checks.push(
    ...batchedContract(subject, job),
    ...storedContract(subject, job),
    ...incidentContract(subject, job),
  );
  const { garbled } = subject;
  if (garbled !== undefined) {
    checks.push([
      'a reply that cannot be understood is a failure, never a lease',
      async () => {
        await assert.rejects(garbled().acquire(job(), 'a'));
      },
    ]);
  }
  return checks;
}

/**
 * The batched steps (`heartbeat`, `writeSchedules`, `releaseAll`), checked on a coordinator that has them: each
 * does what the steps for one job do, for many jobs at once, and keeps the fleet's members.
 */
function batchedContract(subject: ContractSubject, job: () => string): [string, () => Promise<void>][] {
  /** The coordinator, with its batched steps, or the check is skipped (they are optional). */
  const batched = async (leaseMs: number) => {
    const coordinator = await subject.make(leaseMs);
    const { heartbeat, writeSchedules, releaseAll } = coordinator;
    if (heartbeat === undefined || writeSchedules === undefined || releaseAll === undefined) return undefined;
    return {
      coordinator,
      heartbeat: heartbeat.bind(coordinator),
      writeSchedules: writeSchedules.bind(coordinator),
      releaseAll: releaseAll.bind(coordinator),
    };
  };
  const operated = (leaseMs: number) => operatedSteps(subject, leaseMs);
  const carried = async (leaseMs: number) => {
    const store = await operatedSteps(subject, leaseMs);
    const { requestTrigger, readTrigger, answerTrigger } = store?.coordinator ?? {};
    if (store === undefined || !requestTrigger || !readTrigger || !answerTrigger) return undefined;
    return {
      ...store,
      requestTrigger: requestTrigger.bind(store.coordinator),
      readTrigger: readTrigger.bind(store.coordinator),
      answerTrigger: answerTrigger.bind(store.coordinator),
    };
  };
  const recorded = async (leaseMs: number) => {
    const store = await operatedSteps(subject, leaseMs);
    const { recordRuns, readHistory, readFleet } = store?.coordinator ?? {};
    if (store === undefined || !recordRuns || !readHistory || !readFleet) return undefined;
    return {
      ...store,
      recordRuns: recordRuns.bind(store.coordinator),
      readHistory: readHistory.bind(store.coordinator),
      readFleet: readFleet.bind(store.coordinator),
    };
  };
  const member = (owner: string, jobs = 'digest') => ({ owner, replica: `replica ${owner}`, jobs });
  /** Member owners unique to the check, so that checks sharing a store do not see each other's. */
  let members = 0;
  const owner = () => `owner-${process.pid}-${++members}-${Math.random().toString(36).slice(2, 8)}`;
  const owners = (reply: { members: { owner: string }[] }) => reply.members.map((one) => one.owner).sort();
  /** The records of runs, as checked in two ways: recorded by a replica that holds the job's lease, or by one that does not. */
  const records = async (held: boolean) => {
    const store = await recorded(LEASE);
    if (store === undefined) return;
    const [name, neighbour] = [job(), job()];
    // Recorded by the replica that holds the job's lease, or by one that holds nothing.
    const a = owner();
    const taken = held ? await store.heartbeat({ member: member(a), renew: [], acquire: [name] }) : undefined;
    const fencingToken = taken?.acquired[0]?.fencingToken ?? 7;
    const renew = [{ name, fencingToken }];
    const beating = held
      ? setInterval(() => void store.heartbeat({ member: member(a), renew, acquire: [] }), LEASE / 4)
      : undefined;
    const run = (i: number, ended: PeriodicRunEntry['reason']) =>
      runEntry(name, i, fencingToken, ended, 'r1');
    try {
      // A run starts (recorded open), another starts and ends in one record, then the first ends.
      await store.recordRuns([run(1, null)], 3);
      await store.recordRuns([run(2, 'error')], 3);
      assert.deepEqual(await store.readHistory(name, 10, null), [run(2, 'error'), run(1, null)]);
      await store.recordRuns([run(1, 'normal')], 3);
      assert.deepEqual(await store.readHistory(name, 10, null), [run(2, 'error'), run(1, 'normal')]);
      await store.recordRuns([run(3, 'timeout'), run(4, 'error'), { ...run(1, null), name: neighbour }], 3);
      assert.deepEqual(await store.readHistory(name, 10, null), [
        run(4, 'error'),
        run(3, 'timeout'),
        run(2, 'error'),
      ]);
      assert.deepEqual(await store.readHistory(name, 1, null), [run(4, 'error')]);
      assert.deepEqual(await store.readHistory(name, 10, AT + 4000), [run(3, 'timeout'), run(2, 'error')]);
      const [fleet, other, unknown] = await store.readFleet([name, neighbour, job()]);
      // 2 failed, then 1 succeeded (recorded after it, ending at AT + 1005), then 3 and 4 failed.
      assert.equal(fleet.lastSucceededAt, AT + 1005);
      assert.equal(fleet.consecutiveFailures, 2);
      assert.deepEqual(fleet.lastRun, run(4, 'error'));
      assert.equal(other.lastRun?.reason, null);
      // A failed run whose slot runs again is not a failed slot yet.
      await store.recordRuns([{ ...run(5, 'error'), retrying: true }], 3);
      const [retried] = await store.readFleet([name]);
      assert.equal(retried.consecutiveFailures, 2);
      assert.equal(retried.lastRun?.jobId, 5);
      // In one step, in order: a success then a failure counts that failure; a failure then a success, none.
      await store.recordRuns([run(6, 'normal'), run(7, 'timeout')], 3);
      const [failedLast] = await store.readFleet([name]);
      assert.equal(failedLast.lastSucceededAt, AT + 6005);
      assert.equal(failedLast.consecutiveFailures, 1);
      await store.recordRuns([run(8, 'error'), run(9, 'normal')], 3);
      const [succeededLast] = await store.readFleet([name]);
      assert.equal(succeededLast.lastSucceededAt, AT + 9005);
      assert.equal(succeededLast.consecutiveFailures, 0);
      assert.deepEqual(unknown, {
        name: unknown.name,
        holder: null,
        pause: null,
        schedule: null,
        lastRun: null,
        lastSucceededAt: null,
        consecutiveFailures: 0,
      });
      // An end whose start was recorded before, sent with more runs of its job than a store looks back over
      // (32), or than it keeps: the end replaces its start, and the newest run is the latest.
      const later = Array.from({ length: 40 }, (_, i) => run(11 + i, 'error'));
      await store.recordRuns([run(10, null)], 100);
      await store.recordRuns([run(10, 'normal'), ...later], 100);
      const runs = await store.readHistory(name, 100, null, 100);
      assert.deepEqual(
        runs.filter(({ jobId }) => jobId === 10),
        [run(10, 'normal')],
      );
      const [afterLater] = await store.readFleet([name]);
      assert.deepEqual(afterLater.lastRun, run(50, 'error'));
      assert.equal(afterLater.lastSucceededAt, AT + 10_005);
      assert.equal(afterLater.consecutiveFailures, 40);
      await store.recordRuns([run(51, null)], 2);
      await store.recordRuns(
        [run(51, 'normal'), ...Array.from({ length: 12 }, (_, i) => run(52 + i, 'normal'))],
        2,
      );
      assert.deepEqual(await store.readHistory(name, 2, null, 2), [run(63, 'normal'), run(62, 'normal')]);
      assert.deepEqual((await store.readFleet([name]))[0].lastRun, run(63, 'normal'));
      // Jobs that keep different numbers of runs, recorded in the same turn: each keeps its own number.
      const [many, few] = [job(), job()];
      const twelve = (of: string) =>
        Array.from({ length: 12 }, (_, i) => ({ ...runEntry(of, i + 1, fencingToken, 'normal', 'r1') }));
      await Promise.all([store.recordRuns(twelve(many), 10), store.recordRuns(twelve(few), 2)]);
      const jobIds = async (of: string, keep: number) =>
        (await store.readHistory(of, keep, null, keep)).map(({ jobId }) => jobId);
      assert.deepEqual(await jobIds(many, 10), [12, 11, 10, 9, 8, 7, 6, 5, 4, 3]);
      assert.deepEqual(await jobIds(few, 2), [12, 11]);
    } finally {
      clearInterval(beating);
      if (held) await store.releaseAll(a, renew, true);
    }
  };
  return [
    [
      'heartbeat names the fleet’s records the same for every owner, and otherwise once they are wiped (storeReset)',
      async () => {
        const store = await batched(LEASE);
        if (store === undefined) return;
        const beat = async (who: string) =>
          (await store.heartbeat({ member: member(who), renew: [], acquire: [] })).fleet;
        const [a, b] = [owner(), owner()];
        const named = await beat(a);
        // A coordinator that cannot tell leaves it out.
        if (named === undefined) return;
        assert.equal(typeof named, 'string');
        assert.equal(await beat(b), named, 'another owner reads the same name');
        assert.equal(await beat(a), named, 'a later heartbeat reads the same name');
        await subject.wipe();
        const renamed = await beat(b);
        assert.equal(typeof renamed, 'string');
        assert.notEqual(renamed, named, 'the records were wiped: another name');
        assert.equal(await beat(a), renamed);
      },
    ],
    [
      'heartbeat writes the member record and answers the live members; one that stops beating is gone after leaseMs',
      async () => {
        const store = await batched(RENEWING);
        if (store === undefined) return;
        const [a, b] = [owner(), owner()];
        await store.heartbeat({ member: member(a), renew: [], acquire: [] });
        const reply = await store.heartbeat({ member: member(b, 'other'), renew: [], acquire: [] });
        assert.ok(owners(reply).includes(a) && owners(reply).includes(b), `members ${owners(reply)}`);
        assert.deepEqual(
          reply.members.find((one) => one.owner === b),
          member(b, 'other'),
        );
        await sleep(RENEWING * 0.6);
        await store.heartbeat({ member: member(b), renew: [], acquire: [] });
        await sleep(RENEWING * 0.6);
        const later = await store.heartbeat({ member: member(b), renew: [], acquire: [] });
        assert.ok(
          !owners(later).includes(a),
          `${a} stopped beating ${RENEWING * 1.2}ms ago and is still a member`,
        );
        assert.deepEqual(
          later.members.find((one) => one.owner === b),
          member(b),
          'the record is rewritten with each heartbeat',
        );
      },
    ],
    [
      'heartbeat takes each free lease with a new token and its schedule, in the order asked, and none that is held',
      async () => {
        const store = await batched(LEASE);
        if (store === undefined) return;
        const { coordinator } = store;
        const [free, held, written] = [job(), job(), job()];
        const schedule = { grid: 'every 1000 regular', last: 5000, next: 6000 };
        const before = await coordinator.acquire(written, 'someone');
        assert.equal(await coordinator.writeSchedule(written, 'someone', before, schedule), true);
        await coordinator.release(written, 'someone');
        await coordinator.acquire(held, 'someone');
        const a = owner();
        const reply = await store.heartbeat({ member: member(a), renew: [], acquire: [free, held, written] });
        assert.equal(reply.acquired.length, 3);
        const [first, second, third] = reply.acquired;
        assert.ok(first !== null && Number.isSafeInteger(first.fencingToken) && first.fencingToken > 0);
        assert.equal(first.schedule, null);
        assert.equal(second, null, 'a held lease is not taken');
        assert.ok(third !== null && third.fencingToken > before, 'tokens grow from holder to holder');
        assert.deepEqual(third.schedule, schedule);
        assert.equal(await coordinator.acquire(free, 'someone'), 0, 'the lease taken is held');
        assert.equal(await coordinator.writeSchedule(free, a, first.fencingToken, schedule), true);
      },
    ],
    [
      'heartbeat renews a lease only for its owner with its token, by leaseMs, and answers which it renewed',
      async () => {
        const store = await batched(RENEWING);
        if (store === undefined) return;
        const { coordinator } = store;
        const [a, b] = [owner(), owner()];
        const [name, other] = [job(), job()];
        const taken = await store.heartbeat({ member: member(a), renew: [], acquire: [name, other] });
        const [token, otherToken] = taken.acquired.map((holding) => holding!.fencingToken);
        await sleep(RENEWING * 0.6);
        const reply = await store.heartbeat({
          member: member(a),
          renew: [
            { name, fencingToken: token },
            { name: other, fencingToken: otherToken + 1 },
          ],
          acquire: [],
        });
        assert.deepEqual(reply.renewed, [true, false], 'a token not its own renews nothing');
        const stranger = await store.heartbeat({
          member: member(b),
          renew: [{ name, fencingToken: token }],
          acquire: [],
        });
        assert.deepEqual(stranger.renewed, [false], 'another owner renews nothing');
        await sleep(RENEWING * 0.6);
        assert.equal(await coordinator.acquire(name, 'someone'), 0, 'the renewed lease is still held');
        assert.ok((await coordinator.acquire(other, 'someone')) > 0, 'the lease not renewed expired');
        await sleep(RENEWING * 0.6);
        assert.ok(
          (await coordinator.acquire(name, 'someone')) > 0,
          'the lease expires leaseMs after its renewal',
        );
      },
    ],
    [
      'writeSchedules writes each schedule as writeSchedule does, and answers each in order',
      async () => {
        const store = await batched(LEASE);
        if (store === undefined) return;
        const { coordinator } = store;
        const a = owner();
        const [mine, stale, back, notMine] = [job(), job(), job(), job()];
        const taken = await store.heartbeat({ member: member(a), renew: [], acquire: [mine, stale, back] });
        const [token, staleToken, backToken] = taken.acquired.map((holding) => holding!.fencingToken);
        const at = (last: number) => ({ grid: 'every 1000 regular', last, next: last + 1000 });
        assert.deepEqual(
          await store.writeSchedules(a, [{ name: back, fencingToken: backToken, schedule: at(9000) }]),
          [true],
        );
        const answers = await store.writeSchedules(a, [
          { name: mine, fencingToken: token, schedule: at(2000) },
          { name: stale, fencingToken: staleToken - 1, schedule: at(2000) },
          { name: back, fencingToken: backToken, schedule: at(8000) },
          { name: notMine, fencingToken: token, schedule: at(2000) },
        ]);
        assert.deepEqual(answers, [true, false, false, false]);
        assert.deepEqual(await coordinator.readSchedule(mine), at(2000));
        assert.equal(await coordinator.readSchedule(stale), null);
        assert.deepEqual(await coordinator.readSchedule(back), at(9000), 'the last slot never goes back');
        assert.equal(await coordinator.readSchedule(notMine), null);
      },
    ],
    [
      'writeSchedules writes the count of claimed slots and a backfill; the heartbeat that takes the lease reads them',
      async () => {
        const store = await batched(LEASE);
        if (store === undefined) return;
        const [a, b] = [owner(), owner()];
        const [counted, plain] = [job(), job()];
        const taken = await store.heartbeat({ member: member(a), renew: [], acquire: [counted, plain] });
        const [token, plainToken] = taken.acquired.map((holding) => holding!.fencingToken);
        const grid = 'every 1000 regular';
        assert.deepEqual(
          await store.writeSchedules(a, [
            { name: counted, fencingToken: token, schedule: { grid, last: 1000, next: 2000, runs: 5 } },
            { name: plain, fencingToken: plainToken, schedule: { grid, last: 1000, next: 2000 } },
          ]),
          [true, true],
        );
        assert.deepEqual(
          await store.writeSchedules(a, [
            {
              name: counted,
              fencingToken: token,
              schedule: { grid, last: 1000, next: 2500, runs: 5, backfill: { next: 100, to: 400 } },
            },
          ]),
          [true],
          'the end of a shifted run: the same count',
        );
        await store.releaseAll(
          a,
          [
            { name: counted, fencingToken: token },
            { name: plain, fencingToken: plainToken },
          ],
          true,
        );
        const next = await store.heartbeat({ member: member(b), renew: [], acquire: [counted, plain] });
        assert.deepEqual(
          next.acquired.map((holding) => holding?.schedule),
          [
            { grid, last: 1000, next: 2500, runs: 5, backfill: { next: 100, to: 400 } },
            { grid, last: 1000, next: 2000 },
          ],
        );
      },
    ],
    [
      'releaseAll frees the leases the owner holds with those tokens, at once; with leave, the member is gone',
      async () => {
        const store = await batched(LEASE);
        if (store === undefined) return;
        const { coordinator } = store;
        const [a, b] = [owner(), owner()];
        const [one, two, kept, gone] = [job(), job(), job(), job()];
        const taken = await store.heartbeat({
          member: member(a),
          renew: [],
          acquire: [one, two, kept, gone],
        });
        const [first, second, third, fourth] = taken.acquired.map((holding) => holding!.fencingToken);
        await store.releaseAll(b, [{ name: one, fencingToken: first }], false);
        assert.equal(await coordinator.acquire(one, 'someone'), 0, 'another owner releases nothing');
        await store.releaseAll(a, [{ name: kept, fencingToken: third + 1 }], false);
        assert.equal(await coordinator.acquire(kept, 'someone'), 0, 'a token not its own releases nothing');
        await store.releaseAll(
          a,
          [
            { name: one, fencingToken: first },
            { name: two, fencingToken: second },
            { name: gone, fencingToken: fourth },
          ],
          true,
        );
        assert.ok((await coordinator.acquire(one, 'someone')) > first);
        assert.ok((await coordinator.acquire(two, 'someone')) > second);
        const reply = await store.heartbeat({ member: member(b), renew: [], acquire: [] });
        assert.ok(!owners(reply).includes(a), 'the member left');
        const at = { grid: 'every 1000 regular', last: 1000, next: 2000 };
        assert.deepEqual(
          await store.writeSchedules(a, [{ name: gone, fencingToken: fourth, schedule: at }]),
          [false],
          'a member that left writes nothing, even with the latest token of a lease it gave up',
        );
      },
    ],
    [
      'a step of 4,500 jobs: each taken, renewed and written, as in a step of one',
      async () => {
        // A lease long enough for the steps of so many jobs on a busy machine.
        const store = await batched(20 * LEASE);
        if (store === undefined) return;
        const a = owner();
        const names = Array.from({ length: 4500 }, () => job());
        const taken = await store.heartbeat({ member: member(a), renew: [], acquire: names });
        const tokens = taken.acquired.map((holding) => holding?.fencingToken ?? 0);
        assert.ok(tokens.every((token) => token > 0));
        const renew = names.map((name, i) => ({ name, fencingToken: tokens[i] }));
        const renewed = await store.heartbeat({ member: member(a), renew, acquire: [] });
        assert.ok(renewed.renewed.length === 4500 && renewed.renewed.every(Boolean));
        const writes = names.map((name, i) => ({
          name,
          fencingToken: tokens[i],
          schedule: { grid: 'every 1000 regular', last: 1000 + i, next: 2000 + i },
        }));
        const written = await store.writeSchedules(a, writes);
        assert.ok(written.length === 4500 && written.every(Boolean));
        assert.deepEqual(await store.coordinator.readSchedule(names[4499]), writes[4499].schedule);
        await store.releaseAll(a, renew, true);
      },
    ],
    [
      "a pause is the fleet's: the holder's claims are taken but answered 'paused', until a resume",
      async () => {
        const store = await operated(LEASE);
        if (store === undefined) return;
        const [a, name, idle] = [owner(), job(), job()];
        const pause = {
          action: 'pause' as const,
          by: 'alice',
          note: 'the API is down',
          replica: 'r1',
          at: 1_700_000_000_000,
        };
        // A job no replica has held yet can be paused; the pause outlives the holders.
        await store.operate(name, pause, 10);
        assert.deepEqual(await store.readPause(name), pause);
        assert.equal(await store.readPause(idle), null);
        // A name that holds another's, with a line break or quotes, pauses only itself.
        await store.operate(`${idle}\n"${name}"`, pause, 10);
        const taken = await store.heartbeat({ member: member(a), renew: [], acquire: [name, idle] });
        const [token, idleToken] = taken.acquired.map((holding) => holding!.fencingToken);
        assert.ok(taken.paused?.includes(name), 'a heartbeat names the jobs the fleet has paused');
        assert.ok(!taken.paused?.includes(idle));
        const write = (last: number) => [
          { name, fencingToken: token, schedule: { grid: 'every 1000 regular', last, next: last + 1000 } },
          {
            name: idle,
            fencingToken: idleToken,
            schedule: { grid: 'every 1000 regular', last, next: last + 1000 },
          },
        ];
        assert.deepEqual(await store.writeSchedules(a, write(1000)), ['paused', true]);
        assert.equal((await store.coordinator.readSchedule(name))?.last, 1000, 'the paused claim is written');
        await store.operate(name, { ...pause, action: 'resume', by: 'bob', note: null, replica: 'r2' }, 10);
        assert.equal(await store.readPause(name), null);
        assert.deepEqual(await store.writeSchedules(a, write(2000)), [true, true]);
        const renew = [
          { name, fencingToken: token },
          { name: idle, fencingToken: idleToken },
        ];
        const beat = await store.heartbeat({ member: member(a), renew, acquire: [] });
        assert.ok(!beat.paused?.includes(name), 'nor a job resumed since');
        await store.releaseAll(
          a,
          [
            { name, fencingToken: token },
            { name: idle, fencingToken: idleToken },
          ],
          true,
        );
      },
    ],
    [
      'the audit trail keeps the latest `keep` operations of a job, newest first; a trigger pauses nothing',
      async () => {
        const store = await operated(LEASE);
        if (store === undefined) return;
        const [name, neighbour] = [job(), job()];
        const at = 1_700_000_000_000;
        const operations = Array.from({ length: 5 }, (_, i) => ({
          action: (['pause', 'resume', 'trigger'] as const)[i % 3],
          by: i === 4 ? null : `user ${i}`,
          note: i === 1 ? 'a note with "quotes", a comma,\nand a line' : null,
          replica: `r${i}`,
          at: at + i,
        }));
        for (const operation of operations) await store.operate(name, operation, 3);
        await store.operate(neighbour, operations[0], 3);
        assert.deepEqual(await store.readAudit(name, 50), operations.slice(2).reverse());
        assert.deepEqual(await store.readAudit(name, 1), [operations[4]]);
        assert.deepEqual(await store.readAudit(job(), 50), []);
        // pause, resume, trigger, pause, resume: the last that changed the pause was a resume.
        assert.equal(await store.readPause(name), null);
        assert.deepEqual(await store.readPause(neighbour), operations[0]);
      },
    ],
    [
      'run records: a start replaced by its end, the latest `keep` kept, read newest first, before a time',
      () => records(false),
    ],
    ['run records of the replica that holds the lease: the same, read by any replica', () => records(true)],
    [
      "runs across a handover: the former holder's writes are refused once another took the lease, its runs still recorded beside the new holder's",
      async () => {
        const store = await recorded(LEASE);
        if (store === undefined) return;
        const [a, b, name] = [owner(), owner(), job()];
        const schedule = (last: number) => ({ grid: 'every 1000 regular', last, next: last + 1000 });
        const run = (i: number, fencingToken: number, ended: PeriodicRunEntry['reason']) =>
          runEntry(name, i, fencingToken, ended);
        const first = (await store.heartbeat({ member: member(a), renew: [], acquire: [name] })).acquired[0]!
          .fencingToken;
        assert.deepEqual(
          await store.writeSchedules(a, [{ name, fencingToken: first, schedule: schedule(1000) }]),
          [true],
        );
        await store.recordRuns([run(1, first, 'normal'), run(2, first, null)], 10);
        // The lease is given up while run 2 is in flight (a handover that did not drain), and b takes it.
        await store.releaseAll(a, [{ name, fencingToken: first }], false);
        const second = (await store.heartbeat({ member: member(b), renew: [], acquire: [name] }))
          .acquired[0]!;
        assert.ok(second.fencingToken > first, `${second.fencingToken} after ${first}`);
        assert.deepEqual(second.schedule, schedule(1000));
        assert.deepEqual(
          await store.writeSchedules(a, [{ name, fencingToken: first, schedule: schedule(2000) }]),
          [false],
        );
        await store.recordRuns([run(2, first, 'leaseLost')], 10);
        const { fencingToken } = second;
        assert.deepEqual(await store.writeSchedules(b, [{ name, fencingToken, schedule: schedule(3000) }]), [
          true,
        ]);
        await store.recordRuns([run(3, fencingToken, 'normal'), run(4, fencingToken, 'error')], 10);
        assert.deepEqual(await store.readHistory(name, 10, null, 10), [
          run(4, fencingToken, 'error'),
          run(3, fencingToken, 'normal'),
          run(2, first, 'leaseLost'),
          run(1, first, 'normal'),
        ]);
        const [read] = await store.readFleet([name]);
        assert.deepEqual(read.lastRun, run(4, fencingToken, 'error'));
        assert.equal(read.lastSucceededAt, AT + 3005);
        assert.equal(read.consecutiveFailures, 1);
        await store.releaseAll(b, [{ name, fencingToken }], true);
        await store.releaseAll(a, [], true);
      },
    ],
    [
      'a trigger left for the holder is taken by its next heartbeat that renews the lease, once; or withdrawn',
      async () => {
        const store = await carried(LEASE);
        if (store === undefined) return;
        const [a, b, name] = [owner(), owner(), job()];
        const taken = await store.heartbeat({ member: member(a), renew: [], acquire: [name] });
        const fencingToken = taken.acquired[0]!.fencingToken;
        const request = { id: `t-${name}`, name, by: 'alice', replica: 'r2', at: 1_700_000_000_000 };
        await store.requestTrigger(request);
        assert.equal(await store.readTrigger(name, request.id, false), 'pending');
        // Another replica's heartbeat, which holds nothing, carries nothing.
        assert.deepEqual(
          (await store.heartbeat({ member: member(b), renew: [], acquire: [name] })).triggers ?? [],
          [],
        );
        const renew = [{ name, fencingToken }];
        assert.deepEqual((await store.heartbeat({ member: member(a), renew, acquire: [] })).triggers, [
          request,
        ]);
        assert.deepEqual((await store.heartbeat({ member: member(a), renew, acquire: [] })).triggers, []);
        assert.equal(await store.readTrigger(name, request.id, true), 'taken');
        const answer = { ok: true as const, jobId: 12, replica: 'r1' };
        await store.answerTrigger(name, request.id, answer);
        assert.deepEqual(await store.readTrigger(name, request.id, false), answer);
        // An answer read is forgotten.
        assert.equal(await store.readTrigger(name, request.id, false), 'taken');
        const later = { ...request, id: `u-${name}`, by: null };
        await store.requestTrigger(later);
        assert.equal(await store.readTrigger(name, later.id, true), 'withdrawn');
        assert.deepEqual((await store.heartbeat({ member: member(a), renew, acquire: [] })).triggers, []);
        await store.releaseAll(a, renew, true);
        await store.releaseAll(b, [], true);
      },
    ],
    [
      'readFleet tells the holder, its token and lease end, the pause and the schedule',
      async () => {
        const store = await recorded(LEASE);
        if (store === undefined) return;
        const [a, name] = [owner(), job()];
        const before = Date.now();
        const taken = await store.heartbeat({ member: member(a), renew: [], acquire: [name] });
        const fencingToken = taken.acquired[0]!.fencingToken;
        const schedule = { grid: 'every 1000 regular', last: 5000, next: 6000 };
        assert.deepEqual(await store.writeSchedules(a, [{ name, fencingToken, schedule }]), [true]);
        const pause = { action: 'pause' as const, by: 'alice', note: null, replica: 'r1', at: before };
        await store.operate(name, pause, 10);
        const [read] = await store.readFleet([name]);
        assert.equal(read.holder?.owner, a);
        assert.equal(read.holder?.fencingToken, fencingToken);
        // The lease's end by the store's clock, allowing it a minute of skew from this machine's.
        assert.ok(Math.abs(read.holder!.until - (before + LEASE)) < 60_000, `until ${read.holder?.until}`);
        assert.deepEqual(read.pause, pause);
        assert.deepEqual(read.schedule, schedule);
        await store.releaseAll(a, [{ name, fencingToken }], true);
        const [free] = await store.readFleet([name]);
        assert.equal(free.holder, null);
      },
    ],
  ];
}

/** The steps `names` of a coordinator made with `leaseMs`, bound to it, or undefined when it lacks one (they are optional). */
async function stepsOf<K extends keyof PeriodicCoordinator>(
  subject: ContractSubject,
  leaseMs: number,
  names: readonly K[],
): Promise<({ coordinator: PeriodicCoordinator } & Required<Pick<PeriodicCoordinator, K>>) | undefined> {
  const coordinator = await subject.make(leaseMs);
  const steps: Record<string, unknown> = { coordinator };
  for (const name of names) {
    const step = coordinator[name];
    if (typeof step !== 'function') return undefined;
    steps[name] = (step as (...args: unknown[]) => unknown).bind(coordinator);
  }
  return steps as { coordinator: PeriodicCoordinator } & Required<Pick<PeriodicCoordinator, K>>;
}

/** The coordinator's steps that pause and audit the fleet, or undefined (they are optional). */
function operatedSteps(subject: ContractSubject, leaseMs: number) {
  return stepsOf(subject, leaseMs, [
    'heartbeat',
    'writeSchedules',
    'releaseAll',
    'operate',
    'readPause',
    'readAudit',
  ] as const);
}

/** The coordinator's steps that open and close incidents, with its audit trail, or undefined (they are optional). */
function incidentSteps(subject: ContractSubject, leaseMs: number) {
  return stepsOf(subject, leaseMs, [
    'heartbeat',
    'readAudit',
    'openIncident',
    'closeIncident',
    'readIncidents',
  ] as const);
}

/**
 * The incident steps (`openIncident`, `closeIncident`, `readIncidents`), checked on a coordinator that has them:
 * each kind opened once however many ask at once, closed once, listed while open, and audited in the same step.
 */
function incidentContract(subject: ContractSubject, job: () => string): [string, () => Promise<void>][] {
  const operation = (action: 'incident' | 'recovered', note: string, replica: string, at: number) => ({
    action,
    by: null,
    note,
    replica,
    at,
  });
  return [
    [
      'an incident opens once per job and kind, however many replicas ask at once, and closes once; each is audited',
      async () => {
        const store = await incidentSteps(subject, LEASE);
        if (store === undefined) return;
        const [name, neighbour] = [job(), job()];
        const detail =
          'the slot due at 2023-11-14T22:13:20.000Z has not started: "quoted", a comma, ünïcode ✓';
        const failing = { name, kind: 'failing' as const, since: AT, detail };
        const opened = await Promise.all(
          ['r1', 'r2', 'r3', 'r4', 'r5'].map((replica) =>
            store.openIncident(failing, operation('incident', `failing: ${detail}`, replica, AT), 10),
          ),
        );
        assert.deepEqual(
          opened.filter((one) => one),
          [true],
          `opened ${JSON.stringify(opened)}: one of five at once opens it`,
        );
        const late = { name, kind: 'late' as const, since: AT + 1, detail: 'late' };
        assert.equal(
          await store.openIncident(late, operation('incident', 'late: late', 'r2', AT + 1), 10),
          true,
        );
        const hung = { name: neighbour, kind: 'hung' as const, since: AT + 2, detail: 'hung' };
        assert.equal(
          await store.openIncident(hung, operation('incident', 'hung: hung', 'r1', AT + 2), 10),
          true,
        );
        const ours = async () =>
          (await store.readIncidents(10_000)).filter((one) => one.name === name || one.name === neighbour);
        const listed = await ours();
        const byKind = (a: { kind: string }, b: { kind: string }) => a.kind.localeCompare(b.kind);
        assert.deepEqual([...listed].sort(byKind), [failing, hung, late]);
        const names = listed.map((one) => Buffer.from(one.name));
        assert.ok(
          names.every((one, i) => i === 0 || Buffer.compare(names[i - 1], one) <= 0),
          "listed in the order of their jobs' names",
        );

        const closed = await store.closeIncident(
          name,
          'failing',
          operation('recovered', 'failing', 'r3', AT + 5),
          10,
        );
        assert.deepEqual(closed, failing);
        assert.equal(
          await store.closeIncident(name, 'failing', operation('recovered', 'failing', 'r4', AT + 6), 10),
          null,
          'an incident closes once',
        );
        assert.equal(
          await store.closeIncident(name, 'hung', operation('recovered', 'hung', 'r4', AT + 6), 10),
          null,
          'a kind that is not open does not close',
        );
        assert.deepEqual((await ours()).map(({ name: job, kind }) => [job === name, kind]).sort(), [
          [false, 'hung'],
          [true, 'late'],
        ]);
        // Opened again after it closed, it is a new incident.
        assert.equal(
          await store.openIncident(
            { ...failing, since: AT + 7 },
            operation('incident', 'again', 'r1', AT + 7),
            10,
          ),
          true,
        );
        const audit = await store.readAudit(name, 10);
        assert.deepEqual(
          audit.map(({ action, note, replica }) => [action, note, replica]),
          [
            ['incident', 'again', 'r1'],
            ['recovered', 'failing', 'r3'],
            ['incident', 'late: late', 'r2'],
            ['incident', `failing: ${detail}`, `r${opened.indexOf(true) + 1}`],
          ],
          'the audit trail has each opening and closing, once, newest first',
        );
        assert.deepEqual(
          (await store.readAudit(neighbour, 10)).map(({ action }) => action),
          ['incident'],
        );
        for (const kind of ['failing', 'late'] as const) {
          await store.closeIncident(name, kind, operation('recovered', kind, 'r1', AT + 8), 2);
        }
        assert.equal((await store.readAudit(name, 10)).length, 2, 'the audit trail keeps the latest `keep`');
        await store.closeIncident(neighbour, 'hung', operation('recovered', 'hung', 'r1', AT + 8), 10);
        assert.deepEqual(await ours(), [], 'closed, none is listed');
      },
    ],
  ];
}

/** The coordinator's steps for stored schedules, with its heartbeat, or undefined (they are optional). */
function storedSteps(subject: ContractSubject, leaseMs: number) {
  return stepsOf(subject, leaseMs, [
    'heartbeat',
    'readAudit',
    'writeStored',
    'removeStored',
    'readStored',
    'listStored',
    'readStoredChanges',
  ] as const);
}

/**
 * The steps of stored schedules (`writeStored`, `removeStored`, `readStored`, `listStored`, `readStoredChanges`),
 * checked on a coordinator that has them: versions and conflicts, the audit trail, pages, and the count of changes
 * that every replica reads.
 */
function storedContract(subject: ContractSubject, job: () => string): [string, () => Promise<void>][] {
  const by = (who: string | null, at = AT): Omit<PeriodicOperation, 'action'> => ({
    by: who,
    note: null,
    replica: 'r1',
    at,
  });
  const definition = (n: number) => JSON.stringify({ v: 1, options: { every: n } });
  const names = (records: PeriodicStoredRecord[]) => records.map((record) => record.name);
  /** The store's count of changes now, as a heartbeat reads it. */
  const count = async (store: NonNullable<Awaited<ReturnType<typeof storedSteps>>>) => {
    const reply = await store.heartbeat({
      member: { owner: `counter-${process.pid}`, replica: 'counter', jobs: '' },
      renew: [],
      acquire: [],
    });
    assert.ok(Number.isSafeInteger(reply.schedules), `heartbeat's schedules ${reply.schedules}`);
    return reply.schedules!;
  };
  return [
    [
      'writeStored creates a schedule at version 1 and updates it to 2, each in its audit trail; ifVersion refuses any other',
      async () => {
        const store = await storedSteps(subject, LEASE);
        if (store === undefined) return;
        const name = `${job()}:acme`;
        const [created] = await store.writeStored(
          [{ name, handler: 'report', definition: definition(1000) }],
          by('alice', AT),
          10,
        );
        assert.ok(created!.ok && created!.record !== null, JSON.stringify(created));
        assert.equal(created!.created, true, 'the answer says it created the schedule');
        const first = created!.record;
        assert.deepEqual(
          { ...first, change: 0 },
          {
            name,
            handler: 'report',
            definition: definition(1000),
            version: 1,
            createdAt: AT,
            updatedAt: AT,
            updatedBy: 'alice',
            change: 0,
          },
        );
        assert.ok(first.change > 0);
        assert.deepEqual(await store.readStored(name), first);
        const refused = await store.writeStored(
          [{ name, handler: 'report', definition: definition(2000), ifVersion: 0 }],
          by('bob'),
          10,
        );
        assert.deepEqual(refused, [{ ok: false, currentVersion: 1 }], 'ifVersion 0: it must not exist');
        const [updated] = await store.writeStored(
          [{ name, handler: 'report', definition: definition(2000), ifVersion: 1 }],
          by(null, AT + 5),
          10,
        );
        assert.ok(updated!.ok);
        assert.equal(updated!.created, false, 'the answer says it updated the schedule');
        assert.deepEqual(
          { ...updated!.record, change: 0 },
          {
            ...first,
            definition: definition(2000),
            version: 2,
            updatedAt: AT + 5,
            updatedBy: null,
            change: 0,
          },
        );
        assert.ok(updated!.record!.change > first.change, 'each change is counted');
        const missing = await store.writeStored(
          [{ name: `${name}-none`, handler: 'report', definition: definition(1), ifVersion: 4 }],
          by('bob'),
          10,
        );
        assert.deepEqual(missing, [{ ok: false, currentVersion: null }]);
        assert.equal(await store.readStored(`${name}-none`), null);
        assert.deepEqual(
          (await store.readAudit(name, 10)).map(({ action, by }) => [action, by]),
          [
            ['update', null],
            ['create', 'alice'],
          ],
        );
      },
    ],
    [
      'removeStored removes a schedule unless ifVersion differs, audited; removing nothing answers removed false',
      async () => {
        const store = await storedSteps(subject, LEASE);
        if (store === undefined) return;
        const name = `${job()}:acme`;
        await store.writeStored([{ name, handler: 'report', definition: definition(1000) }], by('alice'), 10);
        assert.deepEqual(await store.removeStored(name, 2, by('bob'), 10), { ok: false, currentVersion: 1 });
        assert.deepEqual(await store.removeStored(name, 1, by('bob'), 10), {
          ok: true,
          record: null,
          removed: true,
        });
        assert.equal(await store.readStored(name), null);
        assert.deepEqual(await store.removeStored(name, undefined, by('bob'), 10), {
          ok: true,
          record: null,
          removed: false,
        });
        assert.deepEqual(await store.removeStored(name, 1, by('bob'), 10), {
          ok: false,
          currentVersion: null,
        });
        assert.deepEqual(
          (await store.readAudit(name, 10)).map(({ action }) => action),
          ['remove', 'create'],
        );
        const [again] = await store.writeStored(
          [{ name, handler: 'report', definition: definition(1000) }],
          by('alice'),
          10,
        );
        assert.equal(
          again!.ok && again!.record!.version,
          2,
          'created again, its versions go on: an edit read before the removal conflicts',
        );
        assert.equal(again!.ok && again!.created, true);
        assert.deepEqual(
          (await store.readAudit(name, 10)).map(({ action }) => action),
          ['create', 'remove', 'create'],
        );
      },
    ],
    [
      'listStored reads pages in the order of names, after a name, by handler and by prefix',
      async () => {
        const store = await storedSteps(subject, LEASE);
        if (store === undefined) return;
        const prefix = `${job()}:`;
        const writes = ['d', 'b', 'a', 'c', 'e'].map((key, i) => ({
          name: `${prefix}${key}`,
          handler: i % 2 === 0 ? 'report' : 'sync',
          definition: definition(1000),
        }));
        await store.writeStored(writes, by(null), 10);
        assert.deepEqual(
          names(await store.listStored({ prefix, limit: 10 })),
          ['a', 'b', 'c', 'd', 'e'].map((key) => prefix + key),
        );
        assert.deepEqual(names(await store.listStored({ prefix, limit: 2 })), [`${prefix}a`, `${prefix}b`]);
        assert.deepEqual(names(await store.listStored({ prefix, after: `${prefix}b`, limit: 2 })), [
          `${prefix}c`,
          `${prefix}d`,
        ]);
        assert.deepEqual(names(await store.listStored({ prefix, handler: 'sync', limit: 10 })), [
          `${prefix}b`,
          `${prefix}c`,
        ]);
        // A prefix is text, not a pattern: the characters of patterns match themselves only.
        assert.deepEqual(await store.listStored({ prefix: `${prefix}%`, limit: 10 }), []);
        assert.deepEqual(await store.listStored({ prefix: `${prefix}*`, limit: 10 }), []);
        // Names are in the order of their UTF-8 bytes, where a character above U+FFFF comes after U+FFFD (in
        // UTF-16's order, it comes before).
        const wide = [`${prefix}~\uFFFD`, `${prefix}~\u{1F600}`];
        await store.writeStored(
          wide.map((name) => ({ name, handler: 'report', definition: definition(1000) })),
          by(null),
          10,
        );
        assert.deepEqual(names(await store.listStored({ prefix: `${prefix}~`, limit: 10 })), wide);
        assert.deepEqual(names(await store.listStored({ prefix, after: wide[0], limit: 10 })), [wide[1]]);
      },
    ],
    [
      'readStoredChanges reads the changes after a count, removals included, page by page; heartbeats tell the count',
      async () => {
        const store = await storedSteps(subject, LEASE);
        if (store === undefined) return;
        const prefix = `${job()}:`;
        const since = await count(store);
        await store.writeStored(
          ['a', 'b', 'c'].map((key) => ({
            name: prefix + key,
            handler: 'report',
            definition: definition(1000),
          })),
          by(null),
          10,
        );
        await store.writeStored(
          [{ name: `${prefix}a`, handler: 'report', definition: definition(3000) }],
          by(null),
          10,
        );
        await store.removeStored(`${prefix}b`, undefined, by(null), 10);
        const now = await count(store);
        assert.ok(now > since, `the count grew from ${since} to ${now}`);
        const all = await store.readStoredChanges(since, 100);
        assert.equal(all.complete, true);
        assert.equal(all.change, now);
        assert.deepEqual(
          names(all.records).sort(),
          [`${prefix}a`, `${prefix}c`],
          'the latest version of each',
        );
        assert.equal(
          all.records.find((record) => record.name === `${prefix}a`)!.definition,
          definition(3000),
        );
        assert.deepEqual(all.removed, [`${prefix}b`]);
        // Page by page: each page's count is where the next starts, and the pages bring the same changes.
        const seen: string[] = [];
        let at = since;
        for (let pages = 0; ; pages++) {
          assert.ok(pages < 10, 'the pages come to an end');
          const page = await store.readStoredChanges(at, 1);
          seen.push(...names(page.records), ...page.removed.map((name) => `-${name}`));
          assert.ok(page.change >= at);
          at = page.change;
          if (page.complete) break;
        }
        assert.deepEqual(seen.sort(), [`${prefix}a`, `${prefix}c`, `-${prefix}b`].sort());
        const none = await store.readStoredChanges(now, 100);
        assert.deepEqual({ ...none, change: 0 }, { records: [], removed: [], change: 0, complete: true });
        assert.equal(none.change, now);
      },
    ],
    [
      'readStoredChanges misses no change written while it reads: a reader that follows a writer ends with every schedule',
      async () => {
        const store = await storedSteps(subject, LEASE);
        if (store === undefined) return;
        const prefix = `${job()}:`;
        const [batches, size] = [40, 100];
        let since = await count(store);
        let written = false;
        const seen = new Set<string>();
        const writer = (async () => {
          for (let batch = 0; batch < batches; batch++) {
            await store.writeStored(
              Array.from({ length: size }, (_, i) => ({
                name: `${prefix}${batch}-${i}`,
                handler: 'report',
                definition: definition(1000),
              })),
              by(null),
              10,
            );
          }
          written = true;
        })();
        // A replica's feed, as fast as the store answers: page after page, again as soon as it is complete.
        for (;;) {
          const last = written;
          for (;;) {
            const page = await store.readStoredChanges(since, 50);
            for (const record of page.records) seen.add(record.name);
            since = page.change;
            if (page.complete) break;
          }
          if (last) break;
          await new Promise((resolve) => setImmediate(resolve));
        }
        await writer;
        assert.equal(seen.size, batches * size, `every schedule written was read (${seen.size} were)`);
      },
    ],
    [
      'the count of changes falls below the one read once the store is wiped, and the schedules are gone',
      async () => {
        const store = await storedSteps(subject, LEASE);
        if (store === undefined) return;
        const name = `${job()}:acme`;
        await store.writeStored([{ name, handler: 'report', definition: definition(1000) }], by(null), 10);
        const before = await count(store);
        await subject.wipe();
        assert.ok((await count(store)) < before, 'a replica that read the count before sees it fall');
        assert.equal(await store.readStored(name), null);
      },
    ],
  ];
}
