// What RedisCoordinator's scripts cost Redis per job, without a fleet around them: one coordinator holds JOBS
// leases and, round after round, claims the next slot of STEP of them per script, with the records of their
// last runs (one each, a success) riding along, and renews them all every third round, as a replica does
// with jobs every second and the default lease. Redis's own count of the time inside the scripts (`INFO
// commandstats`, `evalsha`, taken before and after) divided by the claims, and its whole CPU likewise, are the
// figures: they move much less from one run to the next than the fleet benchmark's, whose replicas and timers
// share the machine with Redis. The records of the jobs held go to their tails as plain HSETs, outside the
// scripts: only Redis's whole CPU counts them.
// Run it on an idle Redis: other clients' scripts would count too. The keys are removed at the end.
//
//   npm run build && node bench/redis-scripts.mjs [--jobs 2000] [--step 80] [--rounds 600] [--history off]
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisCoordinator } from '../dist/esm/index.js';

const option = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1];
};
const jobs = Number(option('jobs', 2000));
const step = Number(option('step', 80));
const rounds = Number(option('rounds', 600));
const history = option('history', 'on') === 'on';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const keyPrefix = `bench-scripts-${randomUUID()}:`;
const coordinator = new RedisCoordinator({ client: redis, keyPrefix });
const owner = 'replica-1/bench';
const member = { owner, replica: 'replica-1', jobs: '' };
const names = Array.from({ length: jobs }, (_, i) => `Reports.job${i}`);
const { acquired } = await coordinator.heartbeat({ member, renew: [], acquire: names });
const leases = names.map((name, i) => ({ name, fencingToken: acquired[i].fencingToken }));

let jobId = 0;
/** Round `n`: every job's slot claimed, STEP jobs a script, with the record of its run before. */
async function round(n) {
  const slot = Date.now() + n * 1000;
  for (let from = 0; from < jobs; from += step) {
    const part = leases.slice(from, from + step);
    const sent = [];
    if (history)
      sent.push(
        coordinator.recordRuns(
          part.map(({ name, fencingToken }) => run(name, fencingToken, slot)),
          100,
        ),
      );
    const claims = part.map(({ name, fencingToken }) => ({
      name,
      fencingToken,
      schedule: { grid: 'every 1000 regular', last: slot, next: slot + 1000 },
    }));
    sent.push(coordinator.writeSchedules(owner, claims));
    await Promise.all(sent);
  }
  if (n % 3 === 0) await coordinator.heartbeat({ member, renew: leases, acquire: [] });
}

function run(name, fencingToken, slot) {
  const [startedAt, finishedAt] = [slot - 998, slot - 995];
  jobId++;
  return {
    id: `replica-1/bench#${jobId}`,
    name,
    jobId,
    replica: 'replica-1',
    fencingToken,
    slot: slot - 1000,
    origin: 'schedule',
    attempt: 1,
    startedAt,
    finishedAt,
    reason: 'normal',
    durationMs: 3,
    error: null,
  };
}

const scriptUs = async () =>
  Number((await redis.info('commandstats')).match(/^cmdstat_evalsha:calls=\d+,usec=(\d+)/m)?.[1] ?? 0);
/** Redis's whole CPU, in µs: the scripts, and reading their arguments off the connection. */
const serverUs = async () => {
  const cpu = await redis.info('cpu');
  const used = (name) => Number(cpu.match(new RegExp(`^${name}:([\\d.]+)`, 'm'))?.[1] ?? 0);
  return (used('used_cpu_sys') + used('used_cpu_user')) * 1e6;
};

// The lists fill up to `keep` first: their cutting back is part of the steady state.
for (let n = 0; n < 120; n++) await round(n);
const [before, serverBefore] = [await scriptUs(), await serverUs()];
for (let n = 120; n < 120 + rounds; n++) await round(n);
const us = (await scriptUs()) - before;
const server = (await serverUs()) - serverBefore;
console.log(
  JSON.stringify({
    jobs,
    step,
    rounds,
    history: history ? 'on' : 'off',
    scriptUsPerJobRound: +(us / rounds / jobs).toFixed(2),
    serverUsPerJobRound: +(server / rounds / jobs).toFixed(2),
  }),
);

let cursor = '0';
do {
  const [next, keys] = await redis.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 1000);
  if (keys.length > 0) await redis.del(...keys);
  cursor = next;
} while (cursor !== '0');
await redis.quit();
