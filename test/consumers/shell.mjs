// What the consumer runner and the Nest 11 run share: commands that fail loudly, scratch folders, the tarball.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const root = join(import.meta.dirname, '..', '..');

/** Runs a command in `cwd` with its output shown; throws if it fails. */
export function run(cwd, command, ...args) {
  console.log(`\n$ ${[command, ...args].join(' ')}    (in ${cwd})`);
  execFileSync(command, args, { cwd, stdio: 'inherit', env: { ...process.env, NO_COLOR: '1' } });
}

/** A new folder outside the project, so nothing resolves from the project's own node_modules. */
export function scratch(name) {
  return mkdtempSync(join(tmpdir(), `nestjs-periodic-${name}-`));
}

export function remove(folder) {
  rmSync(folder, { recursive: true, force: true });
}

/** Packs the package as `npm publish` would (the prepack script builds it) and returns the tarball's path. */
export function pack(destination) {
  console.log(`\n$ npm pack --pack-destination ${destination}`);
  const output = execFileSync('npm', ['pack', '--json', '--pack-destination', destination], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return join(destination, JSON.parse(output)[0].filename);
}
