// The scheduler's checks of what a coordinator answers: a reply of the wrong shape is a failure of the store,
// never a lease, a run or a pause.
import type {
  PeriodicAuditSteps,
  PeriodicFleetRead,
  PeriodicFleetSchedule,
  PeriodicHeartbeat,
  PeriodicHeartbeatReply,
  PeriodicFleetSteps,
  PeriodicHistorySteps,
  PeriodicIncidentRecord,
  PeriodicIncidentSteps,
  PeriodicLeaseSteps,
  PeriodicOperation,
  PeriodicRunEntry,
  PeriodicScheduleSteps,
  PeriodicStoredAnswer,
  PeriodicStoredChanges,
  PeriodicStoredRecord,
  PeriodicTriggerAnswer,
  PeriodicTriggerRequest,
  PeriodicTriggerSteps,
} from './coordinator-port.js';
import { describeValue } from './errors.js';
import { EXIT_REASONS } from './events.js';
import { RUN_ORIGINS } from './history.js';

/** The steps of each of a coordinator's capabilities: it has one when it has every step of it. */
const CAPABILITIES = {
  leases: ['acquire', 'renew', 'release', 'readSchedule', 'writeSchedule'],
  fleet: ['heartbeat', 'writeSchedules', 'releaseAll'],
  audit: ['operate', 'readPause', 'readAudit'],
  history: ['recordRuns', 'readHistory', 'readFleet'],
  trigger: ['requestTrigger', 'readTrigger', 'answerTrigger'],
  schedules: ['writeStored', 'removeStored', 'readStored', 'listStored', 'readStoredChanges'],
  incidents: ['openIncident', 'closeIncident', 'readIncidents'],
} as const satisfies {
  leases: readonly (keyof PeriodicLeaseSteps)[];
  fleet: readonly (keyof PeriodicFleetSteps)[];
  audit: readonly (keyof PeriodicAuditSteps)[];
  history: readonly (keyof PeriodicHistorySteps)[];
  trigger: readonly (keyof PeriodicTriggerSteps)[];
  schedules: readonly (keyof PeriodicScheduleSteps)[];
  incidents: readonly (keyof PeriodicIncidentSteps)[];
};

/** Whether `coordinator` has every step of `capability`. */
export function capable(coordinator: unknown, capability: keyof typeof CAPABILITIES): boolean {
  const steps = coordinator as Record<string, unknown> | null | undefined;
  return CAPABILITIES[capability].every((step) => typeof steps?.[step] === 'function');
}

/** A reply of one step for one job, checked: one of the wrong type is a failure, never a lease. */
export function checked<T>(
  step: string,
  reply: unknown,
  type: { accepts(value: unknown): value is T; expected: string },
): T {
  if (!type.accepts(reply))
    throw new Error(`${step}() answered ${describeValue(reply)}, not ${type.expected}`);
  return reply;
}

export const TOKEN = { accepts: isWhole, expected: 'a fencing token (a safe integer ≥ 0)' };

export const BOOLEAN = {
  accepts: (value: unknown): value is boolean => typeof value === 'boolean',
  expected: 'true or false',
};

/** What is wrong with a heartbeat's reply, if anything: the first entry that does not answer `request`. */
export function heartbeatProblem(request: PeriodicHeartbeat, reply: unknown): string | undefined {
  const { members, renewed, acquired } = (reply ?? {}) as Partial<PeriodicHeartbeatReply>;
  const wrong = (what: string, value: unknown, expected: string) =>
    `heartbeat() answered ${what} ${describeValue(value)}, not ${expected}`;
  if (typeof reply !== 'object' || reply === null) {
    return `heartbeat() answered ${describeValue(reply)}, not ${HEARTBEAT}`;
  }
  if (!Array.isArray(members)) return wrong('members', members, 'an array of members');
  const member = members.find(
    (one) =>
      typeof one?.owner !== 'string' || typeof one.replica !== 'string' || typeof one.jobs !== 'string',
  );
  if (member !== undefined)
    return wrong('the member', member, 'a member { owner, replica, jobs } of strings');
  if (!Array.isArray(renewed) || renewed.length !== request.renew.length) {
    return wrong('renewed', renewed, `a boolean per renewal (${request.renew.length})`);
  }
  const renewal = renewed.findIndex((ok) => typeof ok !== 'boolean');
  if (renewal >= 0) return wrong(`renewed[${renewal}]`, renewed[renewal], BOOLEAN.expected);
  if (!Array.isArray(acquired) || acquired.length !== request.acquire.length) {
    return wrong('acquired', acquired, `a holding or null per lease to take (${request.acquire.length})`);
  }
  for (const [i, taken] of acquired.entries()) {
    if (taken === null) continue;
    const { fencingToken, schedule } = (taken ?? {}) as { fencingToken?: unknown; schedule?: unknown };
    if (!isWhole(fencingToken) || fencingToken === 0) {
      return wrong(`acquired[${i}].fencingToken`, fencingToken, 'a fencing token (a safe integer > 0)');
    }
    if (!SCHEDULE.accepts(schedule)) return wrong(`acquired[${i}].schedule`, schedule, SCHEDULE.expected);
  }
  const { paused, triggers, fleet } = reply as PeriodicHeartbeatReply;
  if (fleet !== undefined && (typeof fleet !== 'string' || fleet === '')) {
    return wrong('fleet', fleet, 'a string that names the fleet’s records');
  }
  if (
    triggers !== undefined &&
    !(Array.isArray(triggers) && triggers.every((request) => TRIGGER.accepts(request)))
  ) {
    return wrong('triggers', triggers, TRIGGER.expected);
  }
  if (paused !== undefined && !(Array.isArray(paused) && paused.every((name) => typeof name === 'string'))) {
    return wrong('paused', paused, 'an array of job names');
  }
  const { refused } = reply as PeriodicHeartbeatReply;
  if (
    refused !== undefined &&
    !(
      Array.isArray(refused) &&
      refused.every((one) => typeof one?.name === 'string' && typeof one.error === 'string')
    )
  ) {
    return wrong('refused', refused, 'an array of { name, error } of strings');
  }
  const { schedules } = reply as PeriodicHeartbeatReply;
  if (schedules !== undefined && !isWhole(schedules)) {
    return wrong('schedules', schedules, 'a count of changes (a safe integer ≥ 0)');
  }
  const handlers = members.find(
    (one) =>
      one.handlers !== undefined &&
      !(Array.isArray(one.handlers) && one.handlers.every((handler) => typeof handler === 'string')),
  );
  if (handlers !== undefined) return wrong('the member', handlers, 'handlers that are an array of strings');
  return undefined;
}

const HEARTBEAT =
  '{ members, renewed, acquired }: the members, a boolean per renewal, and a holding { fencingToken, ' +
  'schedule } or null per lease to take';

export const SCHEDULE = {
  accepts: (value: unknown): value is PeriodicFleetSchedule | null => {
    if (value === null) return true;
    const { grid, last, next } = (value ?? {}) as Partial<PeriodicFleetSchedule>;
    return typeof grid === 'string' && isWhole(last) && isWhole(next);
  },
  expected: 'null or a schedule { grid: string, last: number, next: number }',
};

/** The actions an audit trail keeps. */
/** Every action of an operation, as the audit trail keeps them. */
export const ACTIONS: ReadonlySet<unknown> = new Set<PeriodicOperation['action']>([
  'pause',
  'resume',
  'trigger',
  'create',
  'update',
  'remove',
  'backfill',
  'cancelBackfill',
  'incident',
  'recovered',
]);

export const OPERATION = {
  accepts: (value: unknown): value is PeriodicOperation => {
    const { action, by, note, replica, at } = (value ?? {}) as Partial<PeriodicOperation>;
    const text = (field: unknown) => field === null || typeof field === 'string';
    return (
      typeof action === 'string' &&
      ACTIONS.has(action) &&
      text(by) &&
      text(note) &&
      typeof replica === 'string' &&
      isWhole(at)
    );
  },
  expected: 'an operation { action, by, note, replica, at }',
};

const ORIGINS: ReadonlySet<unknown> = new Set(RUN_ORIGINS);
const REASONS: ReadonlySet<unknown> = new Set(EXIT_REASONS);
const isText = (value: unknown) => typeof value === 'string';
const isWholeOrNull = (value: unknown) => value === null || isWhole(value);
const textOr = (otherwise: string) => (value: unknown) => (typeof value === 'string' ? value : otherwise);

/**
 * The one shape of a run's record (`PeriodicRunEntry`, `retrying` aside): what each field must be, and, for a
 * field a record can be read without, what it reads as when it is not that (`otherwise`). A coordinator's reply
 * must be the shape ({@link RUN}); a record a store kept, which another version of the package may have
 * written, is read leniently ({@link readRun}).
 */
const RUN_SHAPE: {
  [Field in Exclude<keyof PeriodicRunEntry, 'retrying'>]-?: {
    accepts(value: unknown): boolean;
    otherwise?(value: unknown): PeriodicRunEntry[Field];
  };
} = {
  id: { accepts: isText },
  name: { accepts: isText },
  jobId: { accepts: isWhole, otherwise: () => 0 },
  replica: { accepts: isText, otherwise: () => 'unknown' },
  fencingToken: { accepts: isWholeOrNull, otherwise: () => null },
  slot: { accepts: isWholeOrNull, otherwise: () => null },
  origin: { accepts: (value) => ORIGINS.has(value), otherwise: () => 'schedule' },
  attempt: { accepts: isWhole, otherwise: () => 1 },
  startedAt: { accepts: isWhole },
  finishedAt: { accepts: isWholeOrNull, otherwise: () => null },
  reason: { accepts: (value) => value === null || REASONS.has(value), otherwise: () => null },
  durationMs: { accepts: (value) => value === null || typeof value === 'number', otherwise: () => null },
  error: {
    accepts: (value) => {
      if (value === null) return true;
      const { name, message } = (value ?? {}) as { name?: unknown; message?: unknown };
      return isText(name) && isText(message);
    },
    otherwise: (value) => {
      if (value === null || value === undefined) return null;
      const { name, message } = value as { name?: unknown; message?: unknown };
      return { name: textOr('Error')(name), message: textOr('')(message) };
    },
  },
};

const SHAPE_FIELDS = Object.entries(RUN_SHAPE) as [keyof typeof RUN_SHAPE, (typeof RUN_SHAPE)['id']][];

export const RUN = {
  accepts: (value: unknown): value is PeriodicRunEntry => {
    if (typeof value !== 'object' || value === null) return false;
    const entry = value as Record<string, unknown>;
    return SHAPE_FIELDS.every(([field, { accepts }]) => accepts(entry[field]));
  },
  expected:
    'an array of runs { id, name, jobId, replica, fencingToken, slot, origin, attempt, startedAt, … }',
};

/**
 * A run read leniently from what a store kept (see `RUN_SHAPE`), or undefined when it lacks what names it (its
 * `id`, its job's `name`) or its `startedAt`.
 */
export function readRun(value: unknown): PeriodicRunEntry | undefined {
  const kept = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
  const run: Record<string, unknown> = {};
  for (const [field, { accepts, otherwise }] of SHAPE_FIELDS) {
    const given = kept[field];
    if (accepts(given)) run[field] = given;
    else if (otherwise === undefined) return undefined;
    else run[field] = otherwise(given);
  }
  // The error's own fields only, whatever else the store kept beside them.
  const { error } = run as { error: PeriodicRunEntry['error'] };
  if (error !== null) run.error = { name: error.name, message: error.message };
  return run as unknown as PeriodicRunEntry;
}

export const FLEET_READ = {
  accepts: (value: unknown): value is PeriodicFleetRead => {
    const read = (value ?? {}) as Partial<PeriodicFleetRead>;
    const holder = read.holder as Partial<NonNullable<PeriodicFleetRead['holder']>> | null | undefined;
    return (
      typeof read.name === 'string' &&
      (holder === null ||
        (typeof holder?.owner === 'string' && isWhole(holder.fencingToken) && isWhole(holder.until))) &&
      (read.pause === null || OPERATION.accepts(read.pause)) &&
      SCHEDULE.accepts(read.schedule) &&
      (read.lastRun === null || RUN.accepts(read.lastRun)) &&
      (read.lastSucceededAt === null || isWhole(read.lastSucceededAt)) &&
      isWhole(read.consecutiveFailures)
    );
  },
  expected: '{ name, holder, pause, schedule, lastRun, lastSucceededAt, consecutiveFailures }',
};

const TRIGGER = {
  accepts: (value: unknown): value is PeriodicTriggerRequest => {
    const request = (value ?? {}) as Partial<PeriodicTriggerRequest>;
    return (
      typeof request.id === 'string' &&
      typeof request.name === 'string' &&
      (request.by === null || typeof request.by === 'string') &&
      typeof request.replica === 'string' &&
      isWhole(request.at)
    );
  },
  expected: 'an array of triggers { id, name, by, replica, at }',
};

export const TRIGGER_ANSWER = {
  accepts: (value: unknown): value is PeriodicTriggerAnswer => {
    const answer = (value ?? {}) as { ok?: unknown; jobId?: unknown; error?: unknown; replica?: unknown };
    return (
      typeof answer.replica === 'string' &&
      ((answer.ok === true && isWhole(answer.jobId)) ||
        (answer.ok === false && typeof answer.error === 'string'))
    );
  },
  expected: "'pending', 'taken', 'withdrawn' or an answer { ok, jobId | error, replica }",
};

const INCIDENT_KINDS: ReadonlySet<unknown> = new Set(['failing', 'late', 'hung']);

/** An incident as the incident steps answer it. */
export const INCIDENT = {
  accepts: (value: unknown): value is PeriodicIncidentRecord => {
    const { name, kind, since, detail } = (value ?? {}) as Partial<PeriodicIncidentRecord>;
    return (
      typeof name === 'string' && INCIDENT_KINDS.has(kind) && isWhole(since) && typeof detail === 'string'
    );
  },
  expected: "an incident { name, kind: 'failing' | 'late' | 'hung', since, detail }",
};

export function wrongOperation(step: string, reply: unknown): string {
  return `${step}() answered ${describeValue(reply)}, not ${step === 'readAudit' ? 'an array of operations' : `null or ${OPERATION.expected}`}`;
}

/** A safe integer ≥ 0. */
function isWhole(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** A stored schedule's record, as the store answers it. */
export const STORED = {
  accepts: (value: unknown): value is PeriodicStoredRecord => {
    const record = (value ?? {}) as Partial<PeriodicStoredRecord>;
    return (
      typeof record.name === 'string' &&
      typeof record.handler === 'string' &&
      typeof record.definition === 'string' &&
      isWhole(record.version) &&
      record.version > 0 &&
      isWhole(record.createdAt) &&
      isWhole(record.updatedAt) &&
      (record.updatedBy === null || typeof record.updatedBy === 'string') &&
      isWhole(record.change)
    );
  },
  expected:
    'a stored schedule { name, handler, definition, version, createdAt, updatedAt, updatedBy, change }',
};

/** What a write or a removal of a stored schedule answers. */
export const STORED_ANSWER = {
  accepts: (value: unknown): value is PeriodicStoredAnswer => {
    const answer = (value ?? {}) as Record<string, unknown>;
    if (answer.ok === true) return answer.record === null || STORED.accepts(answer.record);
    return answer.ok === false && (answer.currentVersion === null || isWhole(answer.currentVersion));
  },
  expected: '{ ok: true, record } or { ok: false, currentVersion }',
};

/** The changes to the stored schedules since a count. */
export const STORED_CHANGES = {
  accepts: (value: unknown): value is PeriodicStoredChanges => {
    const changes = (value ?? {}) as Partial<PeriodicStoredChanges>;
    return (
      Array.isArray(changes.records) &&
      changes.records.every((record) => STORED.accepts(record)) &&
      Array.isArray(changes.removed) &&
      changes.removed.every((name) => typeof name === 'string') &&
      isWhole(changes.change) &&
      typeof changes.complete === 'boolean'
    );
  },
  expected: '{ records, removed, change, complete }',
};
