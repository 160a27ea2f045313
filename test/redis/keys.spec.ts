// Redis keys are one-to-one in (keyPrefix, name): no two prefixes, and no job named like one of the store's own
// keys, ever share a key (docs/replicas.md, "Keys in Redis").
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import {
  PeriodicConfigError,
  PeriodicModule,
  type PeriodicRunEntry,
  RedisCoordinator,
} from '../../lib/index.js';
import { KEY_KINDS, KEY_SEPARATOR, type KeyKind, keyOf } from '../../lib/coordinators/redis/keys.js';
import { useApps } from '../nest/helpers.js';
import { describeWithRedis, dropKeys, redisClient, uniquePrefix } from './redis.js';

const describeRedis = await describeWithRedis();

/** A key read back: its prefix, kind and name; what keyOf makes can always be read back, so it is one-to-one. */
function decoded(key: string): { prefix: string; kind: KeyKind; name: string } {
  const at = key.indexOf(KEY_SEPARATOR);
  const kind = (Object.keys(KEY_KINDS) as KeyKind[]).find((one) => KEY_KINDS[one] === key[at + 1])!;
  const name = key
    .slice(at + 2)
    .replace(/%([0-9A-F]{2})/g, (_, code: string) => String.fromCharCode(parseInt(code, 16)));
  return { prefix: key.slice(0, at), kind, name };
}

// Prefixes and names rich in the characters that matter: the separator (in names), `%`, braces, the store's
// own words, and any Unicode.
const piece = fc.oneof(
  fc.constantFrom('%', '{', '}', ':', 'runs', 'tails', 'h', 'l', 'r', 't', '%0A', '%25', '{periodic}'),
  fc.string({ unit: 'grapheme', maxLength: 4 }),
);
const prefixes = fc
  .array(piece, { minLength: 1, maxLength: 5 })
  .map((parts) => parts.join('').replaceAll(KEY_SEPARATOR, ''))
  .filter((prefix) => prefix !== '');
const names = fc.array(fc.oneof(piece, fc.constant('\n')), { maxLength: 6 }).map((parts) => parts.join(''));
const kinds = fc.constantFrom(...(Object.keys(KEY_KINDS) as KeyKind[]));
const NUM_RUNS = Number(process.env.NUM_RUNS ?? 2000);

describe('the key layout', () => {
  it('every key reads back to its prefix, kind and name: distinct triples never share a key', () => {
    fc.assert(
      fc.property(prefixes, kinds, names, (prefix, kind, name) => {
        expect(decoded(keyOf(prefix, kind, name))).toEqual({ prefix, kind, name });
      }),
      { numRuns: NUM_RUNS },
    );
    fc.assert(
      fc.property(fc.tuple(prefixes, kinds, names), fc.tuple(prefixes, kinds, names), (a, b) => {
        if (keyOf(...a) === keyOf(...b)) expect(a).toEqual(b);
      }),
      { numRuns: NUM_RUNS },
    );
  });

  it("'p:' with job 'x:J' and 'p:x:' with job 'J' have different keys, and so do a job and the store's own words", () => {
    expect(keyOf('p:', 'lease', 'x:J')).not.toBe(keyOf('p:x:', 'lease', 'J'));
    expect(keyOf('p:', 'lease', 'x:')).not.toBe(keyOf('p:x:', 'fleet'));
    expect(keyOf('p:', 'lease', 'runs\nVictim')).not.toBe(keyOf('p:', 'runs', 'Victim'));
    expect(keyOf('p:', 'lease', 'r%0AVictim')).not.toBe(keyOf('p:', 'lease', 'r\nVictim'));
  });

  it('a keyPrefix with a line feed is refused: the line feed ends the prefix in every key', () => {
    const create = () =>
      new RedisCoordinator({ client: { eval: async () => 0, evalsha: async () => 0 }, keyPrefix: 'a\nb' });
    expect(create).toThrow(PeriodicConfigError);
    expect(create).toThrow(
      `new RedisCoordinator(): "keyPrefix" must be a non-empty string without a line feed, such as 'periodic:', got "a\\nb"`,
    );
  });

  it('no brace follows the prefix: a hash tag in the prefix holds every key in its slot, whatever the name', () => {
    fc.assert(
      fc.property(kinds, names, (kind, name) => {
        expect(keyOf('{periodic}:', kind, name).slice('{periodic}:'.length)).not.toMatch(/[{}]/);
      }),
      { numRuns: NUM_RUNS },
    );
  });
});

describeRedis('keys on a real Redis', () => {
  const createApp = useApps();
  const redis = redisClient();
  const base = uniquePrefix();
  afterAll(async () => {
    await dropKeys(redis, base);
    await redis.quit();
  });

  it("the scripts' Lua makes the same keys as the TypeScript", async () => {
    const lua = join(import.meta.dirname, '..', '..', 'lib', 'coordinators', 'redis', 'lua');
    const keyOfLua = readFileSync(join(lua, 'include', 'key-of.lua'), 'utf8');
    const script = `${keyOfLua}\nreturn keyOf(KEYS[1], ARGV[1], ARGV[2])`;
    await fc.assert(
      fc.asyncProperty(prefixes, kinds, names, async (prefix, kind, name) => {
        const fleet = keyOf(prefix, 'fleet');
        expect(await redis.eval(script, 1, fleet, KEY_KINDS[kind], name)).toBe(keyOf(prefix, kind, name));
      }),
      { numRuns: 300 },
    );
  });

  it("a job named 'runs\\nVictim' (and others named like the store's keys) beside 'Victim': all lease, and Victim's history is its own", async () => {
    const coordinator = new RedisCoordinator({ client: redis, keyPrefix: `${base}words:`, leaseMs: 5000 });
    const run: PeriodicRunEntry = {
      id: 'other/1#1',
      name: 'Victim',
      jobId: 1,
      replica: 'other',
      fencingToken: null,
      slot: null,
      origin: 'manual',
      attempt: 1,
      startedAt: 1_733_000_000_000,
      finishedAt: 1_733_000_000_010,
      reason: 'normal',
      durationMs: 10,
      error: null,
    };
    // Victim's history list exists before the others take their leases.
    await coordinator.recordRuns([run], 100);
    const jobs = ['runs\nVictim', 'tails\nowner-a', 'runs', 'tails', 'h', 'Victim'];
    const member = { owner: 'owner-a', replica: 'a', jobs: '' };
    const { acquired } = await coordinator.heartbeat({ member, renew: [], acquire: jobs });
    expect(acquired.map((taken) => (taken?.fencingToken ?? 0) > 0)).toEqual(jobs.map(() => true));
    await coordinator.recordRuns([{ ...run, id: 'other/1#2', name: 'runs\nVictim' }], 100);
    expect((await coordinator.readHistory('Victim', 10, null)).map(({ id }) => id)).toEqual(['other/1#1']);
  });

  it("keyPrefix 'p:' with job 'x:J' and keyPrefix 'p:x:' with job 'J' are two fleets: both jobs run", async () => {
    const started = (keyPrefix: string, name: string) => {
      const coordinator = new RedisCoordinator({ client: redis, keyPrefix, leaseMs: 3000 });
      return createApp({ imports: [PeriodicModule.forRoot({ coordinator, logger: false })] }).then((app) => {
        const first = app.events.once('started');
        app.registry.add(name, () => undefined, { every: 100, exclusive: true });
        return first;
      });
    };
    const [one, other] = await Promise.all([started(`${base}p:`, 'x:J'), started(`${base}p:x:`, 'J')]);
    expect([one.name, other.name]).toEqual(['x:J', 'J']);
  }, 20_000);
});
