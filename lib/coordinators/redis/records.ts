import type { PeriodicRunEntry } from '../../scheduler/coordinator-port.js';
import { countOutcome, outcomeOf, type SlotStreak } from '../../scheduler/history.js';
import { RUN_ARRAY_VERSION, RUN_FIELDS } from '../replies.js';
import type { RunTail } from './tail.js';

/** How many jobs one script of a batched step handles at most. */
export const STEP = 2000;

/** A lease one of the coordinator's owners holds, as its heartbeat renewed or took it, and its job's tail. */
export interface Holding {
  owner: string;
  fencingToken: number;
  /** The last slot of the job's schedule, as the lease was taken with it or this coordinator last wrote it. */
  last: number;
  tail: RunTail;
}

/** Records of runs of jobs that keep `keep` runs to send, and those waiting for their answer. */
export class Records {
  readonly waiting: { resolve: () => void; reject: (error: unknown) => void }[] = [];
  /** The runs of jobs held, for their tails, in the order they were recorded. */
  readonly tails = new Map<Holding, PeriodicRunEntry[]>();
  /** The others, for the lists: a script for each STEP records, in order. */
  readonly lists: RecordBatch[];

  constructor(readonly keep: number) {
    this.lists = [new RecordBatch(keep)];
  }

  /** The batch that takes the next record for a list. */
  list(): RecordBatch {
    if (this.lists.at(-1)!.size >= STEP) this.lists.push(new RecordBatch(this.keep));
    return this.lists.at(-1)!;
  }
}

/** Records of runs to send to their lists in one script, in the sections of record.lua (lua/include/). */
export class RecordBatch {
  /** @param keep how many runs the lists keep. */
  constructor(readonly keep: number) {}

  /** The lists of the records that replace a start, then those of the new records: the script's KEYS. */
  readonly #lists: { replacing: string[]; fresh: string[] } = { replacing: [], fresh: [] };
  /** Per record that replaces a start, the record and how long its mark is; and the new records. */
  readonly #records: { replacing: (string | number)[]; fresh: string[] } = { replacing: [], fresh: [] };
  /** The runs that started in this batch: where their start is among the new records. */
  readonly #started = new Map<string, number>();
  /** Per job whose runs ended: when the last success ended (null if none did), and the failures since. */
  readonly #outcomes = new Map<string, SlotStreak>();

  /**
   * The record of `run` for its job's `list`; `mark`, how long its start is, when it replaces the run's start:
   * a start in this batch is replaced here, before it is sent.
   */
  add(run: PeriodicRunEntry, list: string, record: string, mark: number | undefined): void {
    const started = this.#started.get(run.id);
    if (mark !== undefined && started !== undefined) this.#records.fresh[started] = record;
    else if (mark !== undefined) {
      this.#lists.replacing.push(list);
      this.#records.replacing.push(record, mark);
    } else {
      if (run.reason === null) this.#started.set(run.id, this.#records.fresh.length);
      this.#lists.fresh.push(list);
      this.#records.fresh.push(record);
    }
    const outcome = outcomeOf(run);
    if (outcome === null) return;
    let streak = this.#outcomes.get(run.name);
    if (streak === undefined) {
      streak = { lastSucceededAt: null, consecutiveFailures: 0 };
      this.#outcomes.set(run.name, streak);
    }
    countOutcome(streak, outcome, run.finishedAt ?? 0);
  }

  get empty(): boolean {
    return this.#outcomes.size === 0 && this.size === 0;
  }

  /** How many records it holds. */
  get size(): number {
    return this.#lists.replacing.length + this.#lists.fresh.length;
  }

  keys(): string[] {
    return [...this.#lists.replacing, ...this.#lists.fresh];
  }

  args(): (string | number)[] {
    const failing: (string | number)[] = [];
    const succeeded: (string | number)[] = [];
    for (const [name, { lastSucceededAt: ok, consecutiveFailures: failures }] of this.#outcomes) {
      if (failures > 0) failing.push(name, failures, ok ?? '');
      if (ok !== null) succeeded.push(`ok:${name}`, ok);
    }
    const { replacing, fresh } = this.#records;
    const counts = [replacing.length / 2, fresh.length, failing.length / 3, succeeded.length / 2];
    return [...counts, ...replacing, ...fresh, ...failing, ...succeeded];
  }
}

/**
 * A run's record in its job's history list, and its mark (the start that names the run): a JSON array of the
 * fields of RUN_FIELDS after RUN_ARRAY_VERSION (about half the bytes of an object, and so of the list's memory
 * and of Redis's work per run); the job's name is the list's.
 */
export function listRecord(run: PeriodicRunEntry): [mark: string, record: string] {
  const mark = `[${RUN_ARRAY_VERSION},${JSON.stringify(run.id)}`;
  const fields = JSON.stringify(RUN_FIELDS.slice(1, -1).map((field) => run[field])).slice(1, -1);
  const { error } = run;
  return [
    mark,
    `${mark},${fields}${error === null ? '' : `,${JSON.stringify([error.name, error.message])}`}]`,
  ];
}

/** Each run once, by id: its end where both its start and its end were read (from its tail and its list). */
export function latest(runs: PeriodicRunEntry[]): PeriodicRunEntry[] {
  const byId = new Map<string, PeriodicRunEntry>();
  for (const run of runs) {
    const known = byId.get(run.id);
    if (known === undefined || (known.reason === null && run.reason !== null)) byId.set(run.id, run);
  }
  return [...byId.values()];
}
