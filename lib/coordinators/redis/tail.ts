import { describeValue } from '../../scheduler/errors.js';
import { countOutcome, outcomeOf, type SlotStreak } from '../../scheduler/history.js';
import type { PeriodicRunEntry } from '../../scheduler/coordinator-port.js';
import { runOf } from '../replies.js';

/** How many ended runs a tail holds before they go to a segment of their own. */
export const SEGMENT = 8;

/**
 * The latest runs of a job on Redis, as the replica that holds its lease records them, in the hash
 * `<keyPrefix>\nt<owner>`, which only that owner writes (others only delete from it, as they take its jobs):
 * the tail of the job's history, the field `t:<name>`; and once the tail holds SEGMENT ended runs, they go to a
 * segment, in a ring of `slots` fields `s<i>:<name>` written over the oldest, enough for the latest `keep` runs. A replica that takes the lease moves the tail and
 * the segments of the holder before to the end of the job's list (lua/include/hand-over.lua), and a reader takes the latest
 * holder's with the list.
 *
 * A tail is `<okAt> <failures> <segments> <slots>`, a line of what its runs share, then a run per line: `okAt` is
 * when the job's last success in this holding ended (0 before one), `failures` the slots that failed since (or
 * since the holding began), `segments` how many it has filled (the latest is in field `(segments - 1) % slots`). A
 * segment is `S`, the line of what its runs share, then a run per line. A run is kept in a few bytes (`compact`):
 * a tail is rewritten whole with each step of records, and Redis's work grows with its length.
 *
 * Since nobody else writes a field of the hash, the holder sends its fields as they are, in one HSET per step with no script
 * and no check: a run costs Redis about a field of a hash of its owner's jobs (docs/replicas.md, "What it
 * costs"), where an append to a list of the job's cost several times as much.
 */
export class RunTail {
  /** The tail's runs, in the order they were first recorded. */
  #runs: PeriodicRunEntry[] = [];
  /** Of the tail's runs not ended yet: where in `#runs` their start is. */
  readonly #open = new Map<string, number>();
  /** The last success of this holding (none: 0), and the slots that failed since. */
  readonly #streak: SlotStreak = { lastSucceededAt: 0, consecutiveFailures: 0 };
  #segments = 0;

  constructor(readonly name: string) {}

  /** Records a run, in the order its job's runs are recorded: its end replaces its start. */
  add(run: PeriodicRunEntry): void {
    const at = this.#open.get(run.id);
    if (at !== undefined) this.#runs[at] = run;
    else if (run.reason === null) this.#open.set(run.id, this.#runs.push(run) - 1);
    else this.#runs.push(run);
    if (run.reason !== null) this.#open.delete(run.id);
    countOutcome(this.#streak, outcomeOf(run), run.finishedAt ?? 0);
  }

  /**
   * The fields and values (flat, as HSET takes them) that record the runs added since: the tail, and a segment
   * when it holds SEGMENT ended runs (the runs still in flight stay in the tail). `keep` is how many runs the
   * segments hold at least.
   */
  fields(keep: number): string[] {
    const slots = Math.ceil(keep / SEGMENT) + 1;
    const fields: string[] = [];
    if (this.#runs.length - this.#open.size >= SEGMENT) {
      const ended = this.#runs.filter((run) => run.reason !== null);
      fields.push(`s${this.#segments++ % slots}:${this.name}`, encode('S', ended));
      this.#runs = this.#runs.filter((run) => run.reason === null);
      this.#open.clear();
      this.#runs.forEach((run, i) => this.#open.set(run.id, i));
    }
    const { lastSucceededAt, consecutiveFailures } = this.#streak;
    const head = `${lastSucceededAt} ${consecutiveFailures} ${this.#segments} ${slots}`;
    fields.push(`t:${this.name}`, encode(head, this.#runs));
    return fields;
  }
}

/** The first line, then what the runs share (replica, fencing token, id prefix), then a run per line. */
function encode(first: string, runs: PeriodicRunEntry[]): string {
  if (runs.length === 0) return first;
  const { replica, fencingToken, id } = runs[0];
  const prefix = id.slice(0, id.lastIndexOf('#') + 1);
  const shared = { replica, fencingToken, prefix };
  return [
    first,
    JSON.stringify([replica, fencingToken, prefix]),
    ...runs.map((run) => compact(run, shared)),
  ].join('\n');
}

interface Shared {
  replica: string;
  fencingToken: number | null;
  prefix: string;
}

/**
 * A run in a few bytes, as a JSON array: its id's count after the shared prefix (or the whole id), jobId, slot,
 * start (ms after its slot), end (ms after its start), reason, duration, then its error, origin and attempt
 * where they are not the usual ones (none, `'schedule'`, 1); with a replica and token other than the shared ones
 * last. `[12,12,1733000000000,2,3,"normal",3.25]` against about 120 bytes for the same run as a list keeps it.
 */
function compact(run: PeriodicRunEntry, shared: Shared): string {
  const { id, slot, startedAt, finishedAt, error } = run;
  const count = id.slice(shared.prefix.length);
  const values: unknown[] = [
    shared.prefix !== '' && id.startsWith(shared.prefix) && /^[1-9]\d{0,15}$/.test(count)
      ? Number(count)
      : id,
    run.jobId,
    slot,
    startedAt - (slot ?? 0),
    finishedAt === null ? null : finishedAt - startedAt,
    run.reason,
    run.durationMs,
  ];
  // Error, origin and attempt, left out at the end where they are the usual ones.
  const usual: unknown[] = [
    error === null ? 0 : [error.name, error.message],
    run.origin === 'schedule' ? 0 : run.origin,
    run.attempt === 1 ? 0 : run.attempt,
  ];
  if (run.replica !== shared.replica || run.fencingToken !== shared.fencingToken) {
    usual.push(run.replica, run.fencingToken);
  }
  while (usual.at(-1) === 0) usual.pop();
  return JSON.stringify([...values, ...usual]);
}

/** A run from its compact array (`compact`); read as leniently as a run the list keeps. */
function expand(values: unknown[], shared: Shared, name: string): PeriodicRunEntry {
  const [count, jobId, slot, start, end, reason, durationMs, error, origin, attempt, replica, token] = values;
  const number = (value: unknown) => (typeof value === 'number' ? value : null);
  const startedAt = (number(slot) ?? 0) + (number(start) ?? 0);
  return runOf(
    JSON.stringify({
      id: typeof count === 'number' ? `${shared.prefix}${count}` : count,
      name,
      jobId,
      replica: replica ?? shared.replica,
      fencingToken: token === undefined ? shared.fencingToken : token,
      slot,
      origin: origin === undefined || origin === 0 ? 'schedule' : origin,
      attempt: attempt === undefined || attempt === 0 ? 1 : attempt,
      startedAt,
      finishedAt: number(end) === null ? null : startedAt + number(end)!,
      reason,
      durationMs,
      error: Array.isArray(error) ? { name: error[0], message: error[1] } : null,
    }),
  );
}

/**
 * The runs of job `name` that a tail, a segment or an element of its list holds, and for a tail, the success and
 * failures of its holding; nothing for none (''). Read leniently, as another version of the package may write
 * during a rolling deploy: what is not a run, a value or a line of one is skipped.
 */
export function historyOf(
  value: string,
  name: string,
): { runs: PeriodicRunEntry[]; okAt: number; failures: number } {
  // A job without runs yet: read at once, as a replica that takes 100,000 leases reads as many histories.
  if (value === '') return { runs: [], okAt: 0, failures: 0 };
  // An element of a list, of a run on its own, as lua/include/record.lua appends it.
  if (value.startsWith('[') || value.startsWith('{')) {
    return { runs: readable([value], (line) => runOf(line, name)), okAt: 0, failures: 0 };
  }
  const [first, header = '', ...lines] = value.split('\n');
  const [okAt, failures] = first === 'S' ? [0, 0] : first.split(' ').map(Number);
  const [parsed] = readable([header], (line) => JSON.parse(line) as unknown);
  const [replica, fencingToken, prefix] = Array.isArray(parsed) ? (parsed as unknown[]) : [];
  const shared = {
    replica: typeof replica === 'string' ? replica : 'unknown',
    fencingToken: typeof fencingToken === 'number' ? fencingToken : null,
    prefix: typeof prefix === 'string' ? prefix : '',
  };
  const runs = readable(lines, (line) => {
    const values = JSON.parse(line) as unknown;
    if (!Array.isArray(values)) throw new Error(`${describeValue(line)} is not a run`);
    return expand(values, shared, name);
  });
  const count = (n: number | undefined) => (Number.isSafeInteger(n) && n! > 0 ? n! : 0);
  return { runs, okAt: count(okAt), failures: count(failures) };
}

/** What `read` makes of each line it can read; the others are skipped. */
function readable<T>(lines: string[], read: (line: string) => T): T[] {
  return lines.flatMap((line) => {
    try {
      return [read(line)];
    } catch {
      return [];
    }
  });
}
