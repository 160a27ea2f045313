/**
 * The keys of RedisCoordinator, as its TypeScript makes them (docs/replicas.md, "Keys in Redis"); its Lua scripts
 * make them with lua/include/key-of.lua, from the letters of KEY_KINDS. Every key is `<keyPrefix>\n<kind><name>`:
 * the prefix, a line feed, one letter for what the key holds, and the job's (or owner's) name with `%`, line feed,
 * `{` and `}` percent-encoded. A `keyPrefix` never has a line feed (the option refuses one), so the first line feed
 * of a key ends its prefix, the letter after it says the kind, and the rest decodes to one name: two different
 * (keyPrefix, kind, name) never make one key, even where one prefix starts with another (`p:` and `p:x:`), and a
 * job named like a key of the store's own is an ordinary job. No brace comes after the prefix, so a hash tag in the
 * prefix (`{periodic}:`) puts every key of a coordinator in one slot of a Redis Cluster, and a name cannot move its
 * key to another.
 */

/** What a key holds: the letter that says it, after the prefix's line feed. */
export const KEY_KINDS = {
  /** The hash of the fleet: fencing tokens, schedules, members, pauses, audit trails (fields `<kind>:<name>`). */
  fleet: 'h',
  /** The lease of a job: its owner, expiring after `leaseMs`. */
  lease: 'l',
  /** The history of a job, a list (lua/include/record.lua). */
  runs: 'r',
  /** The tails of the histories of the jobs an owner holds, a hash (RunTail). */
  tails: 't',
  /** The stored schedules, a hash of their records by name (lua/include/stored.lua). */
  stored: 's',
  /** The changes of the stored schedules, a sorted set of their names scored by the count of their last change. */
  changes: 'c',
  /** The names of the stored schedules, a sorted set read in lexicographic order. */
  names: 'n',
  /** The names of the stored schedules by handler, a sorted set of `<handler>\0<name>` read in lexicographic order. */
  handlers: 'k',
  /** The channel on which a change of a stored schedule is published (not a key). */
  channel: 'p',
} as const;

export type KeyKind = keyof typeof KEY_KINDS;

/** What a key's prefix is followed by: the only line feed before the name. */
export const KEY_SEPARATOR = '\n';

/** The characters a name has percent-encoded in a key: `%` for the code to be read back, the others above. */
const ENCODED = /[%\n{}]/g;

/** A name as a key holds it: `%`, line feed, `{` and `}` percent-encoded (`%25`, `%0A`, `%7B`, `%7D`). */
export function keyName(name: string): string {
  return name.replace(
    ENCODED,
    (character) => `%${character.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`,
  );
}

/** The key of `kind` for `name` (none for the fleet's hash) under `keyPrefix`, which has no line feed. */
export function keyOf(keyPrefix: string, kind: KeyKind, name = ''): string {
  return `${keyPrefix}${KEY_SEPARATOR}${KEY_KINDS[kind]}${keyName(name)}`;
}
