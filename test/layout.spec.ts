// The shape of lib/: no module imports itself back through others (type-only imports included), the engine
// (lib/scheduler) imports nothing of Nest or of the Nest layer, Nest is imported in the Nest layer and the
// subpaths only, and one tick crosses at most four files, from the timer to the method and back.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it, jest } from '@jest/globals';
import ts from 'typescript';
import type { PeriodicEvent } from '../lib/scheduler/events.js';
import { PeriodicScheduler } from '../lib/scheduler/periodic-scheduler.js';

const lib = join(import.meta.dirname, '..', 'lib');

/** Every module of lib/ with what it imports: its own modules by path from lib/, the others by name. */
function imports(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const files = readdirSync(lib, { recursive: true, encoding: 'utf8' }).filter((file) =>
    file.endsWith('.ts'),
  );
  for (const file of files) {
    // TypeScript's scanner sees `import type` and `export … from` too.
    const { importedFiles } = ts.preProcessFile(readFileSync(join(lib, file), 'utf8'), true, true);
    graph.set(
      file,
      importedFiles.map(({ fileName }) =>
        fileName.startsWith('.')
          ? relative(lib, resolve(lib, dirname(file), fileName)).replace(/\.js$/, '.ts')
          : fileName,
      ),
    );
  }
  return graph;
}

describe('the modules of lib/', () => {
  it('import no module that imports them back, type-only imports included', () => {
    const graph = imports();
    const cycles: string[] = [];
    const done = new Set<string>();
    const visit = (file: string, path: string[]): void => {
      const at = path.indexOf(file);
      if (at >= 0) return void cycles.push([...path.slice(at), file].join(' -> '));
      if (done.has(file)) return;
      for (const next of graph.get(file) ?? []) if (graph.has(next)) visit(next, [...path, file]);
      done.add(file);
    };
    for (const file of graph.keys()) visit(file, []);
    expect(graph.size).toBeGreaterThan(20);
    expect(cycles).toEqual([]);
  });

  it('the engine, lib/scheduler, imports nothing of Nest or of the Nest layer', () => {
    const wrong = [...imports()]
      .filter(([file]) => file.startsWith('scheduler/'))
      .flatMap(([file, imported]) =>
        imported
          .filter(
            (target) =>
              target.startsWith('@nestjs/') || (target.endsWith('.ts') && !target.startsWith('scheduler/')),
          )
          .map((target) => `${file} imports ${target}`),
      );
    expect(wrong).toEqual([]);
  });

  it('Nest is imported by the Nest layer (lib/nest) and the subpaths that need it only', () => {
    const importers = [...imports()]
      .filter(([, imported]) => imported.some((target) => target.startsWith('@nestjs/')))
      .map(([file]) => file.split('/')[0]);
    expect(new Set(importers)).toEqual(new Set(['nest', 'terminus', 'dashboard']));
  });

  it("lib/'s folders import no folder that imports them back", () => {
    const folderOf = (file: string) => (file.includes('/') ? file.split('/')[0] : '.');
    const folders = new Map<string, Set<string>>();
    for (const [file, imported] of imports()) {
      const from = folderOf(file);
      for (const target of imported.filter((name) => name.endsWith('.ts'))) {
        const to = folderOf(target);
        if (to !== from) (folders.get(from) ?? folders.set(from, new Set()).get(from)!).add(to);
      }
    }
    const loops: string[] = [];
    const visit = (folder: string, path: string[]): void => {
      const at = path.indexOf(folder);
      if (at >= 0) return void loops.push([...path.slice(at), folder].join(' -> '));
      for (const next of folders.get(folder) ?? []) visit(next, [...path, folder]);
    };
    for (const folder of folders.keys()) visit(folder, []);
    expect(folders.size).toBeGreaterThan(3);
    expect(loops).toEqual([]);
  });
});

describe('one tick, from the timer to the method and back', () => {
  /** The files of lib/ on the stack now. */
  function libFiles(into: Set<string>): void {
    for (const line of new Error().stack!.split('\n')) {
      const file = /\/lib\/([\w/-]+\.ts):\d+/.exec(line)?.[1];
      if (file !== undefined) into.add(file);
    }
  }

  /** Runs one tick of a job whose method (called as the Nest layer calls it) and `finished` listener look at the stack. */
  async function filesOfOneTick(options: { every: number } | { cron: string }): Promise<string[]> {
    const files = new Set<string>();
    const host = { work: () => libFiles(files) };
    const scheduler = new PeriodicScheduler(
      { name: 'path', timezone: undefined, ...options, run: host.work },
      {
        emit: (event: PeriodicEvent) => event.type === 'finished' && libFiles(files),
        wants: (type) => type === 'finished',
      },
      { method: { target: host, key: 'work' } },
    );
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 100;
    try {
      scheduler.start();
      await jest.advanceTimersByTimeAsync(1000);
    } finally {
      Error.stackTraceLimit = limit;
      await scheduler.stop();
    }
    return [...files].sort();
  }

  it('the method and the end of its run are reached through deadline-timer.ts, periodic-scheduler.ts and run.ts', async () => {
    jest.useFakeTimers({ now: new Date('2026-01-01T00:00:00.500Z') });
    const path = ['scheduler/deadline-timer.ts', 'scheduler/periodic-scheduler.ts', 'scheduler/run.ts'];
    try {
      expect(await filesOfOneTick({ every: 1000 })).toEqual(path);
      // A cron job asks schedule.ts for its slots on the way, which returns before the run starts.
      expect(await filesOfOneTick({ cron: '* * * * * *' })).toEqual(path);
    } finally {
      jest.useRealTimers();
    }
  });
});
