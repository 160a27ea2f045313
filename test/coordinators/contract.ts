// The contract every PeriodicCoordinator keeps, as checks that any test runner can run: each entry is a
// name and an async function that throws (node:assert) when the coordinator breaks the rule. The package's
// own coordinators run them in test/coordinators, test/redis and test/postgres; a custom coordinator can run
// them the same way:
//
//   for (const [rule, check] of coordinatorContract(subject)) it(rule, check);
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { PeriodicCoordinator } from '../../lib/index.js';

/** What the contract needs of a store. */
export interface ContractSubject {
  /** A coordinator with this lease on a store shared by every coordinator this subject makes. */
  make(leaseMs: number): PeriodicCoordinator | Promise<PeriodicCoordinator>;
  /** Loses all of the store's data, as a restart without persistence, FLUSHALL or TRUNCATE would. */
  wipe(): Promise<void>;
  /** A coordinator whose store answers what no store of its kind answers, if the subject can make one. */
  garbled?(): PeriodicCoordinator;
}

/**
 * Long enough for a round trip to a store on this machine and for a loaded machine's delays (a check renews
 * at 0.6 of it, so a sleep may overrun by 0.4 of it), short enough to wait for in a test.
 */
const LEASE = 600;

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
        const coordinator = await subject.make(LEASE);
        const name = job();
        await coordinator.acquire(name, 'a');
        await sleep(LEASE * 0.6);
        assert.equal(await coordinator.renew(name, 'b'), false);
        assert.equal(await coordinator.renew(name, 'a'), true);
        await sleep(LEASE * 0.6);
        assert.equal(await coordinator.acquire(name, 'b'), 0, 'the renewed lease is still held');
        await sleep(LEASE * 0.6);
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
      "fencing tokens still grow after the store's data is wiped",
      async () => {
        const coordinator = await subject.make(LEASE);
        const name = job();
        const before = await coordinator.acquire(name, 'a');
        await subject.wipe();
        const after = await coordinator.acquire(name, 'b');
        assert.ok(after > before, `token ${after} after the wipe, ${before} before`);
      },
    ],
  ];
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
