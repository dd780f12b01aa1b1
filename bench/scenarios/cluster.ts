/**
 * The red-packet, lottery and points script storms (the `viaScript` ceilings of their
 * scenarios) on one private redis-server and on a private Redis Cluster of three primaries
 * with a replica each (test/support/redisCluster.ts), in the same run: throughput
 * cluster/single, and what each node's CPU spent per operation (INFO cpu, user + sys,
 * replicas included: replication is part of a write's cost), with the script time inside it
 * (INFO commandstats).
 * Each flow storms `--campaigns` campaigns at once, each its own slot (the points shop is
 * one slot, `{shop}`, whatever the campaigns), through the service's own client (createRedis:
 * auto-pipelined, cluster-aware). Everything listens on 127.0.0.1 and is stopped at the
 * end, or after `--max-seconds` whatever happened.
 * Last, on the cluster, the points shop with one stock bucket against `--buckets`
 * (pointsBuckets.ts: through the service, durable ack, so PostgreSQL is in it too).
 * Options: --ops N (default 30000 per flow and topology), --connections N (default 150),
 * --campaigns N (default 3), --buckets N (default 4), --bucket-redemptions N (default 10000),
 * --max-seconds N (default 900).
 */
import { Redis } from 'ioredis';
import { type RedisClient, connectRedis, createRedis } from '../../src/infra/redis/connection.ts';
import { type RedisCluster, startRedisCluster } from '../../test/support/redisCluster.ts';
import { stopChild } from '../../test/support/redisServer.ts';
import { commandStats, machine, option, printTable, privateRedis } from '../support.ts';
import * as lottery from './lottery.ts';
import * as points from './points.ts';
import { type BucketsComparison, compareBuckets } from './pointsBuckets.ts';
import * as redPacket from './redpacket.ts';

interface Flow {
  name: string;
  operation: string;
  /** One campaign's storm of `ops` operations on `redis`, whose keys all start with `keyPrefix`. */
  storm(redis: RedisClient, keyPrefix: string, ops: number, connections: number, violations: string[]): Promise<unknown>;
}

const FLOWS: Flow[] = [
  { name: 'red packet', operation: 'grab', storm: (redis, _keyPrefix, ops, connections, violations) => redPacket.viaScript(redis, ops, connections, violations) },
  { name: 'lottery', operation: 'draw', storm: (redis, _keyPrefix, ops, connections, violations) => lottery.viaScript(redis, ops, connections, Math.min(ops, 10_000), violations) },
  {
    name: 'points shop',
    operation: 'redemption',
    storm: (redis, keyPrefix, ops, connections, violations) => {
      const users = Math.min(ops, 10_000);
      return points.viaScript(redis, keyPrefix, { redemptions: ops, connections, users, pools: 1, award: points.COST * Math.ceil(ops / users) }, violations);
    },
  },
];

interface Topology {
  name: 'single' | 'cluster';
  /** What createRedis takes to reach it. */
  url: string;
  clusterNodes: string[];
  /** Every node, with a plain connection for INFO and CONFIG. */
  nodes: { label: string; admin: Redis }[];
}

interface NodeCost {
  label: string;
  cpuUsPerOp: number;
  scriptUsPerOp: number;
  callsPerOp: number;
}

interface FlowResult {
  flow: string;
  topology: Topology['name'];
  operations: number;
  perSecond: number;
  nodes: NodeCost[];
}

async function cpuSeconds(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? Number.NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
}

/** Every node of the cluster, primaries first, as `primary :port` / `replica :port of :port`. */
async function clusterNodes(cluster: RedisCluster): Promise<Topology['nodes']> {
  const [host, port] = cluster.nodes.split(',')[0]!.split(':');
  const seed = new Redis(Number(port), host!);
  // CLUSTER NODES: `<id> <ip:port@bus> <flags> <primary id or -> …` per node.
  const described = String(await seed.cluster('NODES'))
    .trim()
    .split('\n')
    .map((line) => {
      const [id, address, flags, primaryId] = line.split(' ');
      return { id: id!, port: Number(address!.split('@')[0]!.split(':')[1]), primary: flags!.includes('master'), primaryId: primaryId! };
    })
    .sort((a, b) => Number(b.primary) - Number(a.primary) || a.port - b.port);
  seed.disconnect();
  const portOf = (id: string) => described.find((node) => node.id === id)?.port;
  return described.map(({ port, primary, primaryId }) => ({
    label: primary ? `primary :${port}` : `replica :${port} of :${portOf(primaryId)}`,
    admin: new Redis(port, '127.0.0.1'),
  }));
}

/** One flow on one topology: `campaigns` storms at once, each on a client of its own (a key prefix is a client's). */
async function stormOn(topology: Topology, flow: Flow, ops: number, connections: number, campaigns: number, violations: string[]): Promise<FlowResult> {
  const clients = await Promise.all(
    Array.from({ length: campaigns }, async (_, c) => {
      const options = { url: topology.url, keyPrefix: `bench:cluster:${flow.operation}:${c}:`, clusterNodes: topology.clusterNodes };
      const redis = createRedis(options, 'bench');
      await connectRedis(redis, options);
      return { redis, keyPrefix: options.keyPrefix };
    }),
  );
  const perCampaign = Math.floor(ops / campaigns);
  const operations = perCampaign * campaigns;
  try {
    await Promise.all(topology.nodes.map(({ admin }) => admin.config('RESETSTAT')));
    const cpuBefore = await Promise.all(topology.nodes.map(({ admin }) => cpuSeconds(admin)));
    const started = performance.now();
    await Promise.all(clients.map(({ redis, keyPrefix }) => flow.storm(redis, keyPrefix, perCampaign, Math.max(1, Math.floor(connections / campaigns)), violations)));
    const seconds = (performance.now() - started) / 1000;
    const nodes = await Promise.all(
      topology.nodes.map(async ({ label, admin }, i) => {
        const cpu = (await cpuSeconds(admin)) - cpuBefore[i]!;
        const scripts = [...(await commandStats(admin)).entries()].filter(([name]) => name === 'evalsha' || name === 'eval' || name === 'fcall');
        const calls = scripts.reduce((sum, [, stat]) => sum + stat.calls, 0);
        const usec = scripts.reduce((sum, [, stat]) => sum + stat.calls * stat.usecPerCall, 0);
        return { label, cpuUsPerOp: (cpu * 1e6) / operations, scriptUsPerOp: usec / operations, callsPerOp: calls / operations };
      }),
    );
    return { flow: `${flow.name} (${flow.operation})`, topology: topology.name, operations, perSecond: operations / seconds, nodes };
  } finally {
    for (const { redis } of clients) redis.disconnect();
  }
}

function printRows(header: string[], rows: string[][], leftColumns: number): void {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [header, ...rows]) console.log(row.map((cell, i) => (i < leftColumns ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  '));
}

export async function run(args: string[]): Promise<void> {
  const ops = option(args, 'ops', 30_000);
  const connections = option(args, 'connections', 150);
  const campaigns = option(args, 'campaigns', 3);
  const maxSeconds = option(args, 'max-seconds', 900);
  console.log(`single Redis against a 3-primary cluster: ${ops} operations per flow and topology over ${campaigns} campaigns, ${connections} connections; ${machine()}`);

  const single = await privateRedis();
  let cluster: RedisCluster | undefined;
  const topologies: Topology[] = [];
  const stop = async () => {
    for (const topology of topologies) for (const { admin } of topology.nodes) admin.disconnect();
    await Promise.all([stopChild(single.process), cluster?.stop()]);
  };
  // Bounded whatever happens: a storm that hangs must not leave six redis-servers behind.
  const watchdog = setTimeout(() => {
    console.error(`cluster bench: still running after ${maxSeconds} s; stopping its Redis servers`);
    void stop().finally(() => process.exit(1));
  }, maxSeconds * 1000);
  const violations: string[] = [];
  const results: FlowResult[] = [];
  let buckets: BucketsComparison | undefined;
  const bucketCount = option(args, 'buckets', 4);
  try {
    cluster = await startRedisCluster();
    topologies.push(
      { name: 'single', url: single.url, clusterNodes: [], nodes: [{ label: `single :${new URL(single.url).port}`, admin: new Redis(single.url) }] },
      { name: 'cluster', url: 'redis://127.0.0.1', clusterNodes: cluster.nodes.split(','), nodes: await clusterNodes(cluster) },
    );
    for (const flow of FLOWS) {
      for (const topology of topologies) results.push(await stormOn(topology, flow, ops, connections, campaigns, violations));
    }
    const redemptions = option(args, 'bucket-redemptions', 10_000);
    buckets = await compareBuckets({ redemptions, connections, users: Math.min(2_000, redemptions), buckets: bucketCount, clusterNodes: cluster.nodes });
    violations.push(...buckets.violations);
  } finally {
    clearTimeout(watchdog);
    await stop();
  }

  console.log();
  printRows(
    ['flow', 'topology', 'node', 'ops', 'ops/s', 'CPU µs/op', 'script µs/op', 'calls/op'],
    results.flatMap((result) =>
      result.nodes.map((node, i) => [
        i === 0 ? result.flow : '',
        i === 0 ? result.topology : '',
        node.label,
        i === 0 ? result.operations.toString() : '',
        i === 0 ? result.perSecond.toFixed(0) : '',
        node.cpuUsPerOp.toFixed(1),
        node.scriptUsPerOp.toFixed(1),
        node.callsPerOp.toFixed(2),
      ]),
    ),
    3,
  );
  console.log();
  const total = (result: FlowResult) => result.nodes.reduce((sum, node) => sum + node.cpuUsPerOp, 0);
  const busiest = (result: FlowResult) => Math.max(...result.nodes.map((node) => node.cpuUsPerOp));
  printRows(
    ['flow', 'ops/s cluster/single', 'CPU µs/op single', 'CPU µs/op cluster (all nodes)', 'busiest cluster node'],
    FLOWS.map((flow) => {
      const [one, many] = results.filter((result) => result.flow.startsWith(flow.name));
      return [one!.flow, (many!.perSecond / one!.perSecond).toFixed(2), total(one!).toFixed(1), total(many!).toFixed(1), busiest(many!).toFixed(1)];
    }),
    1,
  );
  console.log();
  console.log("CPU µs/op: the node process's user + sys CPU (INFO cpu) over the storm, divided by the operations;");
  console.log('script µs/op: its time inside script calls (INFO commandstats). The rest is reading requests, writing replies and replication.');
  if (buckets) {
    console.log();
    printTable([buckets.one, buckets.many]);
    console.log(`points shop on the cluster, ${bucketCount} buckets / 1 = ${buckets.ratio.toFixed(2)}  (${buckets.transfers} stock transfers)`);
  }
  console.log(`invariant violations: ${violations.length}`);
  for (const violation of violations) console.log(`  - ${violation}`);
}
