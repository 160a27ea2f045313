// Runs the project's own Nest end-to-end suite (test/nest) a second time, against Nest 11: in a scratch copy
// of the project, with @nestjs/common, core and testing at the versions the Nest 11 consumer fixture pins, and
// @nestjs/platform-express at the version of that core.
//
//   node test/consumers/nest11-e2e.mjs
import { execFileSync } from 'node:child_process';
import { cpSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { remove, root, run, scratch } from './shell.mjs';

const lock = JSON.parse(readFileSync(join(root, 'test/consumers/nest11-cjs-jest/package-lock.json'), 'utf8'));
const nest11 = ['common', 'core', 'testing'].map(
  (name) => `@nestjs/${name}@${lock.packages[`node_modules/@nestjs/${name}`].version}`,
);
// The HTTP adapter of the health check's test, at the version of the core it goes with.
nest11.push(`@nestjs/platform-express@${lock.packages['node_modules/@nestjs/core'].version}`);

const copy = scratch('nest11-e2e');
const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '-z'], {
  cwd: root,
  encoding: 'utf8',
});
for (const file of files.split('\0').filter(Boolean)) cpSync(join(root, file), join(copy, file));

run(copy, 'npm', 'ci', '--no-audit', '--no-fund');
// The dashboard's Fastify test is not in test/nest, and @nestjs/platform-fastify 12 would refuse Nest 11.
run(copy, 'npm', 'uninstall', '--no-audit', '--no-fund', '@nestjs/platform-fastify');
run(copy, 'npm', 'install', '--no-save', '--no-audit', '--no-fund', ...nest11);
run(
  copy,
  'node',
  '-p',
  `['common', 'core', 'testing'].map((n) => require('@nestjs/' + n + '/package.json').version)`,
);
run(copy, 'npm', 'test', '--', 'test/nest');
remove(copy);
console.log(`\nthe Nest end-to-end suite passed against ${nest11.join(', ')}`);
