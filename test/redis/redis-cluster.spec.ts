// RedisCoordinator on a Redis Cluster of three nodes that the test starts on free ports: with a hash tag in
// the prefix the lease keys and the tokens' hash share one slot, and the coordinator keeps its contract.
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import type { ChildProcess } from 'node:child_process';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Cluster } from 'ioredis';
import { RedisCoordinator } from '../../lib/index.js';
import { coordinatorContract } from '../../lib/testing/index.js';
import { freePort } from '../nest/child-app.js';
import { describeWithRedisServer, startRedis } from './redis.js';

const describeRedis = await describeWithRedisServer();

describeRedis('RedisCoordinator on a Redis Cluster', () => {
  const servers: ChildProcess[] = [];
  const folder = mkdtempSync(join(tmpdir(), 'periodic-cluster-'));
  let cluster: Cluster;
  let ports: number[];
  const prefix = `{periodic-test-${process.pid}}:`;

  beforeAll(async () => {
    ports = [await freePort(), await freePort(), await freePort()];
    for (const port of ports) {
      const node = join(folder, String(port));
      mkdirSync(node);
      servers.push(
        await startRedis(port, ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf'], node),
      );
    }
    const created = spawnSync(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...ports.map((port) => `127.0.0.1:${port}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { encoding: 'utf8' },
    );
    if (created.status !== 0)
      throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
    cluster = new Cluster([{ host: '127.0.0.1', port: ports[0] }]).on('error', () => undefined);
    // The nodes agree on the slots a moment after they are created.
    for (
      let tries = 0;
      tries < 100 && (await cluster.cluster('INFO')).includes('cluster_state:fail');
      tries++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }, 60_000);

  afterAll(() => {
    cluster?.disconnect();
    for (const server of servers) server.kill('SIGKILL');
    rmSync(folder, { recursive: true, force: true });
  });

  const contract = coordinatorContract({
    make: (leaseMs) => new RedisCoordinator({ client: cluster, keyPrefix: prefix, leaseMs }),
    wipe: async () => {
      await Promise.all(cluster.nodes('master').map((node) => node.flushall()));
    },
  });
  for (const [rule, check] of contract) it(rule, check);

  it('without a hash tag in the prefix the keys fall in different slots: acquiring fails, and says why', async () => {
    const untagged = new RedisCoordinator({ client: cluster, keyPrefix: 'periodic-test:' });
    await expect(untagged.acquire('cleanup', 'owner-a')).rejects.toThrow(
      /CROSSSLOT|different slot|hash slot/i,
    );
  });
});
