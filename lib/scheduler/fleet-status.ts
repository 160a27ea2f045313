// What the fleet knows of a job (docs/operations.md, "Fleet status"): read from the store by any replica, or, for what the store could not
// answer, what this replica knows.
import type { PeriodicFleetRead, PeriodicOperation, PeriodicRunEntry } from './coordinator-port.js';
import type { StoreLog } from './store-log.js';
import { type PeriodicRunRecord, runRecord } from './history.js';
import type { Replica } from './replica.js';
import type { PeriodicIncidentKind } from './events.js';

/** An open incident of a job, as `fleetStatus().incidents` shows it (docs/alerts.md). */
export interface PeriodicIncident {
  kind: PeriodicIncidentKind;
  /** When it opened. */
  since: Date;
  detail: string;
}

/** An exclusive job as the fleet sees it: `registry.fleetStatus(name)`. */
export interface PeriodicFleetStatus {
  name: string;
  /** Who runs the job now. */
  holder: { replica: string; fencingToken: number; until: Date } | null;
  paused: { by: string | null; note: string | null; at: Date } | null;
  /** The last slot the fleet handled (its run started, or its guard said no). */
  lastSlot: Date | null;
  nextSlot: Date | null;
  lastRun: PeriodicRunRecord | null;
  lastSucceededAt: Date | null;
  /** Across the fleet, whichever replica ran them. */
  consecutiveFailures: number;
  /** The store, as this replica sees it. */
  store: { reachable: boolean; since: Date; lastError: string | null };
  /**
   * The job's open incidents, oldest first (docs/alerts.md): the fleet's as this replica's last heartbeat read
   * them and its own steps since, and those this replica opened on its own.
   */
  incidents: PeriodicIncident[];
  /**
   * A stored schedule that no live replica can run, as none has its `@PeriodicHandler()`: the replicas of the
   * fleet (a rolling deploy not done yet, say). Absent otherwise.
   */
  handlerMissing?: string[];
}

/** What this replica knows of a job, for what the store does not tell. */
export interface LocalView {
  name: string;
  holder: { replica: string; fencingToken: number; until: number } | null;
  pause: PeriodicOperation | null;
  lastRun: PeriodicRunEntry | null;
  lastSucceededAt: number | null;
  consecutiveFailures: number;
  incidents: PeriodicIncident[];
}

/** The replica that holds a lease, from its session (`<replica>/<id>`). */
export function replicaOf(owner: string): string {
  const slash = owner.lastIndexOf('/');
  return slash < 0 ? owner : owner.slice(0, slash);
}

const dateOf = (ms: number | null): Date | null => (ms === null || ms === 0 ? null : new Date(ms));

/**
 * A job's fleet status: from the store's `read`, or from `local` when the store did not answer (`read`
 * undefined: the fields only the store knows are null), with the store's reachability as `log` saw it.
 */
export function fleetStatusOf(
  local: LocalView,
  read: PeriodicFleetRead | undefined,
  log: StoreLog | undefined,
): PeriodicFleetStatus {
  const holder =
    read === undefined
      ? local.holder
      : read.holder && { ...read.holder, replica: replicaOf(read.holder.owner) };
  const pause = read === undefined ? local.pause : read.pause;
  const lastRun = read === undefined ? local.lastRun : read.lastRun;
  return {
    name: local.name,
    holder: holder && {
      replica: holder.replica,
      fencingToken: holder.fencingToken,
      until: new Date(holder.until),
    },
    paused: pause && { by: pause.by, note: pause.note, at: new Date(pause.at) },
    lastSlot: dateOf(read?.schedule?.last ?? null),
    nextSlot: dateOf(read?.schedule?.next ?? null),
    lastRun: lastRun === null ? null : runRecord(lastRun),
    lastSucceededAt: dateOf(read === undefined ? local.lastSucceededAt : read.lastSucceededAt),
    consecutiveFailures: read === undefined ? local.consecutiveFailures : read.consecutiveFailures,
    store:
      log === undefined
        ? { reachable: true, since: new Date(START), lastError: null }
        : { reachable: log.reachable, since: new Date(log.since), lastError: log.lastError },
    incidents: local.incidents,
  };
}

/** A job whose fleet status is read: what the reads below need of its scheduler. */
export interface FleetViewed {
  readonly name: string;
  /** The replica whose store tells the fleet's state of the job, if one does. */
  readonly fleetReplica: Replica | undefined;
  /** The job's fleet status from what the store answered of it, or undefined if it did not. */
  fleetStatusFrom(read: PeriodicFleetRead | undefined): PeriodicFleetStatus;
}

/**
 * What the fleet's store knows of those of `jobs` that it tells of, in one read for them all (all the exclusive
 * jobs of an application share their replica), by name; undefined when none has a store that tells, or the store
 * did not answer within `leaseMs / 3`. With `flush`, this replica's records are sent first.
 */
export async function readFleet(
  jobs: readonly FleetViewed[],
  { flush = false } = {},
): Promise<Map<string, PeriodicFleetRead> | undefined> {
  const told = jobs.filter((job) => job.fleetReplica !== undefined);
  const replica = told[0]?.fleetReplica;
  if (replica === undefined) return undefined;
  // This replica's records waiting for a step of claims go first (and reach a store of one connection first).
  if (flush) void replica.records.flush();
  const reads = await replica.calls.readFleet(told.map((job) => job.name)).catch(() => undefined);
  return reads && new Map(reads.map((read) => [read.name, read]));
}

/** The fleet status of each of `jobs`, in order: one read of the store for them all. */
export async function fleetStatusAll(jobs: readonly FleetViewed[]): Promise<PeriodicFleetStatus[]> {
  const read = await readFleet(jobs, { flush: true });
  return jobs.map((job) => job.fleetStatusFrom(read?.get(job.name)));
}

/** When this process loaded the package: since when a job without a store has had none to reach. */
const START = Date.now();
