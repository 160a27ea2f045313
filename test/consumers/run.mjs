// Consumer tests: packs the package, installs the tarball into each fixture application (in a scratch folder
// outside the project, with the fixture's own lockfile), runs the fixture's tests, then builds it and starts
// it as a plain Node process: a job must run, and SIGTERM must stop the application gracefully.
//
//   node test/consumers/run.mjs [fixture...] [--keep]
//
// The fixtures share one application (app/src) and its manual-tick check (app/test/manual-tick.ts); the two
// Jest fixtures also share their spec (app/test/counter.spec.ts).
import { spawn } from 'node:child_process';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { pack, remove, root, run, scratch } from './shell.mjs';

const fixtures = {
  'nest11-cjs-jest': { jest: true },
  'nest12-esm-jest': { jest: true },
  'nest12-vitest': { jest: false },
};
const here = join(root, 'test', 'consumers');
const keep = process.argv.includes('--keep');
const chosen = process.argv.slice(2).filter((arg) => arg !== '--keep');
for (const name of chosen) {
  if (!(name in fixtures))
    throw new Error(`unknown fixture "${name}"; the fixtures are ${Object.keys(fixtures)}`);
}

const packed = scratch('tarball');
const tarball = pack(packed);
const failed = [];
for (const [name, { jest }] of Object.entries(fixtures)) {
  if (chosen.length > 0 && !chosen.includes(name)) continue;
  const app = scratch(name);
  try {
    cpSync(join(here, 'app', 'src'), join(app, 'src'), { recursive: true });
    for (const file of jest ? ['manual-tick.ts', 'counter.spec.ts', 'health.spec.ts'] : ['manual-tick.ts']) {
      cpSync(join(here, 'app', 'test', file), join(app, 'test', file));
    }
    cpSync(join(here, name), app, { recursive: true });
    run(app, 'npm', 'ci', '--no-audit', '--no-fund');
    run(app, 'npm', 'install', '--no-save', '--no-audit', '--no-fund', tarball);
    run(app, 'npm', 'test');
    run(app, 'npm', 'run', 'build');
    await startAndStop(app);
    console.log(`\n${name}: passed`);
    if (!keep) remove(app);
  } catch (error) {
    failed.push(name);
    console.error(`\n${name}: FAILED (kept in ${app})\n${error.stack ?? error}`);
  }
}
remove(packed);
if (failed.length > 0) {
  console.error(`\nconsumer tests failed: ${failed.join(', ')}`);
  process.exit(1);
}
console.log('\nall consumer tests passed');

/**
 * Starts the built application, waits for two runs of its job, sends SIGTERM, and expects the application's
 * shutdown hook to run and the process to end by that signal, as Nest ends it.
 */
async function startAndStop(app) {
  console.log(`\n$ node dist/main.js    (in ${app}), then SIGTERM after two runs`);
  const child = spawn(process.execPath, ['dist/main.js'], {
    cwd: app,
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, NO_COLOR: '1' },
  });
  let output = '';
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const printed = (pattern) =>
    new Promise((resolve, reject) => {
      const check = () => pattern.test(output) && resolve();
      child.stdout.on('data', check);
      check();
      void exited.then(() => reject(new Error(`exited before printing ${pattern}:\n${output}`)));
    });
  child.stdout.setEncoding('utf8').on('data', (chunk) => {
    output += chunk;
    process.stdout.write(chunk);
  });
  const deadline = setTimeout(() => child.kill('SIGKILL'), 30_000);
  try {
    await printed(/run 2 counted to 2/);
    child.kill('SIGTERM');
    await printed(/shut down on SIGTERM after \d+ runs/);
    const { code, signal } = await exited;
    if (signal !== 'SIGTERM')
      throw new Error(`expected the process to end by SIGTERM, it ended with ${signal ?? code}`);
  } finally {
    clearTimeout(deadline);
    child.kill('SIGKILL');
  }
}
