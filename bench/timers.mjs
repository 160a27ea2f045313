// The shared deadline timer alone, without schedulers: `jobs` deadline timers, each armed again `every` ms after
// its deadline when it fires (plus a random delay under `random` ms, as a jitter would), for `seconds`; prints
// the CPU time per fire. Timers start together (`batch`) or spread over the interval (`spread`).
//
//   npm run build && node bench/timers.mjs [jobs=10000] [every=100] [random=0] [batch|spread] [seconds=3] [dir=.]
//
// `dir` is a checkout whose dist/ to measure, to compare two versions of the timer side by side.
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

const [jobs = 10_000, every = 100, random = 0, start = 'spread', seconds = 3, dir = '.'] =
  process.argv.slice(2);
const { DeadlineTimer, now } = await import(
  join(resolve(String(dir)), 'dist', 'esm', 'scheduler', 'clock.js')
);

let fires = 0;
const t0 = now();
const timers = Array.from({ length: Number(jobs) }, (_, i) => {
  const timer = new DeadlineTimer({
    onDeadline() {
      fires += 1;
      timer.armAt(timer.deadline + Number(every) + Math.random() * Number(random));
    },
  });
  timer.armAt(t0 + 20 + (start === 'batch' ? 0 : (i * Number(every)) / Number(jobs)));
  return timer;
});
await sleep(200);
const [firesBefore, cpuBefore] = [fires, process.cpuUsage()];
await sleep(Number(seconds) * 1000);
const cpu = process.cpuUsage(cpuBefore);
const ns = ((cpu.user + cpu.system) * 1000) / (fires - firesBefore);
process.stdout.write(
  `${jobs} timers, every ${every} ms + random ${random} ms, ${start}: ${ns.toFixed(0)} ns per fire\n`,
);
for (const timer of timers) timer.cancel();
