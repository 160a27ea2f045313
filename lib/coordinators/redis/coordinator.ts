import { createHash } from 'node:crypto';
import type {
  PeriodicCoordinator,
  PeriodicFleetMember,
  PeriodicFleetRead,
  PeriodicFleetSchedule,
  PeriodicHeartbeat,
  PeriodicHeartbeatReply,
  PeriodicIncidentKind,
  PeriodicIncidentRecord,
  PeriodicLeaseHeld,
  PeriodicOperation,
  PeriodicRunEntry,
  PeriodicScheduleWrite,
  PeriodicScheduleWritten,
  PeriodicStoredAnswer,
  PeriodicStoredChanges,
  PeriodicStoredQuery,
  PeriodicStoredRecord,
  PeriodicStoredWrite,
  PeriodicTriggerAnswer,
  PeriodicTriggerRequest,
  PeriodicTriggerState,
} from '../../scheduler/coordinator-port.js';
import { describeValue, isError } from '../../scheduler/errors.js';
import { HISTORY_DEFAULTS, newestFirst } from '../../scheduler/history.js';
import { checkedOptions, type OptionRule } from '../../scheduler/rules.js';
import {
  integerReply,
  LEASE_MS,
  operationOf,
  byUtf8,
  incidentOf,
  RECORD_VERSION,
  triggerAnswerOf,
  triggerOf,
} from '../replies.js';
import { KEY_KINDS, KEY_SEPARATOR, keyOf } from './keys.js';
import {
  ACQUIRE,
  HEARTBEAT,
  CLOSE_INCIDENT,
  LIST_STORED,
  type LuaScript,
  OPEN_INCIDENT,
  OPERATE,
  READ_FIELDS,
  READ_FLEET,
  READ_HISTORY,
  READ_INCIDENTS,
  READ_SCHEDULE,
  READ_STORED_CHANGES,
  READ_TRIGGER,
  RELEASE,
  RELEASE_ALL,
  REMOVE_STORED,
  RENEW,
  RENEW_HELD,
  REQUEST_TRIGGER,
  SET_FIELD,
  WRITE_HELD,
  WRITE_SCHEDULE,
  WRITE_SCHEDULES,
  WRITE_STORED,
} from './lua.generated.js';
import { type Holding, latest, listRecord, type RecordBatch, Records, STEP } from './records.js';
import { historyOf, RunTail, SEGMENT } from './tail.js';

/** What the coordinator needs of its client; an ioredis `Redis` or `Cluster` has it. */
export interface RedisClient {
  eval(script: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  evalsha(sha1: string, numkeys: number, ...args: (string | number)[]): Promise<unknown>;
  /**
   * Any command: the holder of a job's lease sends the tail of its history with it (RunTail). A client without it
   * records every run in a script of its own, which costs Redis about three times as much.
   */
  call?(command: string, ...args: (string | number)[]): Promise<unknown>;
  /**
   * A new connection with the same options: the coordinator subscribes to the changes of stored schedules on one
   * (`watchStored`), so that replicas apply them at once. A client without it leaves replicas to find them with
   * their heartbeats, within `leaseMs / 3`.
   */
  duplicate?(): RedisSubscriber;
}

/** What the coordinator needs of a connection it subscribes with; an ioredis `Redis` has it. */
export interface RedisSubscriber {
  subscribe(channel: string): Promise<unknown>;
  on(event: 'message', listener: (channel: string, message: string) => void): unknown;
  on(event: 'error', listener: (error: unknown) => void): unknown;
  disconnect(): void;
}

/** Options of {@link RedisCoordinator}. */
export interface RedisCoordinatorOptions {
  /** The connection, e.g. `new Redis(process.env.REDIS_URL)` from ioredis; the application closes it. */
  client: RedisClient;
  /**
   * Begins every key of the coordinator, before a line feed (it cannot have one itself): `<keyPrefix>\nh` is the
   * hash of the jobs' fencing tokens and schedules and of the fleet's members, `<keyPrefix>\nl<name>` a job's lease
   * (docs/replicas.md, "Keys in Redis"). Give each application sharing a Redis its own. With Redis Cluster, put a
   * hash tag in it: `'{periodic}:'`.
   * @default 'periodic:'
   */
  keyPrefix?: string;
  /** How long a lease lasts unless renewed, in integer milliseconds, 100 to 86,400,000 (a day). @default 10_000 */
  leaseMs?: number;
}

/** How many runs in flight a coordinator remembers having recorded at their start. */
const OPEN_KEPT = 10_000;

/**
 * The TypeScript constants the scripts name, as `${SEGMENT}` or `${KEY_KINDS.tails}` (lua/): one definition for
 * both languages.
 */
const LUA_CONSTANTS = new Map<string, string | number>([
  ...Object.entries(KEY_KINDS).map(([kind, letter]) => [`KEY_KINDS.${kind}`, letter] as const),
  ['SEGMENT', SEGMENT],
]);

/** A script's source as Redis runs it: the constants it names in their place. */
function luaSource({ source }: LuaScript): string {
  return source.replace(/\$\{([\w.]+)\}/g, (placeholder, name: string) => {
    const value = LUA_CONSTANTS.get(name);
    if (value === undefined)
      throw new Error(`A script of RedisCoordinator names ${placeholder}, a constant it lacks`);
    return String(value);
  });
}

const RULES = {
  client: {
    accepts: (value) => {
      const client = value as Partial<RedisClient> | null | undefined;
      return typeof client?.eval === 'function' && typeof client?.evalsha === 'function';
    },
    expected: 'an ioredis client, such as new Redis(process.env.REDIS_URL)',
    required: true,
  },
  keyPrefix: {
    accepts: (value) => typeof value === 'string' && value !== '' && !value.includes(KEY_SEPARATOR),
    expected: "a non-empty string without a line feed, such as 'periodic:'",
    because:
      'a line feed ends the prefix in every key the coordinator makes, so that no two prefixes share a key',
  },
  leaseMs: LEASE_MS,
} satisfies Record<keyof RedisCoordinatorOptions, OptionRule>;

/**
 * Shares the leases of `exclusive` jobs between the replicas of an application through Redis. The lease of
 * job `name` is the key `<keyPrefix>\nl<name>`; its fencing token and schedule are the fields `token:<name>`,
 * `schedule:<name>` and `grid:<name>` of the hash `<keyPrefix>\nh`, which also keeps the fleet's members (the keys
 * are one-to-one in the prefix and the name: keys.ts). The
 * coordinator sends Lua scripts (lua/, one a file) through the client it is given and loads no Redis library of its own. Replies are parsed whatever the client's options (`stringNumbers`, its own `keyPrefix`).
 */
export class RedisCoordinator implements PeriodicCoordinator {
  /** Begins every key of the coordinator, before a line feed. */
  readonly keyPrefix: string;
  /** How long a lease lasts unless renewed, in ms. */
  readonly leaseMs: number;
  /** The key of the fleet's hash, `<keyPrefix>\nh` (docs/replicas.md, "Keys in Redis"). */
  readonly #fleet: string;
  readonly #client: RedisClient;
  readonly #acquire;
  readonly #renew;
  readonly #release;
  readonly #readSchedule;
  readonly #writeSchedule;
  readonly #heartbeat = this.#script(HEARTBEAT);
  readonly #renewHeld = this.#script(RENEW_HELD);
  readonly #writeSchedules = this.#script(WRITE_SCHEDULES);
  readonly #writeHeld = this.#script(WRITE_HELD);
  readonly #releaseAll = this.#script(RELEASE_ALL);
  readonly #operate = this.#script(OPERATE);
  readonly #openIncident = this.#script(OPEN_INCIDENT);
  readonly #closeIncident = this.#script(CLOSE_INCIDENT);
  readonly #readIncidents = this.#script(READ_INCIDENTS);
  readonly #readFields = this.#script(READ_FIELDS);
  readonly #readHistory = this.#script(READ_HISTORY);
  readonly #readFleet = this.#script(READ_FLEET);
  readonly #requestTrigger = this.#script(REQUEST_TRIGGER);
  readonly #readTrigger = this.#script(READ_TRIGGER);
  readonly #setField = this.#script(SET_FIELD);
  readonly #writeStored = this.#script(WRITE_STORED);
  readonly #removeStored = this.#script(REMOVE_STORED);
  readonly #listStored = this.#script(LIST_STORED);
  readonly #readStoredChanges = this.#script(READ_STORED_CHANGES);
  /** Records of runs to send, with the writes of this turn if there are any (one script for both). */
  #records: Records | undefined;
  /**
   * The leases this coordinator's owners hold, by job, as their latest heartbeats renewed or took them: their
   * writes go unchecked (write-held-1.lua), and their runs to the tails of their histories (RunTail).
   */
  readonly #holdings = new Map<string, Holding>();
  /** The fleet's epoch (epoch.lua) as each owner's latest heartbeat read it, if all its steps read the same. */
  readonly #epochs = new Map<string, string>();
  /**
   * The runs recorded at their start, whose record is replaced when they end; at most OPEN_KEPT, the oldest
   * forgotten first (a run whose end was never sent, as when records were shed, would stay for ever): the end of
   * a run forgotten here is pushed, as is the end of one whose start is no longer among the 32 newest.
   */
  readonly #open = new Set<string>();
  /** How many runs per job a history read without `keep` reads: the latest `keep` given. */
  #keep = HISTORY_DEFAULTS.keep;
  /**
   * The grid each job's schedule has in Redis, as this coordinator last wrote it under a fencing token: a write
   * under the same token leaves it as it is (only the holder writes, and a job's grid rarely changes), and saves
   * Redis a field per claim.
   */
  readonly #grids = new Map<string, { fencingToken: number; grid: string }>();

  constructor(options: RedisCoordinatorOptions) {
    const where = 'new RedisCoordinator()';
    const given = checkedOptions(where, options, RULES, '{ client: new Redis(process.env.REDIS_URL) }');
    const { client, keyPrefix = 'periodic:', leaseMs = 10_000 } = given as unknown as RedisCoordinatorOptions;
    this.#client = client;
    this.keyPrefix = keyPrefix;
    this.#fleet = keyOf(keyPrefix, 'fleet');
    this.leaseMs = leaseMs;
    this.#acquire = this.#script(ACQUIRE);
    this.#renew = this.#script(RENEW);
    this.#release = this.#script(RELEASE);
    this.#readSchedule = this.#script(READ_SCHEDULE);
    this.#writeSchedule = this.#script(WRITE_SCHEDULE);
  }

  async acquire(name: string, owner: string): Promise<number> {
    return integerReply(
      'acquire',
      await this.#acquire([this.#lease(name), this.#fleet], owner, this.leaseMs, name),
    );
  }

  async renew(name: string, owner: string): Promise<boolean> {
    return integerReply('renew', await this.#renew([this.#lease(name)], owner, this.leaseMs), 1) === 1;
  }

  async release(name: string, owner: string): Promise<boolean> {
    return integerReply('release', await this.#release([this.#lease(name)], owner), 1) === 1;
  }

  async readSchedule(name: string): Promise<PeriodicFleetSchedule | null> {
    const reply = await this.#readSchedule([this.#fleet], name);
    const [last, next, grid] = Array.isArray(reply) ? (reply as unknown[]) : [];
    // Lua turns the nil of a missing field into false; a client may give null.
    if (grid === null || grid === false) return null;
    if (typeof grid !== 'string') throw new Error(`Redis answered ${describeValue(reply)} to readSchedule`);
    return scheduleReply('readSchedule', grid, last, next);
  }

  async writeSchedule(
    name: string,
    owner: string,
    fencingToken: number,
    schedule: PeriodicFleetSchedule,
  ): Promise<boolean> {
    const args = [owner, fencingToken, name, schedule.last, nextField(schedule), schedule.grid];
    return (
      integerReply(
        'writeSchedule',
        await this.#writeSchedule([this.#lease(name), this.#fleet], ...args),
        1,
      ) === 1
    );
  }

  /**
   * The heartbeat in scripts of at most STEP renewals and STEP leases to take each, sent together: a script
   * of tens of thousands of jobs would hold Redis up, and its arguments would not fit on Node's stack.
   */
  async heartbeat({ member, renew, acquire }: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply> {
    const steps = Math.max(1, Math.ceil(renew.length / STEP), Math.ceil(acquire.length / STEP));
    const replies = await Promise.all(
      Array.from({ length: steps }, (_, i) =>
        this.#heartbeatStep({
          member,
          renew: renew.slice(i * STEP, (i + 1) * STEP),
          acquire: acquire.slice(i * STEP, (i + 1) * STEP),
        }),
      ),
    ).catch((error: unknown) => {
      // The replica counts its leases lost: their runs are recorded in their lists from now on.
      this.#forget(member.owner);
      throw error;
    });
    const reply: PeriodicHeartbeatReply = {
      ...(replies.at(-1)!.schedules === undefined ? {} : { schedules: replies.at(-1)!.schedules }),
      members: replies.at(-1)!.members,
      paused: replies.at(-1)!.paused,
      triggers: replies.flatMap((step) => step.triggers ?? []),
      renewed: replies.flatMap((step) => step.renewed),
      acquired: replies.flatMap((step) => step.acquired),
      ...(replies.at(-1)!.fleet === undefined ? {} : { fleet: replies.at(-1)!.fleet }),
    };
    this.#held(member.owner, renew, acquire, reply, new Set(replies.map((step) => step.epoch)));
    return reply;
  }

  /**
   * What an owner's heartbeat tells of the leases it holds: those it renewed and took are its holdings, and none
   * other; the epoch it read lets their writes go unchecked (write-held-1.lua), unless its steps read different
   * ones (a lease changed hands between them).
   */
  #held(
    owner: string,
    renew: PeriodicLeaseHeld[],
    acquire: string[],
    { renewed, acquired }: PeriodicHeartbeatReply,
    epochs: Set<string>,
  ): void {
    const kept = new Set(renew.filter((_, i) => renewed[i]).map(({ name }) => name));
    for (const [name, holding] of this.#holdings) {
      if (holding.owner === owner && !kept.has(name)) this.#holdings.delete(name);
    }
    acquired.forEach((taken, i) => {
      if (taken === null) return;
      const { fencingToken, schedule } = taken;
      const name = acquire[i];
      this.#holdings.set(name, { owner, fencingToken, last: schedule?.last ?? 0, tail: new RunTail(name) });
    });
    const [epoch] = epochs;
    if (epochs.size === 1 && epoch !== '') this.#epochs.set(owner, epoch);
    else this.#epochs.delete(owner);
  }

  /** Forgets what an owner holds: its writes are checked, and its runs recorded in their lists. */
  #forget(owner: string): void {
    this.#epochs.delete(owner);
    for (const [name, holding] of this.#holdings) if (holding.owner === owner) this.#holdings.delete(name);
  }

  async #heartbeatStep({
    member,
    renew,
    acquire,
  }: PeriodicHeartbeat): Promise<PeriodicHeartbeatReply & { epoch: string }> {
    const keys = [
      this.#fleet,
      ...renew.map(({ name }) => this.#lease(name)),
      ...acquire.map((name) => this.#lease(name)),
    ];
    const { owner, replica } = member;
    // The handlers go after the jobs' digest, a tab between: a replica of an older version reads the digest alone.
    const jobs =
      member.handlers === undefined ? member.jobs : `${member.jobs}\t${JSON.stringify(member.handlers)}`;
    // Leases this owner's latest heartbeat renewed or took, and no other: renewed unchecked while the epoch holds.
    const known = this.#epochs.get(owner);
    const held = renew.every(({ name, fencingToken }) => {
      const holding = this.#holdings.get(name);
      return holding?.owner === owner && holding.fencingToken === fencingToken;
    });
    let reply =
      known !== undefined && held && acquire.length === 0
        ? await this.#renewHeld(keys, owner, replica, jobs, this.leaseMs, known)
        : 0;
    if (reply === 0 || reply === '0') {
      const tokens = renew.map(({ fencingToken }) => fencingToken);
      const names = renew.map(({ name }) => name);
      const args = [owner, replica, jobs, this.leaseMs, renew.length, ...tokens, ...names, ...acquire];
      reply = await this.#heartbeat(keys, ...args);
    }
    const [members, renewed, acquired, paused, triggers, epoch, fleet, schedules] = Array.isArray(reply)
      ? (reply as unknown[])
      : [];
    if (!Array.isArray(members) || !Array.isArray(renewed) || !Array.isArray(acquired)) {
      throw new Error(`Redis answered ${describeValue(reply)} to a heartbeat`);
    }
    return {
      paused: typeof paused === 'string' ? (JSON.parse(paused) as string[]) : [],
      triggers: typeof triggers === 'string' && triggers !== '' ? triggers.split('\n').map(triggerOf) : [],
      members: pairs(members).map(([owner, record]) => memberOf(String(owner), String(record))),
      renewed: renewed.map((ok) => integerReply('heartbeat', ok, 1) === 1),
      acquired: acquire.map((_, i) => {
        const [token, last, next, grid] = acquired.slice(i * 4, i * 4 + 4);
        const fencingToken = integerReply('heartbeat', token);
        if (fencingToken === 0) return null;
        const schedule =
          grid === '' || grid === undefined ? null : scheduleReply('heartbeat', grid, last, next);
        return { fencingToken, schedule };
      }),
      epoch: typeof epoch === 'string' || typeof epoch === 'number' ? String(epoch) : '',
      ...(typeof fleet === 'string' && fleet !== '' ? { fleet } : {}),
      ...(schedules === undefined ? {} : { schedules: integerReply('heartbeat', schedules) }),
    };
  }

  async writeSchedules(owner: string, writes: PeriodicScheduleWrite[]): Promise<PeriodicScheduleWritten[]> {
    // The records of this turn go with the first step.
    const steps = inSteps(writes).map((step, i) =>
      this.#send(owner, step, i === 0 ? this.#takeRecords() : undefined),
    );
    return (await Promise.all(steps)).flat();
  }

  /**
   * Sends `owner`'s writes of schedules, and the records of runs: those of jobs held go to their tails (RunTail)
   * as plain commands, the others to their lists with the writes (record.lua). Resolves the writes' answers, and
   * whoever waits for the records once their commands have been answered: a tail that fails fails no claim, and
   * claims that fail fail only the records that went with them.
   */
  #send(
    owner: string | undefined,
    writes: PeriodicScheduleWrite[],
    records: Records | undefined,
  ): Promise<PeriodicScheduleWritten[]> {
    // The first script of records for the lists goes with the writes, the others on their own.
    const [lists, ...more] = records?.lists.filter((batch) => !batch.empty) ?? [];
    const answers =
      owner !== undefined
        ? this.#writeHeldStep(owner, writes, lists)
        : lists !== undefined
          ? this.#writeSchedulesStep('', [], lists)
          : Promise.resolve([]);
    if (records !== undefined) {
      const sent = [
        ...(lists === undefined ? [] : [answers]),
        ...more.map((batch) => this.#writeSchedulesStep('', [], batch)),
        ...this.#sendTails(records.tails, records.keep),
      ];
      Promise.all(sent).then(
        () => records.waiting.forEach(({ resolve }) => resolve()),
        (error: unknown) => records.waiting.forEach(({ reject }) => reject(error)),
      );
    }
    return answers;
  }

  /** The fields of the histories of the jobs held that have new records (RunTail), an HSET per owner and STEP jobs. */
  #sendTails(tails: Map<Holding, PeriodicRunEntry[]>, keep: number): Promise<unknown>[] {
    const commands = new Map<string, { jobs: number; pairs: string[] }[]>();
    for (const [{ owner, tail }, runs] of tails) {
      for (const run of runs) tail.add(run);
      const ofOwner = commands.get(owner) ?? [];
      if (ofOwner.length === 0 || ofOwner.at(-1)!.jobs === STEP) ofOwner.push({ jobs: 0, pairs: [] });
      const command = ofOwner.at(-1)!;
      command.jobs++;
      command.pairs.push(...tail.fields(keep));
      commands.set(owner, ofOwner);
    }
    return [...commands].flatMap(([owner, ofOwner]) =>
      ofOwner.map(({ pairs }) => this.#client.call!('HSET', this.#tails(owner), ...pairs)),
    );
  }

  /**
   * One owner's writes: unchecked (write-held-1.lua) while its epoch holds, for the writes of leases its latest
   * heartbeat renewed or took with that token, whose last slot does not go back from the one this coordinator
   * wrote; checked, one by one, for the others, and for all when the epoch has moved on (then until the owner's next
   * heartbeat). Records for the lists go with the checked writes.
   */
  async #writeHeldStep(
    owner: string,
    writes: PeriodicScheduleWrite[],
    lists: RecordBatch | undefined,
  ): Promise<PeriodicScheduleWritten[]> {
    const epoch = this.#epochs.get(owner);
    if (epoch === undefined) return this.#writeSchedulesStep(owner, writes, lists);
    const held: number[] = [];
    const checked: number[] = [];
    writes.forEach(({ name, fencingToken, schedule }, i) => {
      const holding = this.#holdings.get(name);
      const ok =
        holding?.owner === owner && holding.fencingToken === fencingToken && schedule.last >= holding.last;
      if (ok) holding.last = schedule.last;
      (ok ? held : checked).push(i);
    });
    const answers: PeriodicScheduleWritten[] = [];
    const answer = (indices: number[]) => (written: PeriodicScheduleWritten[]) =>
      indices.forEach((index, i) => (answers[index] = written[i]));
    const pick = (indices: number[]) => indices.map((i) => writes[i]);
    const [unchecked] = await Promise.all([
      this.#writeUnchecked(owner, epoch, pick(held)),
      checked.length === 0 && lists === undefined
        ? undefined
        : this.#writeSchedulesStep(owner, pick(checked), lists).then(answer(checked)),
    ]);
    answer(held)(unchecked ?? (await this.#writeSchedulesStep(owner, pick(held), undefined)));
    return answers;
  }

  /** Writes, unchecked (write-held-1.lua); undefined, having written nothing, when the epoch has moved on. */
  async #writeUnchecked(
    owner: string,
    epoch: string,
    writes: PeriodicScheduleWrite[],
  ): Promise<PeriodicScheduleWritten[] | undefined> {
    if (writes.length === 0) return [];
    const fields: string[] = [];
    for (const { name, fencingToken, schedule } of writes) {
      fields.push(`schedule:${name}`, `${fencingToken} ${schedule.last} ${nextField(schedule)}`);
    }
    for (const { name, fencingToken, schedule } of writes) {
      if (this.#gridChanged(name, fencingToken, schedule.grid)) fields.push(`grid:${name}`, schedule.grid);
    }
    const reply = await this.#writeHeld([this.#fleet], owner, epoch, writes.length, ...fields);
    if (Array.isArray(reply) && reply.length === writes.length) {
      return reply.map((ok, i): PeriodicScheduleWritten => {
        const { name, fencingToken, schedule } = writes[i];
        this.#grids.set(name, { fencingToken, grid: schedule.grid });
        return integerReply('writeSchedules', ok, 2) === 2 ? 'paused' : true;
      });
    }
    integerReply('writeSchedules', reply, 0);
    if (this.#epochs.get(owner) === epoch) this.#epochs.delete(owner);
    return undefined;
  }

  /** Whether a write must send the job's grid: not under a token whose grid it wrote already. */
  #gridChanged(name: string, fencingToken: number, grid: string): boolean {
    const known = this.#grids.get(name);
    return known?.fencingToken !== fencingToken || known.grid !== grid;
  }

  /** Writes checked one by one, with records for the lists (write-schedules-n.lua). */
  async #writeSchedulesStep(
    owner: string,
    writes: PeriodicScheduleWrite[],
    lists: RecordBatch | undefined,
  ): Promise<PeriodicScheduleWritten[]> {
    const fields: string[] = [];
    const values: string[] = [];
    const tokens: number[] = [];
    const lasts: number[] = [];
    const grids: (string | number)[] = [];
    for (const [i, { name, fencingToken, schedule }] of writes.entries()) {
      fields.push(`schedule:${name}`);
      values.push(`${fencingToken} ${schedule.last} ${nextField(schedule)}`);
      tokens.push(fencingToken);
      lasts.push(schedule.last);
      if (this.#gridChanged(name, fencingToken, schedule.grid))
        grids.push(i + 1, `grid:${name}`, schedule.grid);
    }
    const keys = [this.#fleet, ...(lists?.keys() ?? [])];
    const reply = await this.#writeSchedules(
      keys,
      owner,
      writes.length,
      lists === undefined ? 1 : lists.keep,
      ...fields,
      ...values,
      ...tokens,
      ...lasts,
      grids.length / 3,
      ...grids,
      ...(lists?.args() ?? [0, 0, 0, 0]),
    );
    if (!Array.isArray(reply) || reply.length !== writes.length) {
      throw new Error(`Redis answered ${describeValue(reply)} to writeSchedules`);
    }
    return reply.map((ok, i): PeriodicScheduleWritten => {
      const written = integerReply('writeSchedules', ok, 2);
      const { name, fencingToken, schedule } = writes[i];
      if (written !== 0) this.#grids.set(name, { fencingToken, grid: schedule.grid });
      return written === 2 ? 'paused' : written === 1;
    });
  }

  /**
   * Records runs with the writes of schedules of this turn, or on their own at its end. The runs of a job whose
   * lease one of this coordinator's owners holds go to the tail of its history (RunTail), where a run recorded at
   * its start is replaced by its end; the others, and all of them for a client without `call`, to the job's list
   * `<keyPrefix>\nr<name>`, where a run recorded at its start is replaced by its end's record.
   */
  recordRuns(runs: PeriodicRunEntry[], keep: number): Promise<void> {
    return new Promise((resolve, reject) => {
      // A batch holds the records of jobs that keep one number of runs: another number starts a batch of its own.
      if (this.#records !== undefined && this.#records.keep !== keep) {
        this.#send(undefined, [], this.#takeRecords()).catch(() => undefined);
      }
      if (this.#records === undefined) {
        this.#records = new Records(keep);
        queueMicrotask(() => {
          const records = this.#takeRecords();
          if (records !== undefined) this.#send(undefined, [], records).catch(() => undefined);
        });
      }
      const batch = this.#records;
      this.#keep = keep;
      batch.waiting.push({ resolve, reject });
      for (const run of runs) {
        const holding = this.#holdings.get(run.name);
        if (holding?.fencingToken === run.fencingToken && this.#client.call !== undefined) {
          const held = batch.tails.get(holding) ?? [];
          held.push(run);
          batch.tails.set(holding, held);
          continue;
        }
        const [mark, record] = listRecord(run);
        const replaces = run.reason !== null && this.#open.delete(run.id);
        if (run.reason === null) {
          this.#open.add(run.id);
          if (this.#open.size > OPEN_KEPT) this.#open.delete(this.#open.values().next().value!);
        }
        batch.list().add(run, this.#runs(run.name), record, replaces ? mark.length : undefined);
      }
    });
  }

  #takeRecords(): Records | undefined {
    const records = this.#records;
    this.#records = undefined;
    return records;
  }

  async readHistory(
    name: string,
    limit: number,
    before: number | null,
    keep = this.#keep,
  ): Promise<PeriodicRunEntry[]> {
    const reply = await this.#readHistory([this.#fleet, this.#runs(name)], name, keep);
    const [tail, segments, list] = Array.isArray(reply) ? (reply as unknown[]) : [];
    if (typeof tail !== 'string' || !Array.isArray(segments) || !Array.isArray(list)) {
      throw new Error(`Redis answered ${describeValue(reply)} to a read of the history`);
    }
    const runs = [tail, ...segments, ...list].flatMap((value) => historyOf(String(value), name).runs);
    return newestFirst(newestFirst(latest(runs), keep, null), limit, before);
  }

  /** In scripts of at most STEP / 4 jobs each, sent together. */
  async readFleet(names: string[]): Promise<PeriodicFleetRead[]> {
    const steps: string[][] = [];
    for (let i = 0; i < names.length; i += STEP / 4) steps.push(names.slice(i, i + STEP / 4));
    const replies = await Promise.all(steps.map((step) => this.#readFleetStep(step)));
    return replies.flat();
  }

  async #readFleetStep(names: string[]): Promise<PeriodicFleetRead[]> {
    const keys = [this.#fleet, ...names.flatMap((name) => [this.#lease(name), this.#runs(name)])];
    const reply = await this.#readFleet(keys, ...names);
    if (!Array.isArray(reply) || reply.length !== 1 + names.length * 12) {
      throw new Error(`Redis answered ${describeValue(reply)} to readFleet`);
    }
    const clock = integerReply('readFleet', reply[0]);
    return names.map((name, i) => {
      const [owner, ttl, token, last, next, grid, pause, ok, failed, newest, tailValue, segment] = reply
        .slice(1 + i * 12, 13 + i * 12)
        .map((value: unknown) => (typeof value === 'number' || Array.isArray(value) ? value : String(value)));
      const text = (value: unknown) => String(value);
      const held = owner !== '' && Number(ttl) > 0 && token !== '';
      const tail = historyOf(text(tailValue), name);
      // The list's two newest elements: the end of a run can come before the start that a hand-over moved there.
      const elements = Array.isArray(newest) ? (newest as unknown[]) : [];
      const runs = [...elements, segment].flatMap((value) => historyOf(text(value), name).runs);
      const [lastRun = null] = newestFirst(latest([...runs, ...tail.runs]), 1, null);
      // The last success: the tail's holding's, or the one before it that `ok` tells; with the failures since.
      const listOk = ok === '' ? 0 : integerReply('readFleet', ok);
      const succeeded = Math.max(tail.okAt, listOk);
      const [count, since = ''] = text(failed).split(' ');
      const listFailing =
        failed !== '' && since === (succeeded === 0 ? '' : String(succeeded)) && lastRun?.reason !== 'normal';
      return {
        name,
        holder: held
          ? {
              owner: text(owner),
              fencingToken: integerReply('readFleet', token),
              until: clock + integerReply('readFleet', ttl),
            }
          : null,
        pause: pause === '' ? null : operationOf(text(pause)),
        schedule: grid === '' ? null : scheduleReply('readFleet', grid, last, next),
        lastRun,
        lastSucceededAt: succeeded === 0 ? null : succeeded,
        consecutiveFailures:
          // A holding without a success failed after the success before it.
          (tail.okAt === 0 || tail.okAt === succeeded ? tail.failures : 0) +
          (listFailing ? integerReply('readFleet', count) : 0),
      };
    });
  }

  async requestTrigger(request: PeriodicTriggerRequest): Promise<void> {
    const { id, ...rest } = request;
    const json = `{"id":${JSON.stringify(id)},${JSON.stringify({ v: RECORD_VERSION, ...rest }).slice(1)}`;
    await this.#requestTrigger([this.#fleet], request.name, json);
  }

  async readTrigger(name: string, id: string, withdraw: boolean): Promise<PeriodicTriggerState> {
    const mark = `{"id":${JSON.stringify(id)}`;
    const reply = await this.#readTrigger([this.#fleet], name, id, mark, withdraw ? 1 : 0);
    const [state, answer] = Array.isArray(reply) ? (reply as unknown[]) : [];
    if (state === 'answer' && typeof answer === 'string') return triggerAnswerOf(answer);
    if (state === 'pending' || state === 'taken' || state === 'withdrawn') return state;
    throw new Error(`Redis answered ${describeValue(reply)} to readTrigger`);
  }

  async answerTrigger(_name: string, id: string, answer: PeriodicTriggerAnswer): Promise<void> {
    await this.#setField([this.#fleet], `answer:${id}`, JSON.stringify({ v: RECORD_VERSION, ...answer }));
  }

  async operate(name: string, operation: PeriodicOperation, keep: number): Promise<void> {
    const record = JSON.stringify({ v: RECORD_VERSION, ...operation });
    await this.#operate([this.#fleet], name, operation.action, record, keep);
  }

  async openIncident(
    incident: PeriodicIncidentRecord,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<boolean> {
    const { name, kind, since, detail } = incident;
    const record = JSON.stringify({ v: RECORD_VERSION, ...operation });
    const opened = await this.#openIncident(
      [this.#fleet],
      name,
      kind,
      JSON.stringify({ since, detail }),
      record,
      keep,
    );
    return opened === 1;
  }

  async closeIncident(
    name: string,
    kind: PeriodicIncidentKind,
    operation: PeriodicOperation,
    keep: number,
  ): Promise<PeriodicIncidentRecord | null> {
    const record = JSON.stringify({ v: RECORD_VERSION, ...operation });
    const closed = await this.#closeIncident([this.#fleet], name, kind, record, keep);
    return typeof closed === 'string' ? incidentOf(name, kind, closed) : null;
  }

  async readIncidents(limit: number): Promise<PeriodicIncidentRecord[]> {
    const reply = await this.#readIncidents([this.#fleet], limit);
    if (!Array.isArray(reply)) throw new Error(`Redis answered ${describeValue(reply)} to readIncidents`);
    const incidents: PeriodicIncidentRecord[] = [];
    for (let i = 0; i + 1 < reply.length; i += 2) {
      const open = JSON.parse(String(reply[i + 1])) as Record<string, string>;
      for (const [kind, json] of Object.entries(open)) {
        incidents.push(incidentOf(String(reply[i]), kind as PeriodicIncidentKind, json));
      }
    }
    return incidents.sort((a, b) => byUtf8(a.name, b.name));
  }

  async readPause(name: string): Promise<PeriodicOperation | null> {
    const [record] = await this.#hmget(`pause:${name}`);
    return typeof record === 'string' ? operationOf(record) : null;
  }

  async readAudit(name: string, limit: number): Promise<PeriodicOperation[]> {
    const [trail] = await this.#hmget(`audit:${name}`);
    if (typeof trail !== 'string') return [];
    return trail
      .split('\n')
      .filter((line) => line !== '')
      .slice(0, limit)
      .map(operationOf);
  }

  async writeStored(
    writes: PeriodicStoredWrite[],
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer[]> {
    const audit = (action: PeriodicOperation['action']) =>
      JSON.stringify({ v: RECORD_VERSION, action, ...operation });
    const answers: PeriodicStoredAnswer[] = [];
    // In steps of STEP writes: a script of tens of thousands would hold Redis up.
    for (let i = 0; i < writes.length; i += STEP) {
      const step = writes.slice(i, i + STEP);
      const reply = await this.#writeStored(
        this.#storedKeys(),
        keep,
        JSON.stringify(operation.by),
        operation.at,
        audit('create'),
        audit('update'),
        this.#channel(),
        ...step.flatMap(({ name, handler, definition, ifVersion }) => [
          name,
          handler,
          definition,
          ifVersion === undefined ? '' : ifVersion,
        ]),
      );
      if (!Array.isArray(reply) || reply.length !== step.length) {
        throw new Error(`Redis answered ${describeValue(reply)} to writeStored`);
      }
      step.forEach(({ name }, j) => answers.push(storedAnswer(name, String(reply[j]))));
    }
    return answers;
  }

  async removeStored(
    name: string,
    ifVersion: number | undefined,
    operation: Omit<PeriodicOperation, 'action'>,
    keep: number,
  ): Promise<PeriodicStoredAnswer> {
    const record = JSON.stringify({ v: RECORD_VERSION, action: 'remove', ...operation });
    const args = [name, ifVersion === undefined ? '' : ifVersion, keep, record, this.#channel()];
    const reply = String(await this.#removeStored(this.#storedKeys(), ...args));
    if (reply === 'removed' || reply === 'absent')
      return { ok: true, record: null, removed: reply === 'removed' };
    return storedAnswer(name, reply);
  }

  async readStored(name: string): Promise<PeriodicStoredRecord | null> {
    const [record] = (await this.#readFields([keyOf(this.keyPrefix, 'stored')], name)) as unknown[];
    return typeof record === 'string' ? storedRecordOf(name, record) : null;
  }

  async listStored({
    handler,
    prefix = '',
    after,
    limit,
  }: PeriodicStoredQuery): Promise<PeriodicStoredRecord[]> {
    // A handler's names are `<handler>\0<name>` in a set of their own; a name never has a U+0000.
    const [key, start] =
      handler === undefined
        ? [keyOf(this.keyPrefix, 'names'), '']
        : [keyOf(this.keyPrefix, 'handlers'), `${handler}\0`];
    const base = start + prefix;
    const from =
      after !== undefined && Buffer.compare(Buffer.from(start + after), Buffer.from(base)) >= 0
        ? `(${start}${after}`
        : `[${base}`;
    const reply = await this.#listStored([key, keyOf(this.keyPrefix, 'stored')], from, base, limit);
    if (!Array.isArray(reply)) throw new Error(`Redis answered ${describeValue(reply)} to listStored`);
    return pairs(reply).flatMap(([name, record]) =>
      typeof record === 'string' && record !== '' ? [storedRecordOf(String(name), record)] : [],
    );
  }

  async readStoredChanges(since: number, limit: number): Promise<PeriodicStoredChanges> {
    const keys = [this.#fleet, keyOf(this.keyPrefix, 'changes'), keyOf(this.keyPrefix, 'stored')];
    const reply = await this.#readStoredChanges(keys, since, limit);
    const [count, complete, changes] = Array.isArray(reply) ? (reply as unknown[]) : [];
    if (!Array.isArray(changes))
      throw new Error(`Redis answered ${describeValue(reply)} to readStoredChanges`);
    const records: PeriodicStoredRecord[] = [];
    const removed: string[] = [];
    let change = Math.max(since, integerReply('readStoredChanges', count));
    for (let i = 0; i < changes.length; i += 3) {
      const name = String(changes[i]);
      const record = String(changes[i + 2]);
      change = integerReply('readStoredChanges', changes[i + 1]);
      if (record === '') removed.push(name);
      else records.push(storedRecordOf(name, record));
    }
    return { records, removed, change, complete: integerReply('readStoredChanges', complete, 1) === 1 };
  }

  /**
   * Calls `listener` when any replica changes a stored schedule, from a connection of its own (`duplicate()` of
   * the client) subscribed to the coordinator's channel; nothing without `duplicate()`.
   */
  watchStored(listener: () => void): () => void {
    const subscriber = this.#client.duplicate?.();
    if (subscriber === undefined) return () => undefined;
    // A connection that fails leaves the replicas to their heartbeats, which read the count of changes.
    subscriber.on('error', () => undefined);
    subscriber.on('message', () => listener());
    subscriber.subscribe(this.#channel()).catch(() => undefined);
    return () => subscriber.disconnect();
  }

  /** The keys of the scripts that change stored schedules (write-stored-5.lua). */
  #storedKeys(): string[] {
    return [
      this.#fleet,
      keyOf(this.keyPrefix, 'stored'),
      keyOf(this.keyPrefix, 'changes'),
      keyOf(this.keyPrefix, 'names'),
      keyOf(this.keyPrefix, 'handlers'),
    ];
  }

  #channel(): string {
    return keyOf(this.keyPrefix, 'channel');
  }

  /** Fields of the hash, as read-fields-1.lua reads them. */
  async #hmget(...fields: string[]): Promise<unknown[]> {
    const reply = await this.#readFields([this.#fleet], ...fields);
    if (!Array.isArray(reply)) throw new Error(`Redis answered ${describeValue(reply)} to HMGET`);
    return reply;
  }

  async releaseAll(owner: string, leases: PeriodicLeaseHeld[], leave: boolean): Promise<void> {
    // The member leaves with the last step, once its leases are free. The runs of a job given up that are
    // recorded from now on (a run that ended after its lease was lost) go to the job's list.
    for (const { name } of leases) {
      this.#grids.delete(name);
      if (this.#holdings.get(name)?.owner === owner) this.#holdings.delete(name);
    }
    if (leave) this.#forget(owner);
    const steps = inSteps(leases);
    for (const [i, step] of steps.entries()) {
      const keys = [this.#fleet, ...step.map(({ name }) => this.#lease(name))];
      const args = step.flatMap(({ name, fencingToken }) => [name, fencingToken]);
      const last = i === steps.length - 1;
      await this.#releaseAll(keys, owner, leave && last ? 1 : 0, ...args);
    }
  }

  /** The key of the tails of the histories of the jobs `owner` holds, a hash (RunTail). */
  #tails(owner: string): string {
    return keyOf(this.keyPrefix, 'tails', owner);
  }

  /** The key of the history of job `name`, a list. */
  #runs(name: string): string {
    return keyOf(this.keyPrefix, 'runs', name);
  }

  /** The key of the lease of job `name`. */
  #lease(name: string): string {
    return keyOf(this.keyPrefix, 'lease', name);
  }

  /**
   * A script run by its SHA1 (`EVALSHA`), sent whole (`EVAL`) when Redis does not have it yet, with its keys (as
   * many as its file's name says: lua/) and its arguments.
   */
  #script(script: LuaScript): (keys: string[], ...args: (string | number)[]) => Promise<unknown> {
    const source = luaSource(script);
    const sha1 = createHash('sha1').update(source).digest('hex');
    return async (keys, ...args) => {
      if (script.keys !== 'n' && keys.length !== script.keys) {
        throw new Error(
          `A script of RedisCoordinator takes ${script.keys} keys; it was given ${keys.length}`,
        );
      }
      try {
        return await this.#client.evalsha(sha1, keys.length, ...keys, ...args);
      } catch (error) {
        if (!isError(error) || !error.message.startsWith('NOSCRIPT')) throw error;
        return await this.#client.eval(source, keys.length, ...keys, ...args);
      }
    };
  }
}

/** `items` in steps of at most STEP; one empty step for none. */
function inSteps<T>(items: T[]): T[][] {
  const steps: T[][] = [];
  for (let i = 0; i < items.length; i += STEP) steps.push(items.slice(i, i + STEP));
  return steps.length === 0 ? [[]] : steps;
}

/** A flat list of pairs, as Redis answers a hash: [[key, value], …]. */
function pairs(flat: unknown[]): [unknown, unknown][] {
  const result: [unknown, unknown][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) result.push([flat[i], flat[i + 1]]);
  return result;
}

/** A member of the fleet as its record in the hash has it: name, jobs' digest and, from newer replicas, handlers. */
function memberOf(owner: string, record: string): PeriodicFleetMember {
  const [replica = '', jobs = '', handlers] = record.split('\t');
  const member: PeriodicFleetMember = { owner, replica, jobs };
  if (handlers !== undefined) {
    try {
      const parsed = JSON.parse(handlers) as unknown;
      if (Array.isArray(parsed)) member.handlers = parsed.map(String);
    } catch {
      // A record this version cannot read names no handler.
    }
  }
  return member;
}

/** A stored schedule's record as the hash keeps it (lua/include/stored.lua). */
function storedRecordOf(name: string, record: string): PeriodicStoredRecord {
  const fields = record.split('\t');
  const [version, createdAt, updatedAt, change, handler = '', by = 'null'] = fields;
  const definition = fields.slice(6).join('\t');
  const who = JSON.parse(by) as unknown;
  return {
    name,
    handler,
    definition,
    version: integerReply('a stored schedule', version),
    createdAt: integerReply('a stored schedule', createdAt),
    updatedAt: integerReply('a stored schedule', updatedAt),
    updatedBy: typeof who === 'string' ? who : null,
    change: integerReply('a stored schedule', change),
  };
}

/** What write-stored-5.lua or remove-stored-5.lua answered for one schedule. */
function storedAnswer(name: string, reply: string): PeriodicStoredAnswer {
  if (reply.startsWith('conflict\t')) {
    const version = reply.slice('conflict\t'.length);
    return { ok: false, currentVersion: version === '' ? null : integerReply('writeStored', version) };
  }
  const tab = reply.indexOf('\t');
  return {
    ok: true,
    record: storedRecordOf(name, reply.slice(tab + 1)),
    created: reply.slice(0, tab) === 'created',
  };
}

/**
 * What a job's schedule field holds after its last slot, which the scripts read and keep as one piece: the next
 * slot; then, where the holder writes them, the count of slots claimed (`maxRuns`; `-` for none) and a backfill
 * under way, its next slot and its end: `<next>`, `<next> <runs>` or `<next> <runs> <backfill next> <backfill to>`.
 */
function nextField({ next, runs, backfill }: PeriodicFleetSchedule): string {
  if (backfill !== undefined) return `${next} ${runs ?? '-'} ${backfill.next} ${backfill.to}`;
  return runs === undefined ? String(next) : `${next} ${runs}`;
}

/** A job's schedule from a script's answer: its grid, last slot, and the rest of its field ({@link nextField}). */
function scheduleReply(step: string, grid: unknown, last: unknown, next: unknown): PeriodicFleetSchedule {
  const [slot, runs, backfillNext, backfillTo] = String(next).split(' ');
  const schedule: PeriodicFleetSchedule = {
    grid: String(grid),
    last: integerReply(step, last),
    next: integerReply(step, slot),
  };
  if (runs !== undefined && runs !== '-') schedule.runs = integerReply(step, runs);
  if (backfillNext !== undefined) {
    schedule.backfill = { next: integerReply(step, backfillNext), to: integerReply(step, backfillTo) };
  }
  return schedule;
}
