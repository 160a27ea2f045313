// The published package, as `npm pack` makes it: what the tarball holds, what its built files import, and
// that each entry of its exports map loads in Node as the module system it claims, with matching types.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join, posix, relative } from 'node:path';
import { beforeAll, describe, expect, it } from '@jest/globals';
import ts from 'typescript';
import * as source from '../lib/index.js';

const root = join(import.meta.dirname, '..');
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
/** Under node_modules, so that the unpacked package resolves its peers from the project's own. */
const workspace = join(root, 'node_modules', '.cache', 'nestjs-periodic-package');
const unpacked = join(workspace, 'node_modules', manifest.name);
let tarball: string;
let files: string[];

beforeAll(() => {
  rmSync(workspace, { recursive: true, force: true });
  mkdirSync(unpacked, { recursive: true });
  // npm pack runs the prepack script, which builds dist/ from lib/.
  const [packed] = JSON.parse(
    execFileSync('npm', ['pack', '--json', '--pack-destination', workspace], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }),
  );
  tarball = join(workspace, packed.filename);
  files = packed.files.map((file: { path: string }) => file.path).sort();
  execFileSync('tar', ['-xzf', tarball, '-C', unpacked, '--strip-components=1']);
}, 120_000);

describe('the tarball', () => {
  it('holds the two builds of lib/, the manifest, the README and the licence, and nothing else', () => {
    const allowed =
      /^(package\.json|README\.md|LICENSE|dist\/(esm|cjs)\/(package\.json|[\w/.-]+\.(js|d\.ts)))$/;
    expect(files.filter((file) => !allowed.test(file))).toEqual([]);

    // The Lua scripts of lib/ are compiled into a module of it (scripts/lua.mjs), not shipped as files.
    const modules = listFiles(join(root, 'lib'))
      .filter((file) => !file.endsWith('.lua'))
      .map((file) => file.replace(/\.ts$/, ''));
    const built = (dir: string) =>
      modules.flatMap((module) => [`dist/${dir}/${module}.d.ts`, `dist/${dir}/${module}.js`]);
    expect(files).toEqual(
      [
        'LICENSE',
        'README.md',
        ...built('cjs'),
        'dist/cjs/package.json',
        ...built('esm'),
        'dist/esm/package.json',
        'package.json',
      ].sort(),
    );
  });

  it('imports only Node built-ins, declared dependencies (croner) and peer dependencies, and its own files', () => {
    const declared = [...Object.keys(manifest.dependencies), ...Object.keys(manifest.peerDependencies)];
    const outside = new Set<string>();
    const wrong: string[] = [];
    /** The files that import each optional peer: only those of the features that need it. */
    const optional = new Map<string, Set<string>>();
    /** Declarations that name the OpenTelemetry adapter's, which name the optional @opentelemetry/api. */
    const namingTelemetry: string[] = [];
    for (const file of files.filter((file) => /\.(js|d\.ts)$/.test(file))) {
      // TypeScript's scanner finds import, export, require() and import() in JavaScript and declarations alike.
      const { importedFiles } = ts.preProcessFile(readFileSync(join(unpacked, file), 'utf8'), true, true);
      for (const { fileName: specifier } of importedFiles) {
        if (specifier.startsWith('.')) {
          const target = posix.join(posix.dirname(file), specifier);
          const resolved = file.endsWith('.d.ts') ? target.replace(/\.js$/, '.d.ts') : target;
          if (!files.includes(resolved)) wrong.push(`${file}: "${specifier}" is not in the tarball`);
          if (resolved.endsWith('nest/open-telemetry.d.ts')) namingTelemetry.push(file);
          continue;
        }
        outside.add(specifier);
        if (manifest.peerDependenciesMeta[specifier]?.optional === true) {
          optional.set(
            specifier,
            (optional.get(specifier) ?? new Set()).add(file.replace(/^dist\/(esm|cjs)\//, '')),
          );
        }
        const isBuiltin = specifier.startsWith('node:') || builtinModules.includes(specifier);
        const isDeclared = declared.some((name) => specifier === name || specifier.startsWith(`${name}/`));
        if (!isBuiltin && !isDeclared)
          wrong.push(`${file}: "${specifier}" is neither Node's nor a declared dependency`);
      }
    }
    expect(wrong).toEqual([]);
    // The scan sees the imports it should, so an empty list above means something.
    expect([...outside].sort()).toEqual([
      '@nestjs/common',
      '@nestjs/core',
      '@nestjs/terminus',
      '@opentelemetry/api',
      'croner',
      'node:assert/strict',
      'node:async_hooks',
      'node:crypto',
      'node:diagnostics_channel',
      'node:os',
      'node:timers',
      'node:timers/promises',
      'node:util',
    ]);
    // The root entry never loads them: terminus only from its subpath; OpenTelemetry by a dynamic import, only
    // with `telemetry: true` (the declaration names its types).
    expect(
      Object.fromEntries([...optional].map(([name, importers]) => [name, [...importers].sort()])),
    ).toEqual({
      '@nestjs/terminus': ['terminus/index.d.ts', 'terminus/index.js'],
      '@opentelemetry/api': ['nest/open-telemetry.d.ts', 'nest/open-telemetry.js'],
    });
    // No other declaration leads to it: an application that compiles without skipLibCheck and without
    // @opentelemetry/api installed still type-checks.
    expect(namingTelemetry).toEqual([]);
  });

  it.each([
    ['terminus', ['PeriodicHealthIndicator']],
    ['dashboard', ['PeriodicDashboardModule']],
    ['testing', ['coordinatorContract']],
  ])(
    'gives nestjs-periodic/%s to import and to require; the root loads neither it nor what it needs',
    (subpath, exported) => {
      const esm = nodeOutput(
        '--input-type=module',
        '-e',
        `const m = await import('${manifest.name}/${subpath}');
       console.log(JSON.stringify({ file: import.meta.resolve('${manifest.name}/${subpath}'), names: Object.keys(m) }));`,
      );
      expect(esm).toEqual({
        file: expect.stringMatching(new RegExp(`/dist/esm/${subpath}/index\\.js$`)),
        names: exported,
      });
      const cjs = nodeOutput(
        '-e',
        `const m = require('${manifest.name}/${subpath}');
       console.log(JSON.stringify({ file: require.resolve('${manifest.name}/${subpath}'), names: Object.keys(m) }));`,
      );
      expect(cjs).toEqual({
        file: expect.stringMatching(new RegExp(`/dist/cjs/${subpath}/index\\.js$`)),
        names: exported,
      });
      const loaded = nodeOutput(
        '-e',
        `require('${manifest.name}');
       const names = Object.keys(require.cache).filter((file) => /@nestjs.terminus|@opentelemetry|\\/dashboard\\//.test(file));
       console.log(JSON.stringify({ file: '', names }));`,
      );
      expect(loaded.names).toEqual([]);
    },
  );

  it('is found by `import` as ES modules and by `require` as CommonJS, each with the whole public surface', () => {
    const names = Object.keys(source).sort();
    const esm = nodeOutput(
      '--input-type=module',
      '-e',
      `const m = await import('${manifest.name}');
       console.log(JSON.stringify({ file: import.meta.resolve('${manifest.name}'), names: Object.keys(m).sort() }));`,
    );
    expect(esm.file).toMatch(/\/dist\/esm\/index\.js$/);
    expect(esm.names).toEqual(names);

    const cjs = nodeOutput(
      '-e',
      `const m = require('${manifest.name}');
       console.log(JSON.stringify({ file: require.resolve('${manifest.name}'), names: Object.keys(m).sort() }));`,
    );
    expect(cjs.file).toMatch(/\/dist\/cjs\/index\.js$/);
    expect(cjs.names).toEqual(names);
  });

  it('has declarations that type-check, imported from an ES module and from CommonJS', () => {
    writeFileSync(
      join(workspace, 'esm.mts'),
      `import * as periodic from '${manifest.name}';\nimport * as terminus from '${manifest.name}/terminus';\n` +
        `import * as dashboard from '${manifest.name}/dashboard';\nimport * as testing from '${manifest.name}/testing';\n` +
        'export const surface = { periodic, terminus, dashboard, testing };\n',
    );
    writeFileSync(
      join(workspace, 'cjs.cts'),
      `import periodic = require('${manifest.name}');\nimport terminus = require('${manifest.name}/terminus');\n` +
        `import dashboard = require('${manifest.name}/dashboard');\nimport testing = require('${manifest.name}/testing');\n` +
        'export const surface = { periodic, terminus, dashboard, testing };\n',
    );
    const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const args = [
      '--noEmit',
      '--strict',
      '--module',
      'nodenext',
      '--types',
      'node',
      '--skipLibCheck',
      'false',
    ];
    const check = spawnSync(process.execPath, [tsc, ...args, 'esm.mts', 'cjs.cts'], {
      cwd: workspace,
      encoding: 'utf8',
    });
    expect(check.stdout).toBe('');
    expect(check.status).toBe(0);
  }, 60_000);

  it('gives TypeScript the right types for every resolution mode (are-the-types-wrong)', () => {
    const attw = join(root, 'node_modules', '.bin', 'attw');
    const report = JSON.parse(execFileSync(attw, [tarball, '--format', 'json'], { encoding: 'utf8' }));
    expect(report.problems).toEqual({});
    const resolutions = report.analysis.entrypoints['.'].resolutions;
    expect(resolutions['node16-esm'].resolution.fileName).toMatch(/\/dist\/esm\/index\.d\.ts$/);
    expect(resolutions['node16-cjs'].resolution.fileName).toMatch(/\/dist\/cjs\/index\.d\.ts$/);
    const terminus = report.analysis.entrypoints['./terminus'].resolutions;
    expect(terminus['node16-esm'].resolution.fileName).toMatch(/\/dist\/esm\/terminus\/index\.d\.ts$/);
    expect(terminus['node16-cjs'].resolution.fileName).toMatch(/\/dist\/cjs\/terminus\/index\.d\.ts$/);
    // TypeScript's old resolution (CommonJS applications on `moduleResolution: node`) reads typesVersions.
    expect(terminus.node10.resolution.fileName).toMatch(/\/dist\/cjs\/terminus\/index\.d\.ts$/);
    for (const subpath of ['dashboard', 'testing']) {
      const found = report.analysis.entrypoints[`./${subpath}`].resolutions;
      expect(found['node16-esm'].resolution.fileName).toMatch(`/dist/esm/${subpath}/index.d.ts`);
      expect(found['node16-cjs'].resolution.fileName).toMatch(`/dist/cjs/${subpath}/index.d.ts`);
      expect(found.node10.resolution.fileName).toMatch(`/dist/cjs/${subpath}/index.d.ts`);
    }
  });
});

function listFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(directory, join(entry.parentPath, entry.name)))
    .sort();
}

/** Runs Node in the workspace, where `node_modules/<name>` is the unpacked tarball, and parses what it prints. */
function nodeOutput(...args: string[]): { file: string; names: string[] } {
  return JSON.parse(execFileSync(process.execPath, args, { cwd: workspace, encoding: 'utf8' }));
}
