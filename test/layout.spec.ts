// The shape of lib/: no module imports itself back through others (type-only imports included), and the
// engine (lib/scheduler) imports nothing of Nest or of the Nest layer.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import ts from 'typescript';

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
});
