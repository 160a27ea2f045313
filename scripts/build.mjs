// Builds the package twice from lib/: ES modules in dist/esm for `import`, CommonJS in dist/cjs for `require`
// (see "exports" in package.json). Each folder gets a package.json that tells Node which of the two its .js
// files are, since the package's own package.json names neither. The Lua scripts of the Redis coordinator are
// made into a module of lib/ first (lua.mjs).
import './lua.mjs';
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const builds = [
  { config: 'tsconfig.build.json', outDir: 'dist/esm', type: 'module' },
  { config: 'tsconfig.build-cjs.json', outDir: 'dist/cjs', type: 'commonjs' },
];

rmSync('dist', { recursive: true, force: true });
for (const { config, outDir, type } of builds) {
  execFileSync(process.execPath, [tsc, '-p', config], { stdio: 'inherit' });
  writeFileSync(`${outDir}/package.json`, `${JSON.stringify({ type })}\n`);
}
