// Builds the package twice from lib/: ES modules in dist/esm for `import`, CommonJS in dist/cjs for `require`
// (see "exports" in package.json). Each folder gets a package.json that tells Node which of the two its .js
// files are, since the package's own package.json names neither. The Lua scripts of the Redis coordinator are
// made into a module of lib/ first (lua.mjs).
import './lua.mjs';
import { spawn } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const builds = [
  { config: 'tsconfig.build.json', outDir: 'dist/esm', type: 'module' },
  { config: 'tsconfig.build-cjs.json', outDir: 'dist/cjs', type: 'commonjs' },
];

rmSync('dist', { recursive: true, force: true });
// The two compilations are independent: they run side by side.
await Promise.all(
  builds.map(async ({ config, outDir, type }) => {
    await compile(config);
    writeFileSync(`${outDir}/package.json`, `${JSON.stringify({ type })}\n`);
  }),
);

function compile(config) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [tsc, '-p', config], { stdio: 'inherit' });
    child.on('error', reject);
    child.on('exit', (code, signal) =>
      code === 0
        ? resolve()
        : reject(new Error(`tsc -p ${config} failed (${signal ?? `exit code ${code}`})`)),
    );
  });
}
