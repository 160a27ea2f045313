// Names, notes and errors as an attacker would write them (SPEC 22): a name is 1 to 200 characters of
// well-formed Unicode with no control character and not only white space, refused otherwise wherever it enters
// with the rule it breaks; every other name works; a log line stays one line whatever it carries; and one option,
// `errors`, decides what an error becomes wherever it is shown.
/* eslint-disable no-control-regex -- these tests look for control characters */
import { describe, expect, it } from '@jest/globals';
import { Injectable } from '@nestjs/common';
import fc from 'fast-check';
import { Periodic, PeriodicConfigError, PeriodicModule } from '../../lib/index.js';
import { JobHealth } from '../../lib/nest/health.js';
import { listOf, PAGE_ROWS } from '../../lib/dashboard/views.js';
import { useApps } from './helpers.js';

const RULE = '1 to 200 characters of well-formed Unicode, with no control character and not only white space';

/** [what, name, what the message says of it] */
const BAD_NAMES: [string, string, string][] = [
  ['a NUL byte', 'Bad\u0000name', 'it has the control character U+0000 at index 3; remove it'],
  ['a line feed', 'runs\nVictim', 'it has the control character U+000A at index 4'],
  ['an escape', '\u001b[31mred', 'it has the control character U+001B at index 0'],
  ['DEL', 'a\u007fb', 'U+007F at index 1'],
  ['a C1 control (NEL)', 'a\u0085b', 'U+0085 at index 1'],
  ['a lone surrogate', 'Bad\uD800name', 'a lone surrogate at index 3, which is not Unicode text'],
  ['a lone low surrogate', '\uDC00', 'a lone surrogate at index 0'],
  ['one space', ' ', 'it is only white space'],
  ['only white space', '\u00a0\u2003 ', 'it is only white space'],
  ['201 characters', 'x'.repeat(201), 'it has 201 characters; give a shorter name'],
  ['201 emoji', '🙂'.repeat(201), 'it has 201 characters'],
];

/** A name as an error message shows it: JSON's escapes, and U+007F to U+009F escaped too. */
const shown = (name: string) =>
  JSON.stringify(name).replace(/[\u007f-\u009f]/g, (char) => `\\u00${char.charCodeAt(0).toString(16)}`);

const GOOD_NAMES = [
  'a/b',
  '50%',
  `?#&"'<>`,
  'x:y',
  '名前',
  '🙂 job',
  'runs',
  'tails x',
  'x'.repeat(200),
  '🙂'.repeat(200),
  '%E0%A4%A',
  '{tag}:job',
];

describe('names', () => {
  const createApp = useApps();

  it.each(BAD_NAMES)(
    '@Periodic({ name }) with %s fails the bootstrap, naming the rule',
    async (_, name, says) => {
      @Injectable()
      class Jobs {
        @Periodic({ every: 1000, name })
        work(): void {}
      }
      const app = createApp({ imports: [PeriodicModule.forRoot({ logger: false })], providers: [Jobs] });
      await expect(app).rejects.toThrow(PeriodicConfigError);
      await expect(
        createApp({ imports: [PeriodicModule.forRoot({ logger: false })], providers: [Jobs] }),
      ).rejects.toThrow(`@Periodic() on Jobs.work: "name" must be ${RULE}, got ${shown(name).slice(0, 40)}`);
      await expect(
        createApp({ imports: [PeriodicModule.forRoot({ logger: false })], providers: [Jobs] }),
      ).rejects.toThrow(says);
    },
  );

  it.each(BAD_NAMES)('registry.add() with %s is refused, naming the rule', async (_, name, says) => {
    const { registry } = await createApp({ imports: [PeriodicModule.forRoot({ logger: false })] });
    const add = () => registry.add(name, () => undefined, { every: 1000 });
    expect(add).toThrow(PeriodicConfigError);
    expect(add).toThrow(`"name" must be ${RULE}`);
    expect(add).toThrow(says);
    // The message shows the name with every control character escaped, C1 included: it goes into log lines.
    expect(add).toThrow(/^[^\u0000-\u001f\u007f-\u009f]*$/);
    expect(registry.getAll()).toEqual([]);
  });

  it.each(BAD_NAMES)('forRoot({ replica }) with %s is refused, naming the rule', async (_, replica, says) => {
    const create = () => PeriodicModule.forRoot({ replica });
    expect(create).toThrow(PeriodicConfigError);
    expect(create).toThrow(`"replica" must be ${RULE}, naming this process`);
    expect(create).toThrow(says);
  });

  it.each(GOOD_NAMES)('%j is an ordinary name: added, found, run, recorded and removed', async (name) => {
    const { registry, seen } = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })],
    });
    registry.add(name, () => undefined, { every: 1000 });
    expect(registry.get(name).name).toBe(name);
    expect(await registry.syncTick(name)).toMatchObject({ ok: true, reason: 'normal' });
    expect(await registry.history(name)).toMatchObject([{ name, reason: 'normal' }]);
    expect(seen.filter((event) => event.type === 'finished')).toMatchObject([{ name }]);
    await registry.remove(name);
    expect(registry.has(name)).toBe(false);
  });

  it('a property: every string the rule accepts names a job, and every string with a control character does not', async () => {
    const { registry } = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })],
    });
    const legal = fc
      .string({ unit: 'grapheme', minLength: 1, maxLength: 60 })
      .map((text) => text.replace(/[\u0000-\u001f\u007f-\u009f]/g, '·'))
      // '.' and '..' are refused apart, as a URL cannot name them (test/scheduler/options.spec.ts).
      .filter((text) => text.trim() !== '' && [...text].length <= 200 && text !== '.' && text !== '..');
    await fc.assert(
      fc.asyncProperty(legal, async (name) => {
        if (registry.has(name)) return;
        registry.add(name, () => undefined, { every: 1000 });
        expect(await registry.syncTick(name)).toMatchObject({ ok: true });
        expect(registry.status(name).name).toBe(name);
        await registry.remove(name);
      }),
      { numRuns: 200 },
    );
    const control = fc
      .tuple(fc.string(), fc.integer({ min: 0, max: 0x9f }), fc.string())
      .filter(([, code]) => code < 0x20 || code >= 0x7f)
      .map(([before, code, after]) => `${before}${String.fromCharCode(code)}${after}`);
    fc.assert(
      fc.property(control, (name) => {
        expect(() => registry.add(name, () => undefined, { every: 1000 })).toThrow(
          /must be 1 to 200 characters/,
        );
      }),
      { numRuns: 200 },
    );
  });
});

describe('log lines are one line each, whatever a note, an actor or an error holds', () => {
  const createApp = useApps();

  it('CR, LF and other control characters are escaped in the line and in the stack', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual' })] });
    app.registry.add(
      'Log.job',
      () => {
        throw new Error('boom\r\nFAKE-LINE \u001b[2J');
      },
      { every: 1000 },
    );
    await app.registry.pause('Log.job', {
      by: 'mallory\r\nFAKE-ACTOR',
      note: 'maintenance\nFAKE-NOTE\u2028x',
    });
    await app.registry.resume('Log.job');
    await app.registry.syncTick('Log.job');
    const lines = app.logs.lines.filter((line) => line.context === 'Periodic');
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const { message, stack } of lines) {
      expect(message).not.toMatch(/[\r\n\u001b\u2028]/);
      if (stack !== undefined) expect(stack).not.toMatch(/[\r\n\u001b\u2028]/);
    }
    const paused = lines.find((line) => line.message.startsWith('Log.job paused'))!.message;
    expect(paused).toMatch(
      /^Log\.job paused by mallory\\r\\nFAKE-ACTOR on .+: maintenance\\nFAKE-NOTE\\u2028x$/,
    );
    const failed = lines.find((line) => line.level === 'error')!;
    expect(failed.message).toBe('job Log.job#1 failed: boom\\r\\nFAKE-LINE \\u001b[2J');
    expect(failed.stack).toMatch(/^Error: boom\\r\\nFAKE-LINE \\u001b\[2J\\n {4}at /);
  });
});

describe("errors: 'message' | 'name', the module option", () => {
  const createApp = useApps();
  const secret = () => {
    throw new Error('password=hunter2-SECRET');
  };

  it.each([
    ['errors: name, history on', { errors: 'name' as const }],
    ['errors: name, history off', { errors: 'name' as const, history: false as const }],
    ['history.errors: name (its alias)', { history: { errors: 'name' as const } }],
  ])('%s: no shown error carries the message', async (_, options) => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false, ...options })],
    });
    app.registry.add('Secret.job', secret, { every: 1000 });
    await app.registry.syncTick('Secret.job');
    const shown = JSON.stringify([
      await app.registry.history('Secret.job'),
      await app.registry.fleetStatus('Secret.job'),
      await listOf(app.registry, new JobHealth(app.registry), {
        state: null,
        q: null,
        handler: null,
        after: null,
        limit: PAGE_ROWS,
      }),
    ]);
    expect(shown).toContain('"name":"Error"');
    expect(shown).not.toContain('hunter2');
  });

  it("errors: 'message' (the default) keeps the message, cut to 300 characters", async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot({ mode: 'manual', logger: false })] });
    app.registry.add('Secret.job', secret, { every: 1000 });
    await app.registry.syncTick('Secret.job');
    expect(await app.registry.history('Secret.job')).toMatchObject([
      { error: { name: 'Error', message: 'password=hunter2-SECRET' } },
    ]);
  });

  it('errors and history.errors that disagree are refused', () => {
    expect(() => PeriodicModule.forRoot({ errors: 'name', history: { errors: 'message' } })).toThrow(
      /"errors" is 'name' and "history.errors" is 'message': they are one option/,
    );
    expect(() => PeriodicModule.forRoot({ errors: 'names' as never })).toThrow(/did you mean 'name'\?/);
  });
});
