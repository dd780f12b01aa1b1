/**
 * The points shop with one bucket against N (POINTS_SHOP_BUCKETS, docs/scaling.md "Hot
 * campaigns across shards"): the same redemption storm on one goods item, through the
 * service in this process with the durable ack, once per setting; prints both and their
 * ratio. On one Redis server every bucket shares its one core, so the ratio shows what
 * bucketing costs there (the stock transfers, the extra reads); with --cluster the buckets
 * spread over the three primaries of a local Redis Cluster (test/support/redisCluster.ts),
 * which on a two-core machine still share the same cores: the figure to read is the cost,
 * the gain needs cores of its own per primary.
 * Options: --redemptions N (default 20000), --connections N (default 200), --users N
 * (default 2000), --buckets N (default 4), --cluster.
 * `npm run bench -- buckets`.
 */
import { createApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/infra/logger.ts';
import { testEnv } from '../../test/support/env.ts';
import { startRedisCluster } from '../../test/support/redisCluster.ts';
import { openStores } from '../../test/support/stores.ts';
import { type Measurement, machine, measureConcurrent, option, perSecond, printTable } from '../support.ts';

const COST = 10;
const SETUP_CONCURRENCY = 50;

export interface BucketsStorm {
  redemptions: number;
  connections: number;
  users: number;
  buckets: number;
  /** REDIS_CLUSTER_NODES, or '' for the one Redis of the tests. */
  clusterNodes: string;
}

export interface BucketsComparison {
  one: Measurement;
  many: Measurement;
  /** Redemptions per second with N buckets over those with one. */
  ratio: number;
  /** Stock transfers the N-bucket storm made. */
  transfers: number;
  violations: string[];
}

/** One storm on a fresh schema and key prefix: every redemption must be granted, none oversold. */
async function storm(shape: BucketsStorm, buckets: number, violations: string[]): Promise<{ measurement: Measurement; transfers: number }> {
  const env = testEnv(`bench_buckets_${buckets}`, { POINTS_SHOP_BUCKETS: String(buckets), ...(shape.clusterNodes ? { REDIS_CLUSTER_NODES: shape.clusterNodes } : {}) });
  const stores = openStores(env);
  const config = loadConfig({ ...env.vars, LOG_LEVEL: 'warn' });
  const app = await createApp(config, createLogger(config.LOG_LEVEL));
  try {
    const goods = await app.points.createGoods('bench', { title: 'bench mug', pointsCost: COST, stock: shape.redemptions, perUserLimit: 0 });
    const userId = (i: number) => `bench-user-${i}`;
    const award = COST * Math.ceil(shape.redemptions / shape.users);
    await measureConcurrent('awards', shape.users, SETUP_CONCURRENCY, (i) => app.points.award({ userId: userId(i), amount: award, reason: 'bench', requestId: `award-${i}` }));
    let granted = 0;
    const measurement = await measureConcurrent(`${buckets} bucket${buckets === 1 ? '' : 's'}, durable ack`, shape.redemptions, shape.connections, async (i) => {
      await app.points.redeem(userId(i % shape.users), goods.id, `storm-${i}`);
      granted++;
    });
    if (granted !== shape.redemptions) violations.push(`${buckets} buckets: ${granted} of ${shape.redemptions} redemptions granted`);
    const { rows } = await stores.sql.query<{ redeemed: number; transfers: number }>(
      'SELECT (SELECT count(*)::int FROM redemption WHERE goods_id = $1) AS redeemed, (SELECT count(*)::int FROM goods_stock_transfer WHERE goods_id = $1) AS transfers',
      [goods.id],
    );
    if (rows[0]!.redeemed !== shape.redemptions) violations.push(`${buckets} buckets: ${rows[0]!.redeemed} durable redemptions of ${shape.redemptions}`);
    return { measurement, transfers: rows[0]!.transfers };
  } finally {
    await app.close();
    await stores.cleanup();
  }
}

/** The same storm with one bucket and with `shape.buckets`. */
export async function compareBuckets(shape: BucketsStorm): Promise<BucketsComparison> {
  const violations: string[] = [];
  const one = await storm(shape, 1, violations);
  const many = await storm(shape, shape.buckets, violations);
  return { one: one.measurement, many: many.measurement, ratio: perSecond(many.measurement) / perSecond(one.measurement), transfers: many.transfers, violations };
}

export async function run(args: string[]): Promise<void> {
  const redemptions = option(args, 'redemptions', 20_000);
  const shape = {
    redemptions,
    connections: option(args, 'connections', 200),
    users: Math.min(option(args, 'users', 2_000), redemptions),
    buckets: option(args, 'buckets', 4),
    clusterNodes: '',
  };
  const cluster = args.includes('--cluster') ? await startRedisCluster() : undefined;
  try {
    shape.clusterNodes = cluster?.nodes ?? '';
    console.log(
      `points shop buckets: ${shape.redemptions} redemptions of one item by ${shape.users} users, ${shape.connections} in flight, 1 bucket against ${shape.buckets}, ${cluster ? 'local Redis Cluster (3 primaries)' : 'one Redis'}; ${machine()}`,
    );
    const result = await compareBuckets(shape);
    console.log();
    printTable([result.one, result.many]);
    console.log();
    console.log(`${shape.buckets} buckets / 1 = ${result.ratio.toFixed(2)}  (${result.transfers} stock transfers)`);
    console.log(`invariant violations: ${result.violations.length}`);
    for (const violation of result.violations) console.log(`  - ${violation}`);
  } finally {
    await cluster?.stop();
  }
}
