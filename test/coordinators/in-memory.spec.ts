import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import { InMemoryCoordinator, Periodic, PeriodicModule } from '../../lib/index.js';
import { useApps } from '../nest/helpers.js';
import { coordinatorContract } from '../../lib/testing/index.js';

describe('InMemoryCoordinator keeps the coordinator contract', () => {
  let coordinator: InMemoryCoordinator | undefined;
  const contract = coordinatorContract({
    // One store for the whole check, as replicas share one; a check makes it with its own lease.
    make: (leaseMs) => (coordinator = new InMemoryCoordinator({ leaseMs })),
    wipe: async () => {
      // Nothing but a new store loses an in-memory store's data: the tokens' clock floor must carry them.
      coordinator!['leases'].clear();
      coordinator!['tokens'].clear();
      coordinator!['schedules'].clear();
      coordinator!['members'].clear();
      coordinator!['fleet'] = undefined;
      coordinator!['stored'].clear();
      coordinator!['storedRemoved'].clear();
      coordinator!['storedChange'] = 0;
    },
  });
  for (const [rule, check] of contract) it(rule, check);
});

describe('two replicas of an application in one Jest process', () => {
  const createApp = useApps();

  it('share an InMemoryCoordinator: exactly one runs the exclusive job, and the other takes over on close', async () => {
    // A lease long enough that no pause of a loaded machine outlasts its margin (leaseMs / 10).
    const coordinator = new InMemoryCoordinator({ leaseMs: 3000 });
    const runs: string[] = [];
    const replica = (name: string) => {
      @Injectable()
      class Digest {
        @Periodic({ every: 10, exclusive: true })
        send(): void {
          runs.push(name);
        }
      }
      return createApp({
        imports: [PeriodicModule.forRoot({ coordinator, logger: false })],
        providers: [Digest],
      });
    };
    const first = await replica('first');
    await first.events.once('started');
    const second = await replica('second');
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(new Set(runs)).toEqual(new Set(['first']));
    await first.close();
    await second.events.once('started');
    expect(runs.at(-1)).toBe('second');
  });
});
