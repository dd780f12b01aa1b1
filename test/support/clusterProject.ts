import type { TestProject } from 'vitest/node';
import { startRedisCluster } from './redisCluster.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    /** `host:port,…` of the cluster project's shared Redis Cluster. */
    redisClusterNodes: string;
  }
}

/**
 * The cluster project's global setup (vitest.config.ts): one six-node Redis Cluster for every
 * file of the project, started once (a cluster takes seconds to settle) and handed to the
 * workers; test/support/onRedisCluster.ts points each file's servers and stores at it. Files
 * stay apart by key prefix, as they do on the single Redis.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // No file here fails a node over, and a node starved of CPU for a few seconds under the
  // suite's load must not be counted failed: the storms would meet a failover they do not test.
  const cluster = await startRedisCluster({ nodeTimeoutMs: 15_000 });
  project.provide('redisClusterNodes', cluster.nodes);
  return () => cluster.stop();
}
