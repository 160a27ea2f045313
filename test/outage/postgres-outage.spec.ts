// PostgreSQL connections cut under the coordinator, through a TCP proxy the test controls: pg emits the error of
// an idle connection on the pool, and a pool without a listener for it would take the process down.
import { afterAll, expect, it } from '@jest/globals';
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

  it("a pool the application gave no 'error' listener: the process survives, and the coordinator works once the database is back", async () => {
    const url = new URL(DATABASE_URL);
    const proxy = await TcpProxy.start({ host: url.hostname, port: Number(url.port || 5432) });
    url.host = `127.0.0.1:${proxy.port}`;
    // As an application writes it: no pool.on('error').
    const pool = new pg.Pool({ connectionString: url.toString(), connectionTimeoutMillis: 1000 });
    try {
      const coordinator = new PostgresCoordinator({ pool, table, leaseMs: 3000 });
      expect(await coordinator.acquire('job', 'owner-a')).toBeGreaterThan(0);
      expect(pool.idleCount).toBe(1);

      // The idle connection drops: pg emits its error on the pool.
      await proxy.refuse();
      await sleep(200);
      expect(pool.idleCount).toBe(0);
      await expect(coordinator.renew('job', 'owner-a')).rejects.toThrow();

      await proxy.accept();
      expect(await coordinator.renew('job', 'owner-a')).toBe(true);
    } finally {
      await pool.end();
      await proxy.close();
    }
  });
});
