// The benchmark's report: the machine and versions, one table per scenario with ratios to nestjs-periodic,
// and the engine's targets with whether this run met them. As text for the terminal, and as BENCHMARKS.md.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { ENGINE } from './peers.mjs';

const OURS = 'nestjs-periodic';

export function environment(root) {
  const version = (name) =>
    JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')).version;
  return {
    date: new Date().toISOString(),
    machine: `${cpus()[0].model}, ${cpus().length} cores, ${Math.round(totalmem() / 2 ** 30)} GiB`,
    versions: {
      node: process.versions.node,
      'nestjs-periodic': JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).version,
      ...Object.fromEntries(
        ['@nestjs/core', '@nestjs/schedule', 'toad-scheduler'].map((name) => [name, version(name)]),
      ),
    },
  };
}

/** The tables: [title, note, columns, rows]; a cell is a figure with its ratio to nestjs-periodic's. */
function tables({ results }) {
  const of = (scenario, filter = () => true) => results.filter((r) => r.scenario === scenario && filter(r));
  const table = (title, note, scenario, columns, split = [undefined]) =>
    split.flatMap(([suffix, filter] = ['', () => true]) => {
      const rows = of(scenario, filter);
      if (rows.length === 0) return [];
      const ours = rows.find((row) => row.peer === OURS);
      return [
        {
          title: `${title}${suffix}`,
          note,
          head: ['', ...columns.map(([, heading]) => heading)],
          rows: rows.map((row) => [
            row.peer,
            ...columns.map(([key, , digits]) =>
              cell(row[key], row.peer === OURS ? undefined : ours?.[key], digits),
            ),
          ]),
        },
      ];
    });
  return [
    ...table(
      '1. Timing: one job every 10 ms, 500 ticks',
      'Lateness of each tick against the ideal grid (t0 + k·10 ms, t0 when the scheduler armed its first timer), in ms. Final drift: the median lateness of the last 50 ticks. Early: ticks that started more than 0.1 ms before their slot (the bench reads t0 when the scheduler calls setTimeout or setInterval, up to 0.07 ms after the scheduler read its clock).',
      'timing',
      [
        ['p50', 'p50', 2],
        ['p99', 'p99', 2],
        ['max', 'max', 2],
        ['drift', 'final drift', 2],
        ['early', 'early starts', 0],
      ],
      [
        [', idle', (r) => !r.load],
        [', with a second job burning 2 ms of CPU per tick', (r) => r.load],
      ],
    ),
    ...table(
      '1a. Timing: one job every 3 s, 3 ticks',
      'Lateness of each tick against the ideal grid, in ms, after a wait of 3 s: Linux lets the sleep of a process end up to 0.1% of it late (its timer slack), and a Node timer has whole milliseconds.',
      'longWait',
      [
        ['p50', 'p50', 2],
        ['max', 'max', 2],
        ['early', 'early starts', 0],
      ],
    ),
    ...table(
      '2. Scale: ',
      `CPU time (user + system) per run over 5 s, once the jobs have run for a second, and runs missed (slots from the start of the 5 s to half an interval before their end that produced no run in them). "nestjs-periodic" is the module with its default options (the run history on, 100 runs kept per job, the logger off); "history: false" the same without the history; "${ENGINE}" is PeriodicScheduler used without Nest. The Nest peers run their jobs as methods of 100 provider classes of 100 methods each.`,
      'scale',
      [
        ['cpuPerRunUs', 'CPU µs per run', 2],
        ['missed', 'runs missed', 0],
      ],
      [
        ['10,000 jobs every 100 ms, for 5 s', (r) => r.jobs === undefined],
        ['100,000 jobs every second, for 5 s', (r) => r.jobs === 100_000],
      ],
    ),
    ...table(
      '2a. Idle jobs: 10,000 jobs every minute, scheduled',
      `Heap per job after GC once all are scheduled, before any has run (@nestjs/schedule's includes a Node timer per job; nestjs-periodic's jobs share one).`,
      'idle',
      [['heapPerJob', 'heap bytes per job', 0]],
    ),
    ...table(
      '2b. Cron: 1,000 jobs every second (* * * * * *), for 6 s',
      "nestjs-periodic's `cron` against @nestjs/schedule's `@Cron`, both in the process's zone: CPU time per run, heap per job after GC once all are scheduled, runs per second, and lateness of each run after its second, in ms.",
      'cron',
      [
        ['cpuPerRunUs', 'CPU µs per run', 2],
        ['heapPerJob', 'heap bytes per job', 0],
        ['runsPerSecond', 'runs per second', 0],
        ['p50', 'lateness p50', 2],
        ['p99', 'lateness p99', 2],
      ],
    ),
    ...table(
      '3. Bootstrap: 1,000 providers with 2 scheduled methods each',
      'Time from compiling the module to the end of init(), the part of it spent in init(), and the heap it leaves after GC. "no scheduler" is the same application without any scheduling.',
      'bootstrap',
      [
        ['bootstrapMs', 'compile + init ms', 1],
        ['initMs', 'init ms', 1],
        ['heapMb', 'heap MiB', 2],
      ],
    ),
    ...table(
      '4. Shutdown: close() with 1,000 idle jobs',
      'Time from close() (stop() for the peers used without Nest) to resolved, in ms. "no scheduler" is the same application of 1,000 providers without any scheduling: what Nest\'s own close() takes.',
      'shutdown',
      [['closeMs', 'close ms', 2]],
      [['', (r) => !r.inFlight]],
    ),
    ...table(
      '4. Shutdown: close() with 100 runs in flight',
      'A run honours its signal where it gets one: it ends 10 ms after the abort. The others get no signal and run on for 1 s. "after the last run" is how long close() took to resolve once the last run had ended.',
      'shutdown',
      [
        ['closeMs', 'close ms', 2],
        ['stillRunning', 'runs still running when close resolved', 0],
        ['afterLastRunMs', 'ms after the last run', 2],
      ],
      [['', (r) => r.inFlight]],
    ),
    ...table(
      '5. Manual ticks: syncTick round trips per second on an empty job',
      'No peer can tick a job by hand; "await method()" calls the method directly, the floor.',
      'manualTicks',
      [['perSecond', 'round trips per second', 0]],
    ),
    ...table(
      '6. Status: what reading it costs',
      "No peer keeps a job's status. Reading the status of 1,000 jobs, in ms; keeping it is a few counters each run updates, counted in the CPU per run of table 2.",
      'status',
      [['statusAllMs', 'status of 1,000 jobs, ms', 2]],
    ),
    ...table(
      '7. Watching runs: 1,000 jobs every 100 ms, for 5 s',
      'CPU time per run through the Nest module with nothing watching, with a subscriber of the tracing channel `nestjs-periodic:run` (handlers that do nothing), and with `telemetry: true` and the OpenTelemetry SDK recording every span and metric into in-memory exporters.',
      'observed',
      [['cpuPerRunUs', 'CPU µs per run', 2]],
    ),
    ...table(
      '7a. Dashboard: the list with 100,000 jobs',
      'One application with 100,000 jobs every hour (1,000 exclusive, on an in-memory coordinator; every hundredth paused), served by Express: the size and time of the list page (100 rows, the counts of every job by state) and of `GET /api/jobs`, and the time of a search by name (`?q=`), of the paused jobs (`?state=paused`) and of a page deep in the list (`?cursor=`). Medians of 10 requests after 3; no peer has a dashboard.',
      'dashboard',
      [
        ['pageKb', 'page kB', 1],
        ['pageMs', 'page ms', 1],
        ['apiKb', 'API kB', 1],
        ['apiMs', 'API ms', 1],
        ['searchMs', 'search ms', 1],
        ['pausedMs', 'paused ms', 1],
        ['deepMs', 'deep page ms', 1],
      ],
    ),
  ];
}

function cell(figure, ours, digits) {
  if (figure === undefined || figure === null) return '–';
  const value = `${figure.median.toFixed(digits)}${figure.noisy ? '*' : ''}`;
  const base = ours?.median;
  if (base === undefined || base === 0 || figure.median === 0) return value;
  return `${value} (${formatRatio(Math.abs(figure.median / base))})`;
}

function formatRatio(ratio) {
  return `${ratio >= 10 ? ratio.toFixed(0) : ratio.toFixed(ratio >= 1 ? 1 : 2)}×`;
}

/** The engine's targets, judged on this run's medians: a line each, `- met: …` or `- MISSED: …`. */
export function targets({ results }) {
  const find = (scenario, peer, filter = () => true) =>
    results.find((r) => r.scenario === scenario && r.peer === peer && filter(r));
  const lines = [];
  const check = (what, value, ok) => lines.push(`- ${ok ? 'met' : 'MISSED'}: ${what} (${value})`);
  const idle = find('timing', OURS, (r) => !r.load);
  if (idle) {
    check(
      'timing, idle: final drift within ±1 ms',
      `${idle.drift.median.toFixed(2)} ms`,
      Math.abs(idle.drift.median) <= 1,
    );
    check('timing, idle: p99 lateness ≤ 2 ms', `${idle.p99.median.toFixed(2)} ms`, idle.p99.median <= 2);
    check('timing, idle: no early start', `${idle.early.max} at most`, idle.early.max === 0);
  }
  const long = find('longWait', OURS);
  if (long) check('timing, every 3 s: no early start', `${long.early.max} at most`, long.early.max === 0);
  const loaded = find('timing', OURS, (r) => r.load);
  const peers = results.filter(
    (r) => r.scenario === 'timing' && r.load && r.peer !== OURS && r.peer !== 'setTimeout loop',
  );
  if (loaded && peers.length > 0) {
    const worst = Math.min(...peers.map((r) => Math.abs(r.drift.median)));
    check(
      "timing, loaded: drift stays bounded (within ±1 ms) while the peers' grows",
      `${loaded.drift.median.toFixed(2)} ms against at least ${worst.toFixed(1)} ms`,
      Math.abs(loaded.drift.median) <= 1,
    );
  }
  const tenThousand = (r) => r.jobs === undefined;
  const scale = find('scale', OURS, tenThousand);
  const engine = find('scale', ENGINE, tenThousand);
  const schedule = find('scale', '@nestjs/schedule', tenThousand);
  if (scale && schedule) {
    check(
      "scale: CPU per run no higher than @nestjs/schedule's",
      `${scale.cpuPerRunUs.median.toFixed(2)} µs against ${schedule.cpuPerRunUs.median.toFixed(2)} µs`,
      scale.cpuPerRunUs.median <= schedule.cpuPerRunUs.median,
    );
    check('scale: no missed runs', `${scale.missed.max} at most`, scale.missed.max === 0);
  }
  if (engine && schedule) {
    check(
      "scale: CPU per run of the engine no higher than @nestjs/schedule's",
      `${engine.cpuPerRunUs.median.toFixed(2)} µs against ${schedule.cpuPerRunUs.median.toFixed(2)} µs`,
      engine.cpuPerRunUs.median <= schedule.cpuPerRunUs.median,
    );
  }
  const idleJobs = find('idle', OURS);
  const idleEngine = find('idle', ENGINE);
  if (idleJobs) {
    check(
      'heap per idle job ≤ 600 bytes through the Nest module',
      `${idleJobs.heapPerJob.median.toFixed(0)} B`,
      idleJobs.heapPerJob.median <= 600,
    );
  }
  if (idleEngine) {
    check(
      'heap per idle job ≤ 400 bytes, the engine alone',
      `${idleEngine.heapPerJob.median.toFixed(0)} B`,
      idleEngine.heapPerJob.median <= 400,
    );
  }
  const board = find('dashboard', OURS);
  if (board) {
    check(
      'dashboard with 100,000 jobs: a page of the list under 200 kB and 300 ms, the API too',
      `page ${board.pageKb.median.toFixed(0)} kB in ${board.pageMs.median.toFixed(0)} ms; API ${board.apiKb.median.toFixed(0)} kB in ${board.apiMs.median.toFixed(0)} ms`,
      Math.max(board.pageKb.median, board.apiKb.median) < 200 &&
        Math.max(board.pageMs.median, board.apiMs.median) < 300,
    );
  }
  const cron = find('cron', OURS);
  const atCron = find('cron', '@nestjs/schedule');
  if (cron && atCron) {
    check('cron: lateness p99 ≤ 2 ms', `${cron.p99.median.toFixed(2)} ms`, cron.p99.median <= 2);
    check(
      "cron: CPU per run no higher than @Cron's",
      `${cron.cpuPerRunUs.median.toFixed(2)} µs against ${atCron.cpuPerRunUs.median.toFixed(2)} µs`,
      cron.cpuPerRunUs.median <= atCron.cpuPerRunUs.median,
    );
  }
  const boot = find('bootstrap', OURS);
  const bootSchedule = find('bootstrap', '@nestjs/schedule');
  if (boot && bootSchedule) {
    check(
      'bootstrap no slower than @nestjs/schedule',
      `${boot.bootstrapMs.median.toFixed(0)} ms against ${bootSchedule.bootstrapMs.median.toFixed(0)} ms`,
      boot.bootstrapMs.median <= bootSchedule.bootstrapMs.median,
    );
  }
  const idleClose = find('shutdown', OURS, (r) => !r.inFlight);
  const nestClose = find('shutdown', 'no scheduler');
  if (idleClose && nestClose)
    check(
      "close() of 1,000 idle jobs no slower than Nest's own close of the app without them, + 1 ms",
      `${idleClose.closeMs.median.toFixed(2)} ms against ${nestClose.closeMs.median.toFixed(2)} ms`,
      idleClose.closeMs.median <= nestClose.closeMs.median + 1,
    );
  const flight = find('shutdown', OURS, (r) => r.inFlight);
  if (flight)
    check(
      'with honouring runs, close resolves within 5 ms of the last run',
      `${flight.afterLastRunMs.median.toFixed(2)} ms`,
      flight.afterLastRunMs.median <= 5,
    );
  return lines;
}

export function terminal(report) {
  const out = [
    `\n${report.machine}; Node ${report.versions.node}; medians of ${report.repetitions} repetitions (* noisy)\n`,
  ];
  for (const { title, head, rows } of tables(report)) {
    const widths = head.map((_, i) => Math.max(...[head, ...rows].map((row) => String(row[i]).length)));
    const line = (row) => row.map((value, i) => String(value).padEnd(widths[i])).join('  ');
    out.push(`\n${title}\n${line(head)}\n${rows.map(line).join('\n')}\n`);
  }
  out.push(`\nTargets\n${targets(report).join('\n')}\n`);
  return out.join('');
}

export function markdown(report) {
  const versions = Object.entries(report.versions)
    .map(([name, version]) => `${name} ${version}`)
    .join(', ');
  const parts = [
    '# Benchmarks',
    '',
    'Written by `npm run bench` (bench/run.mjs); the raw figures are in `bench/results/latest.json`. Every',
    'measurement runs in a fresh process, and each figure is the median of the repetitions; a figure marked *',
    'is noisy: its repetitions spread more than 25% around the median (their range is in latest.json). A',
    "ratio in brackets is the peer's figure divided by nestjs-periodic's.",
    '',
    `- Run: ${report.date}, ${report.repetitions} repetitions`,
    `- Machine: ${report.machine}`,
    `- Versions: ${versions}`,
    '',
    'Peers: `@nestjs/schedule` (`@Interval`) and nestjs-periodic (`@Periodic`) run their jobs as decorated',
    'methods of providers in a Nest application; `toad-scheduler` (`SimpleIntervalJob`), a `setInterval` per',
    'job and a `setTimeout` loop re-armed to absolute deadlines (the floor Node allows) run bare.',
    '',
    '## Targets',
    '',
    ...targets(report),
  ];
  for (const { title, note, head, rows } of tables(report)) {
    parts.push('', `## ${title}`, '', note, '', ...markdownTable(head, rows));
    if (title.startsWith('1.') && title.endsWith('idle')) {
      parts.push(
        '',
        'Lateness of each tick, idle and loaded (a symmetric log scale: 0, ±1, 10, 100 ms):',
        '',
        '![lateness per tick](bench/results/drift.svg)',
      );
    }
  }
  parts.push(...fleet(), ...fleetView(), ...storedSchedules());
  parts.push('', readFileSync(join(import.meta.dirname, 'engine-changes.md'), 'utf8').trim());
  return `${parts.join('\n')}\n`;
}

/**
 * The fleet benchmark's section (bench/fleet.mjs --matrix, in bench/results/fleet.json): exclusive jobs across
 * replica processes on one store, side by side with BullMQ's job schedulers; empty if it was not run.
 */
export function fleet() {
  const path = join(import.meta.dirname, 'results', 'fleet.json');
  if (!existsSync(path)) return [];
  const {
    machine,
    results,
    date = statSync(path).mtime.toISOString(),
  } = JSON.parse(readFileSync(path, 'utf8'));
  const rows = results.map((r) => {
    const held = r.heldPerReplica.filter((count) => count !== null);
    return [
      r.peer === 'bullmq' ? 'BullMQ job schedulers' : r.store === 'redis' ? 'Redis' : 'PostgreSQL',
      r.jobs.toLocaleString('en'),
      r.replicas,
      `${r.every / 1000} s`,
      r.commandsPerJobSecond,
      `${r.storeCpuPct}%`,
      r.storeCpuUsPerJobSecond,
      `${r.replicaCpuPct}% / ${r.replicaCpuPctMax}%`,
      held.length === 0 ? '–' : `${Math.min(...held)}–${Math.max(...held)}`,
      r.runsMostFewest,
      `${(r.slotsRan * 100).toFixed(2)}%`,
      r.slotsTwice,
      r.settleS === undefined ? '' : `${r.settleS} s`,
      failover(r),
      r.peer === 'bullmq' ? '–' : (r.history ?? 'off'),
      (r.date ?? date).slice(0, 10),
    ];
  });
  const head = [
    'store',
    'jobs',
    'replicas',
    'every',
    'store commands per job-second',
    'store CPU (of a core)',
    'store CPU µs per job-second',
    'replica CPU mean / max',
    'leases per replica',
    'runs most / fewest',
    'slots run',
    'run twice',
    'settled in',
    'failover p50 / max',
    'run history',
    'measured',
  ];
  return [
    '',
    '## 8. Fleet: exclusive jobs across replica processes on one store',
    '',
    'Written by `node bench/fleet.mjs --matrix` (after `npm run build`); the raw figures, with the commands that',
    `cost Redis most, are in \`bench/results/fleet.json\` (last run ${date}; Node ${machine.node}, ${machine.cpus} cores,`,
    'replicas and stores on the same machine). Each scenario has a store of its own (a redis-server on a free',
    'port, without persistence; a table of its own in PostgreSQL), forks the replicas (Nest applications whose',
    'jobs are added with `registry.add(name, fn, { every, exclusive: true })`, `leaseMs` 10 s), waits for the',
    'fleet to settle (every lease held and the spread unchanged for two lease periods: "settled in", from the',
    "replicas' start), then counts for a window: the store's commands (Redis counts the calls inside scripts;",
    'PostgreSQL: transactions), its CPU (Redis `used_cpu_*`; the PostgreSQL server processes from /proc), each',
    'replica\'s CPU, and each run\'s slot. "Slots run" is the share of the slots due in the window that ran; a',
    'failover kills one replica of four with SIGKILL and times, for each job it held, until another took its',
    'lease. BullMQ: one `upsertJobScheduler` per job, one Worker per replica (concurrency 100) on the same Redis.',
    '"Run history": the module\'s `history` option (SPEC 18; on by default, every run recorded in the store).',
    '`--matrix --store redis` measures the rows of one store again and keeps the others, each with its day.',
    '',
    ...markdownTable(head, rows),
  ];
}

/**
 * What one view of the fleet costs (bench/fleet-view.mjs, in bench/results/fleet-view.json): run history in the
 * store and in memory, and triggers asked of a replica without the lease; empty if it was not run.
 */
export function fleetView() {
  const path = join(import.meta.dirname, 'results', 'fleet-view.json');
  if (!existsSync(path)) return [];
  const { date, node, triggers, history, recording = [], note } = JSON.parse(readFileSync(path, 'utf8'));
  const store = (name) => (name === 'redis' ? 'Redis' : 'PostgreSQL');
  const rows = recording.map((r) => [
    store(r.store),
    r.jobs.toLocaleString('en'),
    r.replicas,
    r.history,
    r.roundTripsPerReplicaS,
    r.storeCpuUsPerJobSecond,
    `${(r.slotsRan * 100).toFixed(2)}%`,
    r.slotsTwice,
  ]);
  const head = [
    'store',
    'jobs every 1 s',
    'replicas',
    'history',
    'round trips per replica per second',
    'store CPU µs per job-second',
    'slots run',
    'run twice',
  ];
  return [
    '',
    '## 9. One view of the fleet: run history and triggers',
    '',
    `Written by \`node --expose-gc bench/fleet-view.mjs\` (after \`npm run build\`; run ${date}, Node ${node}), in`,
    '`bench/results/fleet-view.json`. The fleet scenarios are those of section 8 (`bench/fleet.mjs`, a window of',
    "30 s), with the module's `history` on (the default: every run recorded in the store) and off.",
    ...(note === undefined ? [] : [note]),
    '',
    ...markdownTable(head, rows),
    '',
    `Run history in memory (jobs that are not exclusive; measured ${(history.date ?? date).slice(0, 10)}):`,
    `${history.jobs.toLocaleString('en')} jobs that keep ${history.keep} runs each hold ${history.on.heapMB} MB of memory, heap and`,
    `array buffers (${history.off.heapMB} MB with \`history: false\`), ${history.bytesPerRecord} bytes per record; a tick and its run`,
    `take ${history.on.nsPerTick} ns with the record, ${history.off.nsPerTick} ns without (1,000 jobs ticked by hand, one after the`,
    'other, their histories full).',
    '',
    'With the history on, every run of an exclusive job writes a record to the store, at the end of its turn,',
    'or, in a busy replica, with its next claims (within `leaseMs / 20`): on Redis, the replica that holds the',
    "job's lease rewrites the tail of the job's history (its latest runs, about 40 bytes each) in a hash of its",
    'own, one HSET per step for all its jobs, and every eight runs a segment beside it (docs/replicas.md, "What',
    'it costs"); PostgreSQL inserts a row, updates a summary and deletes the oldest row.',
    "Where the store's CPU counts more than the fleet's history, `history:",
    "false` saves it, and loses `history()`, the fleet's last run and failures in `fleetStatus`, and",
    "`delivery: 'atLeastOnce'`.",
    '',
    "Triggers asked of a replica without the lease, from the call to the run's start on the holder, each at a",
    "random moment of the holder's heartbeat period (two replicas in one process, `leaseMs` 10 s):",
    '',
    '| store | triggers | p50 | max | not run |',
    '| --- | --- | --- | --- | --- |',
    ...Object.entries(triggers).map(
      ([name, t]) => `| ${store(name)} | ${t.triggers} | ${t.p50Ms} ms | ${t.maxMs} ms | ${t.notRun} |`,
    ),
  ];
}

/**
 * What stored schedules cost at scale (bench/schedules.mjs and bench/fleet.mjs --stored, in
 * bench/results/schedules.json); empty if neither was run.
 */
export function storedSchedules() {
  const path = join(import.meta.dirname, 'results', 'schedules.json');
  if (!existsSync(path)) return [];
  const { date, node, count, stores = {}, fleet = {} } = JSON.parse(readFileSync(path, 'utf8'));
  const name = (store) => (store === 'redis' ? 'Redis' : 'PostgreSQL');
  const thousands = (value) => value.toLocaleString('en');
  const lines = [
    '',
    '## 10. Stored schedules at scale',
    '',
    `Written by \`npm run bench:schedules\` (run ${date?.slice(0, 10)}, Node ${node}) and`,
    '`node bench/fleet.mjs --stored` (below), in `bench/results/schedules.json`. Targets (docs/schedules.md):',
    '`upsertMany` of 10,000 under 2 s; a replica that boots with 100,000 under 10 s; under 200 B of heap per stored',
    'schedule a replica does not hold; 100,000 across 4 replicas, every slot once.',
    '',
    `| store | schedules | \`upsertMany\` of 10,000 (best / worst batch) | boot, alone | heap per schedule held | not held |`,
    '| --- | --- | --- | --- | --- | --- |',
    ...Object.entries(stores).map(([store, f]) =>
      f.error === undefined
        ? `| ${name(store)} | ${thousands(count)} | ${thousands(f.upsertMany10k.ms)} / ${thousands(f.upsertMany10k.worstMs)} ms | ${(f.boot.ms / 1000).toFixed(1)} s | ${thousands(f.heapPerSchedule.bytes)} B | ${f.heapPerScheduleNotHeld === undefined ? '' : `${thousands(f.heapPerScheduleNotHeld.bytes)} B`} |`
        : `| ${name(store)} | ${thousands(count)} | failed: ${f.error.split('\n')[0]} | | | |`,
    ),
    '',
    '"Held": the replica boots alone, and holds every schedule. "Not held": a replica that lacks their handler',
    'boots alone too, and holds none. Every replica still keeps a job (its scheduler, lease and options)',
    'for every stored schedule, held or not, which is why one not held costs more than the target of 200 B: that',
    'needs the schedules a replica does not hold kept as an index of names rather than as jobs (not built yet).',
  ];
  const runs = Object.values(fleet);
  if (runs.length > 0) {
    const head = [
      'store',
      'schedules',
      'every',
      'replicas',
      'settled in',
      'slots run',
      'run twice',
      'store CPU',
      'replica CPU',
    ];
    lines.push(
      '',
      'Across replica processes (`node bench/fleet.mjs --store <store> --stored --jobs 100000 --replicas 4',
      '--every 30000 --window 120`): replica r0 writes the schedules, 10,000 at a time, and every replica has',
      'their handler; `leaseMs` 10 s; slots are counted as in section 8, after the fleet settled (every lease',
      'held, the spread steady for two lease periods).',
      '',
      ...markdownTable(
        head,
        runs.map((r) => [
          name(r.store),
          thousands(r.jobs),
          `${r.every / 1000} s`,
          r.replicas,
          `${r.settleS} s`,
          `${(r.slotsRan * 100).toFixed(2)}% of ${thousands(r.slotsDue)}`,
          r.slotsTwice,
          `${r.storeCpuPct}%`,
          `${r.replicaCpuPct}% (max ${r.replicaCpuPctMax}%)`,
        ]),
      ),
      '',
      `Measured ${runs.map((r) => `${name(r.store)} ${r.date.slice(0, 10)}`).join(', ')}.`,
    );
  }
  return lines;
}

/** A Markdown table: its head, the line under it, and a line per row. */
function markdownTable(head, rows) {
  return [
    `| ${head.join(' | ')} |`,
    `|${head.map(() => ' --- ').join('|')}|`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
  ];
}

/** A scenario's failover: the median and longest takeover after the SIGKILL, or why there is none. */
function failover({ failoverP50Ms: p50, failoverMaxMs: max }) {
  if (p50 === undefined) return '';
  if (p50 === null) return 'not every job taken again within 2 min';
  return `${(p50 / 1000).toFixed(1)} / ${(max / 1000).toFixed(1)} s`;
}
