// The spread of a fleet's jobs over its live members: which replica holds which job, computed the same on every
// replica from the names alone, so that the replicas agree without asking the store.

/** A 32-bit hash of a string (FNV-1a), the seed of a member or of a job in the spread. */
function hash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/**
 * Which of `owners` holds each of `jobs`, the same on every replica that has these jobs: rendezvous hashing with
 * bounded loads. Each job, in the order of their hashes, goes to the member with the highest score for it
 * among those that hold fewer than their share (⌊N/R⌋, or one more for the first N mod R that reach it), so
 * that every member holds ⌊N/R⌋ or ⌈N/R⌉ jobs; a member that comes or goes moves little more than its share,
 * as the scores of the others do not change.
 */
export function spreadOver(jobs: readonly string[], owners: readonly string[]): Map<string, string> {
  const spread = new Map<string, string>();
  if (owners.length === 0) return spread;
  const sorted = [...owners].sort();
  const seeds = sorted.map(hash);
  const held = seeds.map(() => 0);
  const share = Math.floor(jobs.length / seeds.length);
  let larger = jobs.length % seeds.length;
  const order = jobs.map((name) => ({ name, seed: hash(name) }));
  order.sort((a, b) => a.seed - b.seed || (a.name < b.name ? -1 : 1));
  for (const { name, seed } of order) {
    let best = -1;
    let highest = -1;
    for (let i = 0; i < seeds.length; i++) {
      if (held[i] > share || (held[i] === share && larger === 0)) continue;
      const points = score(seeds[i], seed);
      if (points > highest) [best, highest] = [i, points];
    }
    if (++held[best] > share) larger--;
    spread.set(name, sorted[best]);
  }
  return spread;
}

/** A member's score for a job: a mix of their two seeds (murmur3's finaliser), the same on every replica. */
function score(member: number, job: number): number {
  let h = Math.imul(member ^ Math.imul(job, 0x9e3779b1), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
