import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

/**
 * The files run a second time on a Redis Cluster: every flow's storms, crashes and Redis
 * losses, and its live events (sharded pub/sub). Input validation and single-request
 * behaviour do not depend on where keys live, and would only lengthen CI.
 */
const ON_CLUSTER = [
  // red packets and the wallets they are paid from
  'redPackets.storm',
  'redPackets.crash',
  'redPackets.recovery',
  'redPackets.money',
  'redPackets.subscriptions',
  // group-buy teams
  'teams.contention',
  'teams.expiry',
  'teams.instances',
  // lotteries, free and paid, and their settlement sweeps
  'lottery.storm',
  'lottery.recovery',
  'lottery.winners',
  'lottery.paidStorm',
  'lottery.paidCrash',
  // the points shop
  'points.storm',
  'points.recovery',
  'points.redemptionUpdated',
  // payments and refunds into wallets
  'payments.storm',
  'refunds.delivery',
  // subscriptions of every kind
  'subscriptions.completion',
  'subscriptions.release',
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
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'redis', include: ['test/**/*.test.ts'] } },
      {
        extends: true,
        test: {
          name: 'cluster',
          include: ON_CLUSTER,
          // One six-node cluster for the whole project, each file on its own key prefix.
          globalSetup: ['test/support/clusterProject.ts'],
          setupFiles: ['test/support/onRedisCluster.ts'],
        },
      },
    ],
  },
});
