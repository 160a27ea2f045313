// The spread of a fleet's jobs over its live members: which replica holds which job, computed the same on every
// replica from the names alone, so that the replicas agree without asking the store.

/** A 32-bit hash of a string (FNV-1a), the seed of a member or of a job in the spread. */
export function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Which of `owners` holds each of `jobs` (as {@link spreadIndexes} spreads them), by job name. */
export function spreadOver(jobs: readonly string[], owners: readonly string[]): Map<string, string> {
  if (owners.length === 0) return new Map();
  const sorted = [...owners].sort();
  const at = spreadIndexes(jobs, sorted, jobs.map(hash));
  return new Map(jobs.map((name, i) => [name, sorted[at[i]!]!]));
}

/**
 * Which of `owners` (sorted) holds each of `jobs`, the same on every replica that has these jobs: the index of
 * the owner of each job, in the order of `jobs` (0 for every job with one owner, or none). Rendezvous hashing with bounded loads:
 * each job, in the order of their hashes, goes to the member with the highest score for it among those that
 * hold fewer than their share (⌊N/R⌋, or one more for the first N mod R that reach it), so that every member
 * holds ⌊N/R⌋ or ⌈N/R⌉ jobs; a member that comes or goes moves little more than its share, as the scores of the
 * others do not change. `seeds` are the jobs' hashes, in their order.
 */
export function spreadIndexes(
  jobs: readonly string[],
  owners: readonly string[],
  seeds: ArrayLike<number>,
): Uint32Array {
  const owner = new Uint32Array(jobs.length);
  if (owners.length <= 1) return owner;
  const members = owners.map(hash);
  const held = members.map(() => 0);
  const share = Math.floor(jobs.length / members.length);
  let larger = jobs.length % members.length;
  for (const i of hashOrder(jobs, seeds)) {
    const seed = seeds[i];
    let best = -1;
    let highest = -1;
    for (let m = 0; m < members.length; m++) {
      if (held[m] > share || (held[m] === share && larger === 0)) continue;
      const points = score(members[m], seed);
      if (points > highest) [best, highest] = [m, points];
    }
    if (++held[best] > share) larger--;
    owner[i] = best;
  }
  return owner;
}

/**
 * The indexes of `jobs` in the order of their hashes, and of their names where two hashes are equal: the same
 * order on every replica, whatever order it has the names in. Sorted as numbers (hash × 2²¹ + index, exact in a
 * double), which takes a fraction of the time of sorting objects: a replica with 100,000 jobs spreads them often.
 */
function hashOrder(jobs: readonly string[], seeds: ArrayLike<number>): Int32Array | number[] {
  const count = jobs.length;
  if (count >= 2 ** 21) {
    return [...jobs.keys()].sort((a, b) => seeds[a] - seeds[b] || (jobs[a] < jobs[b] ? -1 : 1));
  }
  const keys = new Float64Array(count);
  for (let i = 0; i < count; i++) keys[i] = seeds[i] * 2 ** 21 + i;
  keys.sort();
  const order = new Int32Array(count);
  for (let i = 0; i < count; i++) order[i] = keys[i] % 2 ** 21;
  // Equal hashes (rare): their run is put in the order of the names.
  for (let start = 0; start < count;) {
    const seed = Math.floor(keys[start] / 2 ** 21);
    let end = start + 1;
    while (end < count && Math.floor(keys[end] / 2 ** 21) === seed) end++;
    if (end - start > 1) {
      const run = [...order.subarray(start, end)].sort((a, b) => (jobs[a] < jobs[b] ? -1 : 1));
      order.set(run, start);
    }
    start = end;
  }
  return order;
}

/** A member's score for a job: a mix of their two seeds (murmur3's finaliser), the same on every replica. */
function score(member: number, job: number): number {
  let h = Math.imul(member ^ Math.imul(job, 0x9e3779b1), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
