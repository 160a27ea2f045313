import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, relative } from 'node:path';
import ts from 'typescript';

const root = join(import.meta.dirname, '..', '..');
/** Under node_modules, so that the compiled files resolve the project's packages. */
const out = join(root, 'node_modules', '.cache', 'nestjs-periodic-tests');

/**
 * Compiles `lib/` and an application (a file, or every file of a folder) to ES modules, type-stripping only
 * as Node 20 cannot run TypeScript, and returns the path of the JavaScript of `entry`.
 */
export function compileApp(entry: string, folder?: string): string {
  const sources = [...listTs(join(root, 'lib')), ...(folder === undefined ? [entry] : listTs(folder))];
  for (const source of sources) {
    const { outputText } = ts.transpileModule(readFileSync(source, 'utf8'), {
      fileName: source,
      compilerOptions: {
        module: ts.ModuleKind.ESNext,
        target: ts.ScriptTarget.ES2022,
        experimentalDecorators: true,
        emitDecoratorMetadata: true,
      },
    });
    const target = join(out, relative(root, source)).replace(/\.ts$/, '.js');
    mkdirSync(dirname(target), { recursive: true });
    write(target, outputText);
  }
  write(join(out, 'package.json'), '{ "type": "module" }\n');
  return join(out, relative(root, entry)).replace(/\.ts$/, '.js');
}

/**
 * Writes a compiled file where its content changed, whole at once (a file renamed into place): test files that
 * run side by side compile the same sources into the same folder while the other's processes load them.
 */
function write(target: string, content: string): void {
  if (existsSync(target) && readFileSync(target, 'utf8') === content) return;
  const partial = `${target}.${process.pid}.partial`;
  writeFileSync(partial, content);
  renameSync(partial, target);
}

function listTs(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** A child process with its stdout as lines, and a way to wait for one of them. */
export interface Child {
  process: ChildProcess;
  lines: string[];
  /** Resolves once a line equal to `line` (or matching it) has been printed; rejects if the process exits first. */
  waitFor(line: string | RegExp): Promise<void>;
  /** Resolves with how the process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export function startNode(script: string, env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, [script], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NO_COLOR: '1', ...env },
  });
  const lines: string[] = [];
  const matches = (line: string, wanted: string | RegExp) =>
    typeof wanted === 'string' ? line === wanted : wanted.test(line);
  const waiters: { line: string | RegExp; resolve(): void }[] = [];
  let stderr = '';
  let buffered = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    const complete = buffered.split('\n');
    buffered = complete.pop()!;
    for (const line of complete) {
      lines.push(line);
      for (const waiter of waiters.filter((w) => matches(line, w.line))) waiter.resolve();
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    process: child,
    lines,
    exited,
    waitFor: (line) =>
      lines.some((printed) => matches(printed, line))
        ? Promise.resolve()
        : new Promise((resolve, reject) => {
            waiters.push({ line, resolve });
            void exited.then(({ code, signal }) =>
              reject(
                new Error(`the process exited (${signal ?? code}) before printing "${line}": ${stderr}`),
              ),
            );
          }),
  };
}

/** A TCP port on 127.0.0.1 that nothing listens on now. */
export async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}
