// The times a replica derives from its coordinator's `leaseMs`, each said once, here (docs/replicas.md, "Sizing
// `leaseMs`"). The store's log (store-log.ts) computes them once, and they travel with the store's calls.

/** How long each step of a replica may take or wait, from the lease's length. */
export interface LeaseTiming {
  /** How long a lease lasts unless renewed, in ms, as the coordinator says. */
  readonly leaseMs: number;
  /**
   * Between two heartbeats, and how long a command waits for the store before it counts as failed: a third of
   * the lease, so that a lease outlives one lost heartbeat and a command that hangs.
   */
  readonly heartbeatMs: number;
  /**
   * Between two heartbeats while a handover is expected (for one lease period after the spread changed): an
   * eighth of a heartbeat, so that a lease handed over waits `leaseMs / 24` at most.
   */
  readonly handoverBeatMs: number;
  /**
   * How long before the store lets a lease expire its holder stops counting it valid, for the clocks' drift and
   * the time a reply takes: a tenth. It is also how long a step of run records may take before the history
   * gives its time to the claims of slots, and how long a holder waits before it asks again for a read the
   * store did not answer.
   */
  readonly marginMs: number;
  /** How long a run record waits for a claim of a slot to go with: a twentieth. */
  readonly batchWaitMs: number;
  /** A trigger carried to the holder: the store not answering for half the lease ends it `storeUnreachable`. */
  readonly unansweredMs: number;
}

export function leaseTiming(leaseMs: number): LeaseTiming {
  const heartbeatMs = leaseMs / 3;
  return {
    leaseMs,
    heartbeatMs,
    handoverBeatMs: heartbeatMs / 8,
    marginMs: leaseMs / 10,
    batchWaitMs: leaseMs / 20,
    unansweredMs: leaseMs / 2,
  };
}
