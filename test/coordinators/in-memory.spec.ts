import { describe, it } from '@jest/globals';
import { InMemoryCoordinator } from '../../lib/index.js';
import { coordinatorContract } from './contract.js';

describe('InMemoryCoordinator keeps the coordinator contract', () => {
  let coordinator: InMemoryCoordinator | undefined;
  const contract = coordinatorContract({
    // One store for the whole check, as replicas share one; a check makes it with its own lease.
    make: (leaseMs) => (coordinator = new InMemoryCoordinator({ leaseMs })),
    wipe: async () => {
      // Nothing but a new store loses an in-memory store's data: the tokens' clock floor must carry them.
      coordinator!['leases'].clear();
      coordinator!['tokens'].clear();
    },
  });
  for (const [rule, check] of contract) it(rule, check);
});
