// Every invalid configuration a user can write, in one table: each is a PeriodicConfigError whose message
// names the job (or the call), the option, and what to do instead, and nothing of the application starts.
import { describe, expect, it } from '@jest/globals';
import { ConsoleLogger, Injectable, Module } from '@nestjs/common';
import {
  Periodic,
  PeriodicConfigError,
  PeriodicModule,
  type PeriodicModuleOptions,
  type PeriodicOptions,
  InMemoryCoordinator,
  type InMemoryCoordinatorOptions,
  PostgresCoordinator,
  type PostgresCoordinatorOptions,
  RedisCoordinator,
  type RedisCoordinatorOptions,
} from '../../lib/index.js';
import { useApps } from './helpers.js';

/** How many times any job ran: a failed configuration must leave it at 0. */
let runs = 0;

/** A provider with one job of the given options, beside a valid job that would run at once. */
function jobWith(options: unknown): new () => object {
  @Injectable()
  class Jobs {
    @Periodic({ every: 1000, initialDelay: 0 })
    valid(): void {
      runs++;
    }

    @Periodic(options as PeriodicOptions)
    work(): void {
      runs++;
    }
  }
  return Jobs;
}

const JOB = '@Periodic() on Jobs.work: ';

/** [what, options, the option named, what the message says to do instead] */
const optionCases: [string, unknown, string, RegExp][] = [
  ['every negative', { every: -5 }, '"every"', /must be an integer number of milliseconds ≥ 1, got -5/],
  ['every zero', { every: 0 }, '"every"', /must be an integer number of milliseconds ≥ 1, got 0/],
  ['every fractional', { every: 1.5 }, '"every"', /must be an integer number of milliseconds ≥ 1, got 1\.5/],
  ['every a string', { every: '100' }, '"every"', /must be an integer number of milliseconds ≥ 1, got "100"/],
  ['every NaN', { every: NaN }, '"every"', /must be an integer .* got NaN/],
  ['every Infinity', { every: Infinity }, '"every"', /must be an integer .* got Infinity/],
  ['every beyond 2^53', { every: 2 ** 53 }, '"every"', /beyond 2\^53−1, the largest exact integer/],
  ['every missing', {}, '"every"', /must be an integer number of milliseconds ≥ 1, got undefined/],
  ['every null', { every: null }, '"every"', /must be an integer .* got null/],
  [
    'name empty',
    { every: 1000, name: '' },
    '"name"',
    /must be 1 to 200 characters of well-formed Unicode, with no control character and not only white space, got ""/,
  ],
  ['name a number', { every: 1000, name: 42 }, '"name"', /must be 1 to 200 characters .*, got 42/],
  ['initialDelay negative', { every: 1000, initialDelay: -1 }, '"initialDelay"', /≥ 0, got -1/],
  ['initialDelay fractional', { every: 1000, initialDelay: 0.5 }, '"initialDelay"', /≥ 0, got 0\.5/],
  ['initialDelay a string', { every: 1000, initialDelay: '0' }, '"initialDelay"', /≥ 0, got "0"/],
  ['delayMode unknown', { every: 1000, delayMode: 'fixed' }, '"delayMode"', /must be 'regular' or 'shifted'/],
  ['delayMode miscased', { every: 1000, delayMode: 'Regular' }, '"delayMode"', /did you mean 'regular'\?/],
  [
    'delayMode a number',
    { every: 1000, delayMode: 1 },
    '"delayMode"',
    /must be 'regular' or 'shifted', got 1/,
  ],
  ['when a boolean', { every: 1000, when: true }, '"when"', /must be a function that returns a boolean/],
  ['when a string', { every: 1000, when: 'yes' }, '"when"', /must be a function .* got "yes"/],
  [
    'onOverlap snake case',
    { every: 1000, onOverlap: 'stop_previous' },
    '"onOverlap"',
    /did you mean 'stopPrevious'\?/,
  ],
  [
    'onOverlap unknown',
    { every: 1000, onOverlap: 'skip' },
    '"onOverlap"',
    /must be 'run', 'ignore' or 'stopPrevious'/,
  ],
  [
    'onOverlap null',
    { every: 1000, onOverlap: null },
    '"onOverlap"',
    /must be 'run', 'ignore' or 'stopPrevious', got null/,
  ],
  ['timeout zero', { every: 1000, timeout: 0 }, '"timeout"', /≥ 1, or Infinity, got 0/],
  ['timeout negative', { every: 1000, timeout: -1 }, '"timeout"', /≥ 1, or Infinity, got -1/],
  ['timeout a string', { every: 1000, timeout: 'Infinity' }, '"timeout"', /or Infinity, got "Infinity"/],
  ['timeout fractional', { every: 1000, timeout: 1.5 }, '"timeout"', /or Infinity, got 1\.5/],
  [
    'jobShutdown negative',
    { every: 1000, jobShutdown: -1 },
    '"jobShutdown"',
    /≥ 0, Infinity or 'brutalKill', got -1/,
  ],
  [
    'jobShutdown snake case',
    { every: 1000, jobShutdown: 'brutal_kill' },
    '"jobShutdown"',
    /did you mean 'brutalKill'\?/,
  ],
  [
    'jobShutdown unknown',
    { every: 1000, jobShutdown: 'kill' },
    '"jobShutdown"',
    /or 'brutalKill', got "kill"/,
  ],
  ['jobShutdown fractional', { every: 1000, jobShutdown: 2.5 }, '"jobShutdown"', /or 'brutalKill', got 2\.5/],
  ['mode miscased', { every: 1000, mode: 'Auto' }, '"mode"', /did you mean 'auto'\?/],
  ['mode unknown', { every: 1000, mode: 'sync' }, '"mode"', /must be 'auto' or 'manual', got "sync"/],
  [
    'exclusive a string',
    { every: 1000, exclusive: 'yes' },
    '"exclusive"',
    /must be true or false, got "yes"/,
  ],
  [
    'exclusive without a coordinator',
    { every: 1000, exclusive: true },
    '"exclusive"',
    /pass PeriodicModule\.forRoot\(\{ coordinator \}\), with a RedisCoordinator, a PostgresCoordinator or an InMemoryCoordinator.*or remove "exclusive"/,
  ],
  [
    'a coordinator as a job option',
    { every: 1000, exclusive: true, coordinator: {} },
    '"coordinator"',
    /unknown option "coordinator"/,
  ],
  ['an unknown option', { every: 1000, on_overlap: 'ignore' }, '"on_overlap"', /did you mean "onOverlap"\?/],
  [
    'a misspelt option',
    { every: 1000, intervall: 5 },
    '"intervall"',
    /The options are: every, cron, timezone, jitter, name/,
  ],
  ['run as an option', { every: 1000, run: () => undefined }, '"run"', /the decorated method is the job/],
  ['options a number', 5000, 'options', /must be an object such as \{ every: 60_000 \}, got 5000/],
  ['options a string', 'every minute', 'options', /must be an object such as \{ every: 60_000 \}/],
  ['no options', undefined, 'options', /must be an object such as \{ every: 60_000 \}, got undefined/],
  [
    'an option getter that throws',
    {
      every: 1000,
      get timeout(): number {
        throw new Error('JOB_TIMEOUT is not set.');
      },
    },
    '"timeout"',
    /reading option "timeout" threw: JOB_TIMEOUT is not set; pass plain values/,
  ],
  [
    'an unknown option inherited from a prototype',
    Object.assign(Object.create({ evry: 5 }) as object, { every: 1000 }),
    '"evry"',
    /unknown option "evry"; did you mean "every"\? The options are/,
  ],
  [
    'an unknown option with no near name',
    { every: 1000, xyz: 1 },
    '"xyz"',
    /unknown option "xyz"\. The options are/,
  ],
];

describe('invalid configurations: a PeriodicConfigError that names the job, the option and the fix', () => {
  const createApp = useApps();

  it.each(optionCases)('@Periodic() with %s', async (_, options, option, fix) => {
    runs = 0;
    const app = createApp({
      imports: [PeriodicModule.forRoot({ logger: false })],
      providers: [jobWith(options)],
    });
    const error = await app.then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(PeriodicConfigError);
    const { message } = error as Error;
    expect(message.startsWith(JOB)).toBe(true);
    expect(message).toContain(option);
    expect(message).toMatch(fix);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(runs).toBe(0);
  });

  const misplaced: [string, () => unknown, RegExp][] = [
    [
      'on a getter',
      () => {
        class Jobs {
          @Periodic({ every: 1000 })
          get work(): number {
            return 1;
          }
        }
        return Jobs;
      },
      /@Periodic\(\) on Jobs\.work: work is an accessor, not a method; @Periodic\(\) goes on a method/,
    ],
    [
      'on a static method',
      () => {
        class Jobs {
          @Periodic({ every: 1000 })
          static work(): void {}
        }
        return Jobs;
      },
      /@Periodic\(\) on Jobs\.work: the method is static; @Periodic\(\) goes on an instance method/,
    ],
    [
      'on a property (as TypeScript decorates one: no descriptor)',
      () => {
        const decorate = Periodic({ every: 1000 }) as (target: object, key: string) => void;
        decorate(class Jobs {}.prototype, 'work');
      },
      /@Periodic\(\) on Jobs\.work: work is a property, not a method/,
    ],
    [
      'on a property that is not a function',
      () => {
        class Jobs {
          work = 5;
        }
        const decorate = Periodic({ every: 1000 }) as (
          target: object,
          key: string,
          descriptor: object,
        ) => void;
        decorate(Jobs.prototype, 'work', { value: 5, writable: true });
        return Jobs;
      },
      /@Periodic\(\) on Jobs\.work: work is a property, not a method/,
    ],
    [
      'twice on one method',
      () => {
        class Jobs {
          @Periodic({ every: 1000 })
          @Periodic({ every: 2000 })
          work(): void {}
        }
        return Jobs;
      },
      /@Periodic\(\) on Jobs\.work: @Periodic\(\) is applied twice; a method is one job, so keep one decorator/,
    ],
  ];

  it.each(misplaced)('@Periodic() %s throws when the class is defined', (_, define, message) => {
    expect(define).toThrow(PeriodicConfigError);
    expect(define).toThrow(message);
  });

  it('two jobs with one name, naming both places and their modules', async () => {
    @Injectable()
    class A {
      @Periodic({ every: 1000, name: 'sync' })
      run(): void {}
    }
    @Injectable()
    class B {
      @Periodic({ every: 1000, name: 'sync' })
      run(): void {}
    }
    @Module({ providers: [B] })
    class OtherModule {}
    @Module({ imports: [PeriodicModule.forRoot({ mode: 'manual' }), OtherModule], providers: [A] })
    class AppModule {}
    const app = createApp({ imports: [AppModule] });
    await expect(app).rejects.toThrow(PeriodicConfigError);
    await expect(app).rejects.toThrow(
      'two jobs are named "sync": @Periodic() on A.run (in AppModule) and @Periodic() on B.run (in OtherModule); ' +
        'names must be unique in the application: give one of them another { name }',
    );
  });

  it('a name that another job has by default', async () => {
    @Injectable()
    class Report {
      @Periodic({ every: 1000 })
      send(): void {}

      @Periodic({ every: 1000, name: 'Report.send' })
      resend(): void {}
    }
    const app = createApp({ imports: [PeriodicModule.forRoot()], providers: [Report] });
    await expect(app).rejects.toThrow(/two jobs are named "Report\.send"/);
  });

  it.each<[unknown, string]>([
    [
      { mode: 'manul' },
      `PeriodicModule.forRoot(): "mode" must be 'auto' or 'manual', got "manul"; did you mean 'manual'?`,
    ],
    [{ mode: 'sometimes' }, `PeriodicModule.forRoot(): "mode" must be 'auto' or 'manual', got "sometimes"`],
    [
      { logger: 'yes' },
      `PeriodicModule.forRoot(): "logger" must be true, false or an object of levels such as { started: 'debug' }, got "yes"`,
    ],
    [
      { logger: { strated: 'debug' } },
      'PeriodicModule.forRoot(): "logger": unknown option "strated"; did you mean "started"? The options are: started, finished,',
    ],
    [
      { logger: { started: 'info' } },
      `PeriodicModule.forRoot(): "logger.started" must be 'log', 'error', 'warn', 'debug', 'verbose', 'fatal' or false, got "info"`,
    ],
    [
      { logger: { skipped: 'Debug' } },
      `"logger.skipped" must be 'log', 'error', 'warn', 'debug', 'verbose', 'fatal' or false, got "Debug"; did you mean 'debug'?`,
    ],
    [
      { logger: new ConsoleLogger() },
      `PeriodicModule.forRoot(): "logger" takes true, false or a level per kind of line such as { started: 'debug' }, got a logger object; the package logs through Nest's Logger, so give your logger to Nest: NestFactory.create(AppModule, { logger }) or app.useLogger(logger)`,
    ],
    [
      { logger: ['debug'] },
      `"logger" must be true, false or an object of levels such as { started: 'debug' }, got [ 'debug' ]`,
    ],
    [{ jobs: null }, `"jobs" must be an object of options by job name`],
    [null, "PeriodicModule.forRoot(): the options must be an object such as { mode: 'manual' }, got null"],
    [
      { logger: { started: true } },
      `"logger.started" must be 'log', 'error', 'warn', 'debug', 'verbose', 'fatal' or false, got true`,
    ],
    [
      { jobs: 'Cleanup.purge' },
      `PeriodicModule.forRoot(): "jobs" must be an object of options by job name such as { 'Cleanup.purge': { every: 30_000 } }, got "Cleanup.purge"`,
    ],
    [{ jobs: [{ every: 1000 }] }, `"jobs" must be an object of options by job name`],
    [
      { jobs: { 'Cleanup.purge': { every: -1 } } },
      'PeriodicModule.forRoot(): jobs["Cleanup.purge"]: "every" must be an integer number of milliseconds ≥ 1, got -1',
    ],
    [
      { jobs: { 'Cleanup.purge': { every: '30000' } } },
      'PeriodicModule.forRoot(): jobs["Cleanup.purge"]: "every" must be an integer number of milliseconds ≥ 1, got "30000"',
    ],
    [
      { jobs: { 'Cleanup.purge': { mode: 'off' } } },
      `PeriodicModule.forRoot(): jobs["Cleanup.purge"]: "mode" must be 'auto' or 'manual', got "off"`,
    ],
    [
      { jobs: { 'Cleanup.purge': { onOverlap: 'skip' } } },
      `jobs["Cleanup.purge"]: "onOverlap" must be 'run', 'ignore' or 'stopPrevious', got "skip"`,
    ],
    [
      { jobs: { 'Cleanup.purge': { cron: '' } } },
      `jobs["Cleanup.purge"]: "cron" must be a cron pattern such as '0 3 * * *', got ""`,
    ],
    [
      { jobs: { 'Cleanup.purge': { evry: 30_000 } } },
      'PeriodicModule.forRoot(): jobs["Cleanup.purge"]: unknown option "evry"; did you mean "every"?',
    ],
    [
      { jobs: { 'Cleanup.purge': { name: 'purge' } } },
      'PeriodicModule.forRoot(): jobs["Cleanup.purge"]: "name" cannot be overridden, it is how "jobs" finds the job; rename the job in its @Periodic({ name }) instead',
    ],
    [
      { jobs: { 'Cleanup.purge': { coordinator: {} } } },
      'PeriodicModule.forRoot(): jobs["Cleanup.purge"]: unknown option "coordinator"',
    ],
    [
      { jobs: { 'Cleanup.purge': 30_000 } },
      'PeriodicModule.forRoot(): jobs["Cleanup.purge"]: the options must be an object such as { every: 30_000 }, got 30000',
    ],
    [{ mdoe: 'manual' }, 'PeriodicModule.forRoot(): unknown option "mdoe"; did you mean "mode"?'],
    [
      { coordinator: { client: {} } },
      'PeriodicModule.forRoot(): "coordinator" must be a PeriodicCoordinator (leaseMs, acquire, renew, release, readSchedule, writeSchedule), ' +
        'such as new RedisCoordinator({ client: new Redis(process.env.REDIS_URL) }), got { client: {} }',
    ],
    [42, "PeriodicModule.forRoot(): the options must be an object such as { mode: 'manual' }, got 42"],
    [
      'manual',
      'PeriodicModule.forRoot(): the options must be an object such as { mode: \'manual\' }, got "manual"',
    ],
  ])('PeriodicModule.forRoot(%p)', (options, message) => {
    const forRoot = () => PeriodicModule.forRoot(options as PeriodicModuleOptions);
    expect(forRoot).toThrow(PeriodicConfigError);
    expect(forRoot).toThrow(message);
  });

  const client = { eval: async () => 0, evalsha: async () => 0 };
  const NEW = 'new RedisCoordinator(): ';

  it.each<[string, unknown, string]>([
    [
      'no options',
      undefined,
      `${NEW}the options must be an object such as { client: new Redis(process.env.REDIS_URL) }, got undefined`,
    ],
    [
      'no client',
      {},
      `${NEW}"client" must be an ioredis client, such as new Redis(process.env.REDIS_URL), got undefined`,
    ],
    [
      'a URL for a client',
      { client: 'redis://127.0.0.1:6379' },
      `${NEW}"client" must be an ioredis client, such as new Redis(process.env.REDIS_URL), got "redis://127.0.0.1:6379"`,
    ],
    [
      'a lease too short',
      { client, leaseMs: 50 },
      `${NEW}"leaseMs" must be an integer number of milliseconds from 100 to 86,400,000 (a day), got 50: a lease is renewed every leaseMs / 3`,
    ],
    [
      'a lease PostgreSQL would not take (2 ** 31)',
      { client, leaseMs: 2 ** 31 },
      `${NEW}"leaseMs" must be an integer number of milliseconds from 100 to 86,400,000 (a day), got 2147483648: the jobs of a replica that dies wait that long for another to take them; give a lease of seconds (the default is 10,000)`,
    ],
    [
      'a lease of a day and a millisecond',
      { client, leaseMs: 86_400_001 },
      `${NEW}"leaseMs" must be an integer number of milliseconds from 100 to 86,400,000 (a day), got 86400001`,
    ],
    [
      'an infinite lease',
      { client, leaseMs: Infinity },
      `${NEW}"leaseMs" must be an integer number of milliseconds from 100 to 86,400,000 (a day), got Infinity`,
    ],
    [
      'a fractional lease',
      { client, leaseMs: 1000.5 },
      `${NEW}"leaseMs" must be an integer number of milliseconds`,
    ],
    [
      'a lease in a string',
      { client, leaseMs: '10s' },
      `${NEW}"leaseMs" must be an integer number of milliseconds`,
    ],
    [
      'a keyPrefix not a string',
      { client, keyPrefix: 7 },
      `${NEW}"keyPrefix" must be a non-empty string without a line feed, such as 'periodic:', got 7`,
    ],
    [
      "an empty keyPrefix (the leases would be keys named as the jobs, among the application's own)",
      { client, keyPrefix: '' },
      `${NEW}"keyPrefix" must be a non-empty string without a line feed, such as 'periodic:', got ""`,
    ],
    ['an unknown option', { client, lease: 1000 }, `${NEW}unknown option "lease"; did you mean "leaseMs"?`],
  ])('new RedisCoordinator() with %s', (_, options, message) => {
    const create = () => new RedisCoordinator(options as RedisCoordinatorOptions);
    expect(create).toThrow(PeriodicConfigError);
    expect(create).toThrow(message);
  });

  const pool = { query: async () => ({ rows: [] }) };
  const PG = 'new PostgresCoordinator(): ';

  it.each<[string, unknown, string]>([
    [
      'no options',
      undefined,
      `${PG}the options must be an object such as { pool: new Pool({ connectionString }) }`,
    ],
    ['no pool', {}, `${PG}"pool" must be a pg Pool or Client (an object with query(text, values))`],
    ['a URL for a pool', { pool: 'postgres://db' }, `${PG}"pool" must be a pg Pool or Client`],
    [
      'a table with a quote',
      { pool, table: 'leases"; DROP TABLE users; --' },
      `${PG}"table" must be a plain SQL identifier`,
    ],
    ['a table with a space', { pool, table: 'my leases' }, `${PG}"table" must be a plain SQL identifier`],
    [
      'a table of three parts',
      { pool, table: 'a.b.c' },
      `${PG}"table" must be a plain SQL identifier, or schema.table`,
    ],
    ['an empty table', { pool, table: '' }, `${PG}"table" must be a plain SQL identifier`],
    [
      'a table starting with a digit',
      { pool, table: '1leases' },
      `${PG}"table" must be a plain SQL identifier`,
    ],
    ['a table name too long', { pool, table: 'x'.repeat(64) }, `${PG}"table" must be a plain SQL identifier`],
    ['a table not a string', { pool, table: 7 }, `${PG}"table" must be a plain SQL identifier`],
    [
      'a lease too short',
      { pool, leaseMs: 10 },
      `${PG}"leaseMs" must be an integer number of milliseconds from 100 to 86,400,000 (a day), got 10`,
    ],
    [
      'a lease PostgreSQL would not take (2 ** 31)',
      { pool, leaseMs: 2 ** 31 },
      `${PG}"leaseMs" must be an integer number of milliseconds from 100 to 86,400,000 (a day), got 2147483648: the jobs of a replica that dies`,
    ],
    [
      "a table named as another table's members",
      { pool, table: 'periodic_leases_members' },
      `${PG}"table" must be a plain SQL identifier`,
    ],
    [
      "a table named as another table's runs, in a schema",
      { pool, table: 'billing.jobs_runs' },
      'got "billing.jobs_runs": it ends with "_runs", as the table of that name beside another table option\'s does',
    ],
    ['an unknown option', { pool, tabel: 'x' }, `${PG}unknown option "tabel"; did you mean "table"?`],
  ])('new PostgresCoordinator() with %s', (_, options, message) => {
    const create = () => new PostgresCoordinator(options as PostgresCoordinatorOptions);
    expect(create).toThrow(PeriodicConfigError);
    expect(create).toThrow(message);
  });

  it.each<[string, unknown, string]>([
    [
      'a lease too short',
      { leaseMs: 99 },
      'new InMemoryCoordinator(): "leaseMs" must be an integer number of milliseconds from 100 to 86,400,000 (a day), got 99',
    ],
    [
      'a lease longer than a day',
      { leaseMs: 90_000_000 },
      'new InMemoryCoordinator(): "leaseMs" must be an integer number of milliseconds from 100 to 86,400,000 (a day), got 90000000',
    ],
    [
      'an unknown option',
      { lease: 1000 },
      'new InMemoryCoordinator(): unknown option "lease"; did you mean "leaseMs"?',
    ],
    [
      'options a number',
      1000,
      'new InMemoryCoordinator(): the options must be an object such as { leaseMs: 10_000 }, got 1000',
    ],
  ])('new InMemoryCoordinator() with %s', (_, options, message) => {
    const create = () => new InMemoryCoordinator(options as InMemoryCoordinatorOptions);
    expect(create).toThrow(PeriodicConfigError);
    expect(create).toThrow(message);
  });

  @Injectable()
  class Cleanup {
    @Periodic({ every: 1000 })
    purge(): void {}
  }

  it.each<[string, string, unknown, unknown, string]>([
    [
      'a name already taken',
      'Cleanup.purge',
      () => undefined,
      { every: 1000 },
      'two jobs are named "Cleanup.purge": @Periodic() on Cleanup.purge (in RootTestModule) and ' +
        'PeriodicRegistry.add("Cleanup.purge")',
    ],
    [
      'an empty name',
      '',
      () => undefined,
      { every: 1000 },
      `PeriodicRegistry.add(): "name" must be 1 to 200 characters of well-formed Unicode, with no control character and not only white space, got ""`,
    ],
    [
      'an invalid option',
      'added',
      () => undefined,
      { every: 1.5 },
      'PeriodicRegistry.add("added"): "every" must be an integer number of milliseconds ≥ 1, got 1.5',
    ],
    [
      'a name in the options',
      'added',
      () => undefined,
      { every: 1000, name: 'x' },
      'PeriodicRegistry.add("added"): "name" and "run" are not options here',
    ],
    [
      '"run" in the options',
      'added',
      () => undefined,
      { every: 1000, run: () => undefined },
      'PeriodicRegistry.add("added"): "name" and "run" are not options here',
    ],
    [
      'a job that is not a function',
      'added',
      'run',
      { every: 1000 },
      'PeriodicRegistry.add("added"): the job must be a function, called with the run\'s context, got "run"',
    ],
    [
      'a coordinator in the options',
      'added',
      () => undefined,
      { every: 1000, exclusive: true, coordinator: new RedisCoordinator({ client }) },
      'PeriodicRegistry.add("added"): unknown option "coordinator"',
    ],
    [
      'exclusive in a module without a coordinator',
      'added',
      () => undefined,
      { every: 1000, exclusive: true },
      'PeriodicRegistry.add("added"): "exclusive" needs a coordinator to share the job\'s lease between ' +
        'replicas, and none was given: pass PeriodicModule.forRoot({ coordinator }), with a RedisCoordinator, ' +
        'a PostgresCoordinator or an InMemoryCoordinator, or remove "exclusive"',
    ],
    [
      'no options',
      'added',
      () => undefined,
      undefined,
      'PeriodicRegistry.add("added"): the options must be an object such as { every: 60_000 }, got undefined',
    ],
    [
      'options that are not an object',
      'added',
      () => undefined,
      1000,
      'PeriodicRegistry.add("added"): the options must be an object such as { every: 60_000 }, got 1000',
    ],
    [
      'an option getter that throws',
      'added',
      () => undefined,
      {
        get every(): number {
          throw new Error('no interval configured');
        },
      },
      'PeriodicRegistry.add("added"): reading option "every" threw: no interval configured; pass plain values',
    ],
    [
      'an unknown option inherited from a prototype',
      'added',
      () => undefined,
      Object.assign(Object.create({ evry: 5 }) as object, { every: 1000 }),
      'PeriodicRegistry.add("added"): unknown option "evry"; did you mean "every"?',
    ],
  ])('PeriodicRegistry.add() with %s', async (_, name, run, options, message) => {
    const app = await createApp({
      imports: [PeriodicModule.forRoot({ mode: 'manual' })],
      providers: [Cleanup],
    });
    const add = () => app.registry.add(name, run as never, options as never);
    expect(add).toThrow(PeriodicConfigError);
    expect(add).toThrow(message);
    expect(app.registry.getAll().map((job) => job.name)).toEqual(['Cleanup.purge']);
  });

  it('PeriodicRegistry.add() once the application is closing', async () => {
    const app = await createApp({ imports: [PeriodicModule.forRoot()] });
    await app.close();
    const add = () => app.registry.add('late', () => runs++, { every: 1000, initialDelay: 0 });
    expect(add).toThrow(PeriodicConfigError);
    expect(add).toThrow(
      'PeriodicRegistry.add("late"): the application is closing; no job can be added any more',
    );
    expect(app.registry.has('late')).toBe(false);
  });
});
