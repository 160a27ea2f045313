// The benchmark: every scenario for every peer, each measurement in a fresh process (bench/measure.mjs),
// repeated and reduced to medians. Writes a table to the terminal, bench/results/latest.json,
// bench/results/drift.svg and BENCHMARKS.md.
//
//   npm run bench                 (builds first)
//   node bench/run.mjs [--reps N] [--only timing,scale,...] [--peers nestjs-periodic,...]
//   node bench/run.mjs --report-only   (writes the table, the picture and BENCHMARKS.md again from latest.json)
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { ENGINE, PEERS } from './peers.mjs';
import { environment, markdown, targets, terminal } from './report.mjs';
import { driftSvg } from './svg.mjs';

const root = join(import.meta.dirname, '..');
const option = (name, fallback) => {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1];
};
const reps = Number(option('reps', 3));
const only = option(
  'only',
  'timing,longWait,scale,idle,cron,bootstrap,shutdown,manualTicks,status,observed,dashboard',
).split(',');
const peers = option('peers', undefined)?.split(',');

const NEST = ['nestjs-periodic', '@nestjs/schedule'];
const tasks = [
  ...PEERS.flatMap((peer) => [false, true].map((load) => ({ scenario: 'timing', peer, load }))),
  ...['nestjs-periodic', '@nestjs/schedule', 'setTimeout loop'].map((peer) => ({
    scenario: 'longWait',
    peer,
  })),
  ...[
    PEERS[0],
    'nestjs-periodic, history: false',
    'nestjs-periodic, default logger',
    'nestjs-periodic, registry.add',
    ENGINE,
    ...PEERS.slice(1),
  ].map((peer) => ({ scenario: 'scale', peer })),
  ...[PEERS[0], ENGINE, '@nestjs/schedule', 'setInterval'].map((peer) => ({
    scenario: 'scale',
    peer,
    jobs: 100_000,
    every: 1000,
  })),
  ...[PEERS[0], 'nestjs-periodic, history: false', ENGINE, ...PEERS.slice(1)].map((peer) => ({
    scenario: 'idle',
    peer,
  })),
  ...NEST.map((peer) => ({ scenario: 'cron', peer })),
  ...[...NEST, 'no scheduler'].map((peer) => ({ scenario: 'bootstrap', peer })),
  ...PEERS.flatMap((peer) => [false, true].map((inFlight) => ({ scenario: 'shutdown', peer, inFlight }))),
  { scenario: 'shutdown', peer: 'no scheduler', inFlight: false },
  ...['nestjs-periodic', 'await method()'].map((peer) => ({ scenario: 'manualTicks', peer })),
  { scenario: 'status', peer: 'nestjs-periodic' },
  { scenario: 'dashboard', peer: 'nestjs-periodic' },
  ...['', ' + tracing channel', ' + OpenTelemetry'].map((observer) => ({
    scenario: 'observed',
    peer: `nestjs-periodic${observer}`,
  })),
].filter((task) => only.includes(task.scenario) && (peers === undefined || peers.includes(task.peer)));

const latest = join(import.meta.dirname, 'results', 'latest.json');
const report = process.argv.includes('--report-only') ? JSON.parse(readFileSync(latest, 'utf8')) : measure();
mkdirSync(dirname(latest), { recursive: true });
writeFileSync(latest, `${JSON.stringify(report, null, 2)}\n`);
if (report.results.some((result) => result.scenario === 'timing')) {
  writeFileSync(join(import.meta.dirname, 'results', 'drift.svg'), driftSvg(report.results));
}
writeFileSync(join(root, 'BENCHMARKS.md'), markdown(report));
process.stdout.write(terminal(report));
// A target missed fails the run, loudly, with the figures that missed it.
const missed = targets(report).filter((line) => line.startsWith('- MISSED'));
if (missed.length > 0) {
  process.stderr.write(`\n${missed.length} target(s) missed:\n${missed.join('\n')}\n`);
  process.exitCode = 1;
}

function measure() {
  const samples = new Map(tasks.map((task) => [task, []]));
  const started = performance.now();
  // Repetitions go round all tasks in turn, so that a noisy moment of the machine spreads over every peer.
  for (let rep = 1; rep <= reps; rep++) {
    for (const task of tasks) {
      process.stderr.write(`\r[${rep}/${reps}] ${label(task)}`.padEnd(70));
      const child = spawnSync(
        process.execPath,
        ['--expose-gc', join(import.meta.dirname, 'measure.mjs'), JSON.stringify(task)],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
      );
      if (child.status !== 0) throw new Error(`${label(task)} failed (exit ${child.status ?? child.signal})`);
      samples.get(task).push(JSON.parse(child.stdout.trim().split('\n').at(-1)));
    }
  }
  process.stderr.write(`\rdone in ${((performance.now() - started) / 1000).toFixed(0)} s`.padEnd(70) + '\n');
  const results = tasks.map((task) => ({ ...task, ...summarize(samples.get(task)) }));
  return { ...environment(root), repetitions: reps, results };
}

function label({ scenario, peer, load, inFlight, jobs }) {
  const variant = `${load ? ' (loaded)' : ''}${inFlight ? ' (runs in flight)' : ''}${jobs ? ` (${jobs} jobs)` : ''}`;
  return `${scenario} ${peer}${variant}`;
}

/**
 * The median of each figure over the repetitions, and how far the repetitions spread around it. The
 * lateness series kept for the picture is the one of the repetition with the median p99.
 */
function summarize(runs) {
  const figures = {};
  for (const key of Object.keys(runs[0]).filter((key) => typeof runs[0][key] === 'number')) {
    const values = runs.map((run) => run[key]).sort((a, b) => a - b);
    const median = values[Math.floor(values.length / 2)];
    const spread = values.at(-1) - values[0];
    figures[key] = {
      median,
      min: values[0],
      max: values.at(-1),
      noisy: spread > 0.25 * Math.abs(median) && spread > 0.1,
    };
  }
  if (runs[0].lateness !== undefined) {
    const byP99 = [...runs].sort((a, b) => a.p99 - b.p99);
    figures.lateness = byP99[Math.floor(byP99.length / 2)].lateness;
  }
  return figures;
}
