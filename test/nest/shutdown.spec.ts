import { join } from 'node:path';
import { beforeAll, describe, expect, it } from '@jest/globals';
import { compileApp, startNode } from './child-app.js';

describe('a Nest application with enableShutdownHooks(), as a process', () => {
  let script: string;
  beforeAll(() => {
    script = compileApp(join(import.meta.dirname, 'fixtures', 'shutdown-app.ts'));
  });

  const drained = (signal: string) => [
    'ready',
    'run started',
    'run aborted: shutdown',
    'run cleaned up',
    `application shut down on ${signal}`,
    'timers left: 0',
  ];

  it.each(['SIGTERM', 'SIGINT'] as const)(
    'on %s: the run in flight sees its signal aborted and cleans up, then Nest shuts down and ends the process by that signal',
    async (signal) => {
      const child = startNode(script);
      await child.waitFor('run started');
      child.process.kill(signal);
      const ended = await child.exited;
      expect(child.lines).toEqual(drained(signal));
      expect(ended).toEqual({ code: null, signal });
    },
    30_000,
  );

  it.each([
    ['SIGTERM', 'SIGTERM'],
    ['SIGTERM', 'SIGINT'],
  ] as const)(
    'a second signal during the drain (%s, then %s) changes nothing: the run still cleans up first',
    async (first, second) => {
      const child = startNode(script);
      await child.waitFor('run started');
      child.process.kill(first);
      await child.waitFor('run aborted: shutdown');
      child.process.kill(second);
      const ended = await child.exited;
      expect(child.lines).toEqual(drained(first));
      expect(ended).toEqual({ code: null, signal: first });
    },
    30_000,
  );
});

describe('the sample application', () => {
  let script: string;
  beforeAll(() => {
    const sample = join(import.meta.dirname, '..', '..', 'sample');
    script = compileApp(join(sample, 'main.ts'), sample);
  });

  it("logs its jobs in the logger's words and, on SIGTERM, drains them before the store disconnects", async () => {
    const child = startNode(script);
    await child.waitFor(/\[Periodic\] job report#1 started$/);
    child.process.kill('SIGTERM');
    expect(await child.exited).toEqual({ code: null, signal: 'SIGTERM' });
    const logged = child.lines.map((line) => line.replace(/^.*?(LOG|DEBUG|WARN|ERROR) +/, '$1 '));
    expect(logged).toEqual(
      expect.arrayContaining([
        'LOG [Store] connected',
        'DEBUG [Periodic] job heartbeat#1 started',
        expect.stringMatching(/^DEBUG \[Periodic\] job heartbeat#1 finished, duration=\d+ms$/),
        'LOG [Periodic] job report#1 shut down',
        'LOG [Store] disconnected',
      ]),
    );
    expect(logged.indexOf('LOG [Store] disconnected')).toBeGreaterThan(
      logged.indexOf('LOG [Periodic] job report#1 shut down'),
    );
    expect(logged.indexOf('LOG [Store] connected')).toBeLessThan(
      logged.indexOf('DEBUG [Periodic] job heartbeat#1 started'),
    );
  }, 30_000);
});
