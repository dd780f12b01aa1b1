import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { CreateRedPacketDocument } from './gql/generated.ts';
import { errorCodes } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { clusterOfTheFile, stopWithin } from './support/lifecycle.ts';
import { sleep, waitFor } from './support/poll.ts';
import { type ClusterNode, clusterNodes, pidOf } from './support/redisCluster.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, runUntilExit, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';

const run = promisify(execFile);
const env = testEnv('cluster_startup');
const ownCluster = clusterOfTheFile(env);
let server: ServerProcess | undefined;
let stores: Stores | undefined;

afterAll(async () => {
  if (server) await stopWithin(server);
  stores ??= openStores(env);
  await stores.cleanup();
});

const ports = () => ownCluster.cluster.nodes.split(',').map((address) => Number(address.split(':')[1]));

async function clusterState(port: number): Promise<string> {
  const { stdout } = await run('redis-cli', ['-p', String(port), 'CLUSTER', 'INFO']);
  return /cluster_state:(\w+)/.exec(stdout)![1]!;
}

/**
 * Freezes (SIGSTOP) a primary and its replica, so a third of the slots has no live primary,
 * until the other nodes say cluster_state:fail. Returns what lets both nodes go on.
 */
async function shardDown(): Promise<() => Promise<void>> {
  // After a shard's comeback the nodes may take a moment to agree on who replicates whom.
  const asked = ports()[0]!;
  const { primary, replica } = await waitFor('a primary with a replica, both other than the node asked', async () => {
    const nodes = await clusterNodes(asked);
    const withReplica = nodes
      .filter((node) => node.primary && !node.failing && node.port !== asked)
      .map((node) => ({ primary: node, replica: nodes.find((other) => other.primaryId === node.id && !other.failing && other.port !== asked) }));
    return withReplica.find((pair): pair is { primary: ClusterNode; replica: ClusterNode } => pair.replica !== undefined);
  });
  const pids = [await pidOf(primary.port), await pidOf(replica.port)];
  for (const pid of pids) process.kill(pid, 'SIGSTOP');
  const others = ports().filter((port) => port !== primary.port && port !== replica.port);
  await waitFor('the other nodes to say cluster_state:fail', async () => (await Promise.all(others.map(clusterState))).every((state) => state === 'fail'), { timeoutMs: 20_000 });
  return async () => {
    for (const pid of pids) process.kill(pid, 'SIGCONT');
    await waitFor('every node to say cluster_state:ok', async () => (await Promise.all(ports().map(clusterState))).every((state) => state === 'ok'), { timeoutMs: 20_000 });
  };
}

describe('a server starting while its Redis Cluster is down', () => {
  it('refuses to start once REDIS_CONNECT_TIMEOUT_MS has passed, naming the cluster state', async () => {
    const shardUp = await shardDown();
    try {
      const { code, stderr } = await runUntilExit({ ...env.vars, REDIS_CONNECT_TIMEOUT_MS: '2000' });
      // EX_TEMPFAIL: its supervisor starts it again, and it starts once the cluster is back.
      expect(code).toBe(75);
      expect(stderr).toContain('not ready after 2000 ms');
      expect(stderr).toContain('cluster_state:fail');
    } finally {
      await shardUp();
    }
  });

  it('starts and serves once the cluster recovers within the timeout', async () => {
    const shardUp = await shardDown();
    let listening = false;
    const starting = startServerProcess(env.vars).then((started) => {
      listening = true;
      return started;
    });
    // ioredis's first ready check has failed by now; before the fix, the start never ended.
    await sleep(3_000);
    expect(listening).toBe(false);
    await shardUp();
    server = await starting;

    const packets = redPacketsAt(server.url);
    // Just after the recovery the connection to a resumed node may still be reconnecting:
    // the service answers SERVICE_UNAVAILABLE with a retry hint then, and a client retries.
    const response = await waitFor('createRedPacket answered other than SERVICE_UNAVAILABLE', async () => {
      const answer = await packets.raw(CreateRedPacketDocument, { input: { fundedBy: 'SHOP', totalAmount: 300, count: 3, mode: 'EQUAL' } }, 'startup-sender', { admin: true });
      return errorCodes(answer).join() === 'SERVICE_UNAVAILABLE' ? undefined : answer;
    });
    const packet = response.body.data?.createRedPacket;
    if (packet?.__typename !== 'RedPacket') throw new Error(`createRedPacket answered ${JSON.stringify(response.body)}`);
    expect((await packets.grab('startup-grabber', packet.id)).__typename).toBe('GrabbedShare');
  });
});
