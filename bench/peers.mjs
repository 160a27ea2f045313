// The five schedulers the benchmark compares, behind one shape. Each peer takes a list of jobs
// ({ every, run }) and returns { prepare, start, stop }: prepare builds what the scheduler needs before it
// schedules anything (a Nest application, compiled), start schedules every job, stop ends them. The Nest
// peers run the jobs as decorated methods of providers, as an application would; the others are used bare.
import { Injectable, Module } from '@nestjs/common';
import { Cron, Interval, ScheduleModule } from '@nestjs/schedule';
import { Test } from '@nestjs/testing';
import { SimpleIntervalJob, Task, ToadScheduler } from 'toad-scheduler';
import { Periodic, PeriodicModule, PeriodicRegistry, PeriodicScheduler } from '../dist/esm/index.js';

export const PEERS = [
  'nestjs-periodic',
  '@nestjs/schedule',
  'toad-scheduler',
  'setInterval',
  'setTimeout loop',
];
/** nestjs-periodic's engine without Nest, beside the peers that are used without Nest too. */
export const ENGINE = 'nestjs-periodic engine';

/**
 * The two Nest schedulers with cron jobs: `jobs` are `{ cron, run }`, each a decorated method, read in the
 * process's zone by both.
 */
export function makeCronPeer(peer, jobs) {
  switch (peer) {
    case 'nestjs-periodic':
      return nestPeer(jobs, 100, PeriodicModule.forRoot({ logger: false }), (job) =>
        Periodic({ cron: job.cron }),
      );
    case '@nestjs/schedule':
      return nestPeer(jobs, 100, ScheduleModule.forRoot(), (job) => Cron(job.cron));
    default:
      throw new Error(`no cron jobs for "${peer}"`);
  }
}

/**
 * @param jobs `{ every, run(context?) }` each, `context` being nestjs-periodic's; `run` may return a promise.
 * @param perProvider how many jobs share one provider class (Nest peers).
 * @param periodic options of every job, @param module options of the module (nestjs-periodic).
 */
export function makePeer(peer, jobs, { perProvider = 1, periodic = {}, module = {} } = {}) {
  switch (peer) {
    case 'nestjs-periodic':
      return nestPeer(jobs, perProvider, PeriodicModule.forRoot({ logger: false, ...module }), (job) =>
        Periodic({ every: job.every, ...periodic }),
      );
    case 'nestjs-periodic, history: false':
      return makePeer('nestjs-periodic', jobs, {
        perProvider,
        periodic,
        module: { ...module, history: false },
      });
    case 'nestjs-periodic, default logger':
      return makePeer('nestjs-periodic', jobs, {
        perProvider,
        periodic,
        module: { ...module, logger: true },
      });
    case 'nestjs-periodic, registry.add': {
      // The same jobs added at run time, once the application has bootstrapped.
      const app = nestPeer([], perProvider, PeriodicModule.forRoot({ logger: false, ...module }), undefined);
      return {
        prepare: app.prepare,
        stop: app.stop,
        get registry() {
          return app.registry;
        },
        start: async () => {
          await app.start();
          jobs.forEach((job, i) => app.registry.add(`job${i}`, job.run, { every: job.every, ...periodic }));
        },
      };
    }
    case '@nestjs/schedule':
      return nestPeer(jobs, perProvider, ScheduleModule.forRoot(), (job) => Interval(job.every));
    case 'no scheduler':
      return nestPeer(jobs, perProvider, undefined, undefined);
    case ENGINE: {
      const schedulers = [];
      return bare(
        () =>
          jobs.forEach((job, i) => {
            const scheduler = new PeriodicScheduler({
              name: `job${i}`,
              every: job.every,
              ...periodic,
              run: job.run,
            });
            schedulers.push(scheduler);
            scheduler.start();
          }),
        () => Promise.all(schedulers.map((scheduler) => scheduler.stop())),
      );
    }
    case 'toad-scheduler': {
      const scheduler = new ToadScheduler();
      return bare(
        () =>
          jobs.forEach((job, i) =>
            scheduler.addSimpleIntervalJob(
              new SimpleIntervalJob({ milliseconds: job.every }, new Task(`job${i}`, () => void job.run())),
            ),
          ),
        () => scheduler.stop(),
      );
    }
    case 'setInterval': {
      const handles = [];
      return bare(
        () => jobs.forEach((job) => handles.push(setInterval(() => job.run(), job.every))),
        () => handles.forEach(clearInterval),
      );
    }
    case 'setTimeout loop': {
      const stops = [];
      return bare(
        () => jobs.forEach((job) => stops.push(deadlineLoop(job))),
        () => stops.forEach((stop) => stop()),
      );
    }
    default:
      throw new Error(`unknown peer "${peer}"`);
  }
}

function bare(start, stop) {
  return { prepare: async () => {}, start: async () => void start(), stop: async () => void (await stop()) };
}

/** A setTimeout re-armed for each absolute deadline `t0 + k·every`: the floor Node's timers allow. */
function deadlineLoop({ every, run }) {
  const t0 = performance.now();
  let k = 0;
  let handle;
  const arm = () => {
    k += 1;
    handle = setTimeout(tick, Math.max(0, t0 + k * every - performance.now()));
  };
  const tick = () => {
    arm();
    run();
  };
  arm();
  return () => clearTimeout(handle);
}

/** A Nest application whose providers carry the jobs as methods, decorated by `decorate(job)`. */
function nestPeer(jobs, perProvider, schedulerModule, decorate) {
  const providers = [];
  for (let first = 0; first < jobs.length; first += perProvider) {
    const Host = class {};
    Object.defineProperty(Host, 'name', { value: `Host${providers.length}` });
    jobs.slice(first, first + perProvider).forEach((job, i) => {
      const key = `job${i}`;
      Host.prototype[key] = (context) => job.run(context);
      if (decorate !== undefined) {
        decorate(job)(Host.prototype, key, Object.getOwnPropertyDescriptor(Host.prototype, key));
      }
    });
    providers.push(Injectable()(Host) ?? Host);
  }
  class AppModule {}
  Module({ imports: schedulerModule === undefined ? [] : [schedulerModule], providers })(AppModule);
  let app;
  return {
    prepare: async () => {
      app = await Test.createTestingModule({ imports: [AppModule] }).compile();
    },
    start: async () => {
      await app.init();
    },
    stop: async () => {
      await app.close();
    },
    get registry() {
      return app.get(PeriodicRegistry);
    },
  };
}
