import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stopChild } from './redisServer.ts';

const run = promisify(execFile);
const NODES = 6;
/** Redis Cluster talks to its peers on the port plus this: both must be free. */
const BUS_OFFSET = 10_000;

export interface RedisCluster {
  /** `host:port,…` of every node, as REDIS_CLUSTER_NODES takes it. */
  nodes: string;
  stop(): Promise<void>;
}

async function isFree(port: number): Promise<boolean> {
  const server = createServer();
  const listening = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => resolve(true));
  });
  if (listening) await new Promise<void>((resolve) => server.close(() => resolve()));
  return listening;
}

/** Below Linux's ephemeral range (32768 up), port and bus port both: see freeClusterPort. */
const LOWEST_PORT = 20_000;
const PORT_CHOICES = 32_768 - BUS_OFFSET - LOWEST_PORT;

/**
 * A free port whose bus port is free too. Both sit below the ephemeral range, where the
 * storms' own client sockets would otherwise take a port between this check and the bind.
 */
async function freeClusterPort(taken: Set<number>): Promise<number> {
  for (;;) {
    const port = LOWEST_PORT + randomInt(PORT_CHOICES);
    if (!taken.has(port) && (await isFree(port)) && (await isFree(port + BUS_OFFSET))) {
      taken.add(port);
      return port;
    }
  }
}

/** A node on a free port, trying another when a parallel file's node took it first. */
async function startNodeOnFreePort(taken: Set<number>, nodeTimeoutMs: number): Promise<{ port: number; dir: string; child: ChildProcess }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freeClusterPort(taken);
    const dir = mkdtempSync(join(tmpdir(), `redis-cluster-${port}-`));
    try {
      return { port, dir, child: await startNode(port, dir, nodeTimeoutMs) };
    } catch (error) {
      rmSync(dir, { recursive: true, force: true });
      if (attempt === 5 || !(error as Error).message.includes('Address already in use')) throw error;
    }
  }
}

function startNode(port: number, dir: string, nodeTimeoutMs: number): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--cluster-enabled',
      'yes',
      '--cluster-node-timeout',
      String(nodeTimeoutMs),
      '--repl-diskless-sync-delay',
      '0',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'no',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server :${port} did not start:\n${output}`)), 10_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('Ready to accept connections')) {
        clearTimeout(timer);
        child.stdout!.off('data', onData);
        resolve(child);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server :${port} exited with ${code}:\n${output}`));
    });
  });
}

/**
 * The node says cluster_state:ok and knows all six nodes, connected, three of them
 * replicas. Until every node knows every replica, clients reading the slot map from
 * different nodes group slots differently, and ioredis refuses its auto-pipelines
 * ("All keys in the pipeline should belong to the same slots allocation group").
 * A replica must also have synced with its primary (at once: no diskless-sync delay).
 */
async function settled(port: number): Promise<boolean> {
  const { stdout: info } = await run('redis-cli', ['-p', String(port), 'CLUSTER', 'INFO']);
  if (!info.includes('cluster_state:ok')) return false;
  const { stdout: nodes } = await run('redis-cli', ['-p', String(port), 'CLUSTER', 'NODES']);
  const lines = nodes.trim().split('\n');
  const { stdout: replication } = await run('redis-cli', ['-p', String(port), 'INFO', 'replication']);
  return (
    lines.length === NODES &&
    lines.every((line) => line.includes(' connected') && !/handshake|fail|noaddr/.test(line)) &&
    lines.filter((line) => line.includes('slave')).length === NODES / 2 &&
    // A replica that never synced counts its data as too old to take over from its primary.
    (replication.includes('role:master') || replication.includes('master_link_status:up'))
  );
}

/**
 * Six redis-servers (three primaries, a replica each) made one cluster, each node in
 * its own temporary folder, returned once every node agrees on the whole cluster. Started in a test file's beforeAll, stopped in its afterAll.
 * `nodeTimeoutMs` (cluster-node-timeout): how long a node may not answer before the others
 * count it failed; short, so failover tests see a replica take over in seconds.
 */
export async function startRedisCluster({ nodeTimeoutMs = 2_000 } = {}): Promise<RedisCluster> {
  const taken = new Set<number>();
  const nodes: { port: number; dir: string; child: ChildProcess }[] = [];
  const stop = async () => {
    await Promise.all(nodes.map(({ child }) => stopChild(child)));
    for (const { dir } of nodes) rmSync(dir, { recursive: true, force: true });
  };
  try {
    // One at a time, so no two nodes of this cluster race for a port.
    for (let i = 0; i < NODES; i++) nodes.push(await startNodeOnFreePort(taken, nodeTimeoutMs));
    const ports = nodes.map(({ port }) => port);
    const addresses = ports.map((port) => `127.0.0.1:${port}`);
    await run('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '1', '--cluster-yes']);
    const deadline = Date.now() + 20_000;
    while (!(await Promise.all(ports.map(settled))).every(Boolean)) {
      if (Date.now() > deadline) throw new Error('the Redis cluster did not settle (cluster_state:ok, every node knowing every replica) in 20 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return { nodes: addresses.join(','), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** One line of CLUSTER NODES: a node, what it is, and the slots it serves. */
export interface ClusterNode {
  id: string;
  /** `host:port`. */
  address: string;
  port: number;
  primary: boolean;
  /** The primary's id, for a replica. */
  primaryId: string | null;
  /** Flagged `fail` or `fail?` by the node asked. */
  failing: boolean;
  /** Inclusive slot ranges. */
  slots: [number, number][];
}

async function cli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-p', String(port), ...args]);
  return stdout.trim();
}

const portOf = (address: string) => Number(address.slice(address.lastIndexOf(':') + 1));

/** The cluster as the node at `port` sees it. */
export async function clusterNodes(port: number): Promise<ClusterNode[]> {
  return (await cli(port, 'CLUSTER', 'NODES')).split('\n').map((line) => {
    const [id, address, flags, primaryId, , , , , ...slots] = line.split(' ');
    const hostPort = address!.split('@')[0]!;
    return {
      id: id!,
      address: hostPort,
      port: portOf(hostPort),
      primary: flags!.includes('master'),
      primaryId: primaryId === '-' ? null : primaryId!,
      failing: /\bfail\??\b/.test(flags!),
      slots: slots.filter((slot) => !slot.startsWith('[')).map((slot) => (slot.includes('-') ? (slot.split('-').map(Number) as [number, number]) : [Number(slot), Number(slot)])),
    };
  });
}

/** The slot of a key (its hash tag decides, whatever the key prefix before it), asked of the node at `askPort`. */
export async function slotOf(askPort: number, key: string): Promise<number> {
  return Number(await cli(askPort, 'CLUSTER', 'KEYSLOT', key));
}

/** The primary serving `slot` and its replicas, as the node at `askPort` sees them. */
export async function ownersOf(askPort: number, slot: number): Promise<{ primary: ClusterNode; replicas: ClusterNode[] }> {
  const nodes = await clusterNodes(askPort);
  const primary = nodes.find((node) => node.primary && !node.failing && node.slots.some(([from, to]) => from <= slot && slot <= to));
  if (!primary) throw new Error(`no live primary serves slot ${slot} (asked :${askPort})`);
  return { primary, replicas: nodes.filter((node) => node.primaryId === primary.id && !node.failing) };
}

/**
 * The pid of the redis-server at `port`, to signal it: SIGKILL for a crash, SIGSTOP and
 * SIGCONT to freeze a node and let it go on, as a stalled machine would. Asked before the
 * node is stopped, since a stopped node answers nothing.
 */
export async function pidOf(port: number): Promise<number> {
  return Number(/process_id:(\d+)/.exec(await cli(port, 'INFO', 'server'))![1]);
}

/** Whether the replica at `port` has every write its primary at `primaryPort` made so far. */
export async function replicaCaughtUp(primaryPort: number, port: number): Promise<boolean> {
  const offset = (info: string, field: string) => Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? -1);
  const primaryOffset = offset(await cli(primaryPort, 'INFO', 'replication'), 'master_repl_offset');
  return offset(await cli(port, 'INFO', 'replication'), 'slave_repl_offset') === primaryOffset;
}

/**
 * Closes the primary's connections to its replicas. With its replica stopped (SIGSTOP),
 * writes from now on reach no replica: bytes already sent would still sit in the stopped
 * replica's socket buffer and be applied when it goes on.
 */
export async function cutReplication(primaryPort: number): Promise<void> {
  await cli(primaryPort, 'CLIENT', 'KILL', 'TYPE', 'replica');
}

/** Makes the replica at `port` a primary now, without its primary's consent (CLUSTER FAILOVER TAKEOVER): its primary is gone. */
export async function takeOver(port: number): Promise<void> {
  const reply = await cli(port, 'CLUSTER', 'FAILOVER', 'TAKEOVER');
  if (reply !== 'OK') throw new Error(`CLUSTER FAILOVER TAKEOVER on :${port}: ${reply}`);
}

/** Whether every node but `dead` agrees that the node at `port` is the live primary of `slot`. */
export async function servesSlot(cluster: RedisCluster, port: number, slot: number, dead: number[]): Promise<boolean> {
  const asked = cluster.nodes
    .split(',')
    .map(portOf)
    .filter((node) => !dead.includes(node));
  const views = await Promise.all(asked.map((node) => ownersOf(node, slot).catch(() => undefined)));
  return views.every((view) => view?.primary.port === port);
}
