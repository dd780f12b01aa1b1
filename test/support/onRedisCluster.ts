import { inject } from 'vitest';

// Runs before each file of the cluster project (vitest.config.ts): testEnv reads this and gives
// the file's servers and stores REDIS_CLUSTER_NODES. An environment variable rather than an
// import of vitest in env.ts, which the benchmarks load outside vitest.
process.env.TEST_REDIS_CLUSTER_NODES = inject('redisClusterNodes');
