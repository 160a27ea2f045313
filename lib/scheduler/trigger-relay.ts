// A trigger asked of a replica that does not hold the job's lease, relayed through the store: the asking replica
// leaves it and waits for the answer (askHolder); the holder takes it with its heartbeat, starts the run and
// answers (answerAsker). The scheduler decides when a trigger is relayed; this is how.
import { randomUUID } from 'node:crypto';
import type { PeriodicOperation, PeriodicTriggerAnswer, PeriodicTriggerRequest } from './coordinator-port.js';
import { now, sleep } from './deadline-timer.js';
import type { TickResult } from './run.js';
import type { StoreCalls } from './store-calls.js';

/** How often a replica that asked the holder for a trigger reads its answer, at most (ms). */
const TRIGGER_POLL = 100;

/** The answers of a holder to a trigger that a replica that asked passes on as they are. */
const TRIGGER_ERRORS = new Set(['paused', 'jobNotStarted', 'notInManualMode', 'storeUnreachable']);

/**
 * A trigger carried to the holder through the store: it takes it with its next heartbeat, starts the run and
 * answers. Resolves the holder's answer; `'storeUnreachable'` when the store has not answered for half of
 * `leaseMs` (so that the answer comes within `leaseMs`); or `'noHolder'` when no replica took it within
 * `leaseMs` (it is withdrawn then, and never runs), or took it and did not answer within `leaseMs` more.
 */
export async function askHolder(
  calls: StoreCalls,
  asked: PeriodicOperation & { name: string },
): Promise<TickResult> {
  const answer = await relay(calls, asked, undefined);
  if (typeof answer === 'string') return { ok: false, error: answer };
  if (answer.ok) return { ok: true, jobId: answer.jobId, replica: answer.replica };
  return { ok: false, error: TRIGGER_ERRORS.has(answer.error) ? (answer.error as 'paused') : 'noHolder' };
}

/**
 * A backfill, or its cancellation, carried to the holder as a trigger is: resolves the holder's answer as it
 * is (`jobId`: the number of slots), or why it could not be carried.
 */
export async function askHolderToBackfill(
  calls: StoreCalls,
  asked: PeriodicOperation & { name: string },
  backfill: NonNullable<PeriodicTriggerRequest['backfill']>,
): Promise<HolderAnswer> {
  const answer = await relay(calls, asked, backfill);
  return typeof answer === 'string' ? { ok: false, error: answer } : answer;
}

/** What the holder answers a request carried to it: `jobId` the run it started, or the count a backfill asks. */
export type HolderAnswer = { ok: true; jobId: number } | { ok: false; error: string };

/** A request left for the holder, and its answer: the holder's, or why there is none. */
async function relay(
  calls: StoreCalls,
  asked: PeriodicOperation & { name: string },
  backfill: PeriodicTriggerRequest['backfill'],
): Promise<PeriodicTriggerAnswer | 'noHolder' | 'storeUnreachable'> {
  const { leaseMs, marginMs, unansweredMs } = calls.timing;
  const since = now();
  const poll = Math.min(TRIGGER_POLL, marginMs);
  let id = '';
  let takenAt = Infinity;
  let answeredAt = since;
  // A request the store did not take (or did not answer) is withdrawn at once, in case it still lands.
  let withdraw = false;
  for (;;) {
    if (id === '') {
      id = randomUUID();
      const request: PeriodicTriggerRequest = {
        id,
        name: asked.name,
        by: asked.by,
        replica: asked.replica,
        at: asked.at,
        ...(backfill === undefined ? {} : { backfill }),
      };
      withdraw = await calls.requestTrigger(request).then(
        () => false,
        () => true,
      );
      if (!withdraw) answeredAt = now();
    }
    // A call begun before half of leaseMs without an answer ends, at the latest, a third of it later.
    if (withdraw && now() - answeredAt >= unansweredMs) return 'storeUnreachable';
    await sleep(poll);
    const waited = now() - since;
    const state = await calls
      .readTrigger(asked.name, id, withdraw || waited >= leaseMs)
      .catch(() => 'unknown' as const);
    if (state === 'unknown') {
      if (now() - answeredAt >= unansweredMs) return 'storeUnreachable';
      continue;
    }
    answeredAt = now();
    if (state === 'withdrawn') return 'noHolder';
    if (state === 'taken') takenAt = Math.min(takenAt, now());
    if (typeof state === 'object') {
      // A holder handing the lease over: asked again, of the next.
      if (!state.ok && state.error === 'notLeaseHolder' && waited < leaseMs && !withdraw) {
        id = '';
        continue;
      }
      return state;
    }
    if (now() - takenAt >= leaseMs || waited >= 3 * leaseMs) return 'noHolder';
  }
}

/** The holder's answer to a trigger relayed to it: the run it started, or why none. */
export function answerAsker(
  calls: StoreCalls,
  request: PeriodicTriggerRequest,
  replica: string,
  result: TickResult | HolderAnswer,
): Promise<void> {
  return calls.answerTrigger(
    request.name,
    request.id,
    result.ok ? { ok: true, jobId: result.jobId, replica } : { ok: false, error: result.error, replica },
  );
}
