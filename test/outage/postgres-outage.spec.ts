// PostgreSQL connections cut under the coordinator, through a TCP proxy the test controls: pg emits the error of
// an idle connection on the pool, and a pool without a listener for it would take the process down. The listener
// is the application's (docs/replicas.md): the coordinator warns when it is missing, and adds none.
import { afterAll, expect, it, jest } from '@jest/globals';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { PostgresCoordinator } from '../../lib/index.js';
import {
  DATABASE_URL,
  describeWithPostgres,
  dropTable,
  postgresPool,
  uniqueTable,
} from '../postgres/postgres.js';
import { TcpProxy } from '../proxy.js';

const describePostgres = await describeWithPostgres();

describePostgres('a PostgreSQL connection cut under the coordinator', () => {
  const table = uniqueTable();
  afterAll(async () => {
    const pool = postgresPool();
    await dropTable(pool, table);
    await pool.end();
  });

  it("a pool without an 'error' listener gets a warning that names the fix, and none is added to it", async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL });
    const warn = jest.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      new PostgresCoordinator({ pool, table });
      expect(warn).toHaveBeenCalledTimes(1);
      expect(warn).toHaveBeenCalledWith(expect.stringContaining("add one, such as pool.on('error',"), {
        code: 'PERIODIC_POOL_ERROR_LISTENER',
      });
      expect(pool.listenerCount('error')).toBe(0);
      // With the application's listener, nothing is said.
      pool.on('error', () => undefined);
      new PostgresCoordinator({ pool, table });
      expect(warn).toHaveBeenCalledTimes(1);
    } finally {
      warn.mockRestore();
      await pool.end();
    }
  });

  it("with the application's 'error' listener, the process survives a dropped connection, and the coordinator works once the database is back", async () => {
    const url = new URL(DATABASE_URL);
    const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.host = `127.0.0.1:${proxy.port}`;
    const dropped: Error[] = [];
    const pool = new pg.Pool({ connectionString: url.toString(), connectionTimeoutMillis: 1000 }).on(
      'error',
      (error) => dropped.push(error),
    );
    try {
      const coordinator = new PostgresCoordinator({ pool, table, leaseMs: 3000 });
      expect(pool.listenerCount('error')).toBe(1);
      expect(await coordinator.acquire('job', 'owner-a')).toBeGreaterThan(0);
      expect(pool.idleCount).toBe(1);

      // The idle connection drops: pg emits its error on the pool.
      await proxy.refuse();
      await sleep(200);
      expect(pool.idleCount).toBe(0);
      expect(dropped).toHaveLength(1);
      await expect(coordinator.renew('job', 'owner-a')).rejects.toThrow();

      await proxy.accept();
      expect(await coordinator.renew('job', 'owner-a')).toBe(true);
    } finally {
      await pool.end();
      await proxy.close();
    }
  });
});
