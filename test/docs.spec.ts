// Every code block of the README, CONTRIBUTING.md and docs/ is checked: TypeScript blocks compile, each on its
// own, as a module that imports the package by its name; JSON parses, and a configuration that a consumer
// fixture uses is that fixture's; the SQL creates a table the PostgreSQL coordinator works with; the npm scripts
// that shell blocks run exist; the error messages shown are the package's. Links between the documents reach a
// file and a heading that exist.
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import ts from 'typescript';
import { PeriodicScheduler, PostgresCoordinator } from 'nestjs-periodic';
import { describeWithPostgres, usePostgres } from './postgres/postgres.js';

const root = join(import.meta.dirname, '..');
const documents = [
  'README.md',
  'CONTRIBUTING.md',
  ...readdirSync(join(root, 'docs'))
    .filter((file) => file.endsWith('.md'))
    .map((file) => `docs/${file}`),
];

interface Block {
  document: string;
  /** The line of the opening fence, from 1. */
  line: number;
  language: string;
  code: string;
}

function blocksOf(document: string): Block[] {
  const lines = readFileSync(join(root, document), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(\S*)$/.exec(lines[i]);
    if (fence === null) continue;
    const end = lines.indexOf('```', i + 1);
    if (end === -1) throw new Error(`${document}:${i + 1}: a code block that never closes`);
    blocks.push({
      document,
      line: i + 1,
      language: fence[1],
      code: lines.slice(i + 1, end).join('\n') + '\n',
    });
    i = end;
  }
  return blocks;
}

const blocks = documents.flatMap(blocksOf);
const where = (block: Block) => `${block.document}:${block.line}`;

describe('the code blocks of the documentation', () => {
  it('each name their language, one this test checks', () => {
    const unchecked = blocks.filter(
      (block) => !['ts', 'json', 'sql', 'sh', 'text', 'diagram'].includes(block.language),
    );
    expect(unchecked.map(where)).toEqual([]);
  });

  it('in TypeScript compile, each on its own, as the package is published', () => {
    const dir = join(root, 'node_modules', '.cache', 'doc-blocks');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir, { recursive: true });
    const files = new Map<string, Block>();
    for (const block of blocks.filter((block) => block.language === 'ts')) {
      const file = join(dir, `${block.document.replace(/\W/g, '_')}_${block.line}.ts`);
      writeFileSync(file, block.code);
      files.set(file, block);
    }
    // An application's settings: decorators with metadata, strict, and `isolatedModules` (the docs import types
    // as types, which that setting requires of a decorated method's parameters).
    const program = ts.createProgram([...files.keys()], {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      experimentalDecorators: true,
      emitDecoratorMetadata: true,
      isolatedModules: true,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ['node'],
      paths: {
        'nestjs-periodic': [join(root, 'lib', 'index.ts')],
        'nestjs-periodic/terminus': [join(root, 'lib', 'terminus', 'index.ts')],
        'nestjs-periodic/dashboard': [join(root, 'lib', 'dashboard', 'index.ts')],
        'nestjs-periodic/testing': [join(root, 'lib', 'testing', 'index.ts')],
      },
    });
    const errors = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
      const block = diagnostic.file && files.get(resolve(diagnostic.file.fileName));
      if (block === undefined || diagnostic.start === undefined) return message;
      const { line } = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start);
      return `${block.document}:${block.line + 1 + line}: ${message}`;
    });
    expect(errors).toEqual([]);
    expect(files.size).toBeGreaterThan(15);
  });

  it("in JSON parse, and the Jest configuration and tsconfig for ES modules are the Nest 12 fixture's", () => {
    for (const block of blocks.filter((block) => block.language === 'json')) {
      expect(() => JSON.parse(block.code)).not.toThrow();
    }
    const [jest] = blocks.filter((block) => block.language === 'json' && block.code.includes('"jest"'));
    const fixture = JSON.parse(
      readFileSync(join(root, 'test', 'consumers', 'nest12-esm-jest', 'package.json'), 'utf8'),
    );
    const documented = JSON.parse(jest.code);
    expect(documented.scripts).toEqual({ test: fixture.scripts.test });
    expect({ ...fixture.jest, testRegex: undefined }).toEqual({ ...documented.jest, testRegex: undefined });
    const [tsconfig] = blocks.filter(
      (block) => block.language === 'json' && block.code.includes('"NodeNext"'),
    );
    const fixtureTsconfig = JSON.parse(
      readFileSync(join(root, 'test', 'consumers', 'nest12-esm-jest', 'tsconfig.json'), 'utf8'),
    );
    // The fixture's own choices for its test run (`types`, `skipLibCheck`) aside, the same compiler options.
    const { types, skipLibCheck, ...options } = fixtureTsconfig.compilerOptions;
    expect([types, skipLibCheck]).toEqual([['node'], false]);
    expect(JSON.parse(tsconfig.code)).toEqual({ ...fixtureTsconfig, compilerOptions: options });
  });

  it('in shell run npm scripts that exist', () => {
    const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    const run = blocks
      .filter((block) => block.language === 'sh')
      .flatMap((block) => [...block.code.matchAll(/\bnpm (?:run (\S+)|(start|test)\b)/g)])
      .map((match) => match[1] ?? match[2]);
    expect(run.length).toBeGreaterThan(2);
    expect(run.filter((script) => scripts[script] === undefined)).toEqual([]);
  });

  it('in diagrams name files of lib/ that exist', () => {
    const named = blocks
      .filter((block) => block.language === 'diagram')
      .flatMap((block) => [...block.code.matchAll(/[\w-]+\.ts/g)].map(([file]) => file));
    expect(named.length).toBeGreaterThan(3);
    const files = readdirSync(join(root, 'lib'), { recursive: true, encoding: 'utf8' }).map((file) =>
      file.split('/').at(-1),
    );
    expect(named.filter((file) => !files.includes(file))).toEqual([]);
  });

  it("in text show the package's own error messages", () => {
    // The options that make each message shown, by the job and the option it names.
    const causes: Record<string, { where: string; options: Record<string, unknown> }> = {
      '@Periodic() on Cleanup.purge: "every"': {
        where: '@Periodic() on Cleanup.purge',
        options: { every: -5 },
      },
      '@Periodic() on Sync.run: "onOverlap"': {
        where: '@Periodic() on Sync.run',
        options: { every: 1000, onOverlap: 'stop_previous' },
      },
      '@Periodic() on Sync.run: unknown option "on_overlap"': {
        where: '@Periodic() on Sync.run',
        options: { every: 1000, on_overlap: 'ignore' },
      },
    };
    const shown = blocks
      .filter((block) => block.language === 'text')
      .flatMap((block) => block.code.trim().split('\n'));
    expect(shown.length).toBeGreaterThan(2);
    for (const line of shown) {
      const cause = Object.keys(causes).find((start) => line.startsWith(start));
      expect({ line, known: cause !== undefined }).toEqual({ line, known: true });
      const { where, options } = causes[cause!];
      let message = '';
      try {
        new PeriodicScheduler({ name: 'job', run: () => undefined, ...options }, undefined, where);
      } catch (error) {
        message = (error as Error).message;
      }
      // A line that ends in "..." shows the start of its message.
      if (line.endsWith('...')) expect(message.startsWith(line.slice(0, -3))).toBe(true);
      else expect(message).toBe(line);
    }
  });
});

const withPostgres = await describeWithPostgres();
withPostgres('the SQL blocks of the documentation', () => {
  const postgres = usePostgres();
  const sqlOf = (document: string) =>
    blocks.filter((block) => block.language === 'sql' && block.document === document);

  it('create the tables the PostgreSQL coordinator uses', async () => {
    const sql = sqlOf('docs/replicas.md');
    expect(sql).toHaveLength(1);
    const table = postgres.table();
    // The tables (leases, members, audit trails, run histories and their summaries) under the test's own name.
    await postgres
      .pool()
      .query(
        sql[0].code.replaceAll(
          /\bperiodic_leases(?=\b|_members\b|_audit\b|_runs\b|_runs_seq\b|_summary\b|_trigger\b|_stored\b|_s[cnh]\b|_incident\b)/g,
          table,
        ),
      );
    const coordinator = new PostgresCoordinator({ pool: postgres.pool(), table, leaseMs: 1000 });
    const token = await coordinator.acquire('job', 'replica-a');
    expect(token).toBeGreaterThan(0);
    expect(await coordinator.writeSchedule('job', 'replica-a', token, { grid: 'g', last: 1, next: 2 })).toBe(
      true,
    );
    expect(await coordinator.readSchedule('job')).toEqual({ grid: 'g', last: 1, next: 2 });
    expect(await coordinator.release('job', 'replica-a')).toBe(true);
  });

  it('make a job that runs at least once idempotent: a slot written again, a write of an older holding refused', async () => {
    const [sql] = sqlOf('docs/failures.md');
    const table = postgres.table();
    const [create, upsert] = sql.code.replaceAll('nightly_report', `"${table}"`).split(';\n\n');
    const pool = postgres.pool();
    await pool.query(create);
    const write = (token: number, body: object) => pool.query(upsert, ['2026-12-01T03:00:00Z', token, body]);
    await write(7, { run: 1 });
    await write(9, { run: 2 });
    await write(8, { run: 'late, from an older holding' });
    const { rows } = await pool.query(`SELECT fencing_token, body FROM "${table}"`);
    expect(rows).toEqual([{ fencing_token: '9', body: { run: 2 } }]);
  });
});

describe('the links between the documents', () => {
  /** The anchor GitHub gives a heading. */
  const slug = (heading: string) =>
    heading
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\- _]/gu, '')
      .replace(/ /g, '-');
  const anchors = (document: string) =>
    new Set(
      readFileSync(join(root, document), 'utf8')
        .replace(/^```[\s\S]*?^```/gm, '')
        .split('\n')
        .filter((line) => /^#{1,6} /.test(line))
        .map((line) => slug(line.replace(/^#+ /, ''))),
    );

  it.each(documents)('of %s reach a file and a heading that exist', (document) => {
    const text = readFileSync(join(root, document), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
    const broken: string[] = [];
    for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;
      const [path, anchor] = target.split('#');
      const file = path === '' ? document : relative(root, resolve(root, dirname(document), path));
      let names: Set<string> | undefined;
      try {
        names = file.endsWith('.md') ? anchors(file) : (readFileSync(join(root, file)), undefined);
      } catch {
        broken.push(`${target}: no file ${file}`);
        continue;
      }
      if (anchor !== undefined && !names?.has(anchor))
        broken.push(`${target}: no heading #${anchor} in ${file}`);
    }
    expect(broken).toEqual([]);
  });
});

afterAll(() => {
  rmSync(join(root, 'node_modules', '.cache', 'doc-blocks'), { recursive: true, force: true });
});
