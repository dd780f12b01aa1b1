import { randomBytes } from 'node:crypto';
import { TEST_PAYMENT_SECRET } from './payments.ts';

export const TEST_JWT_SECRET = 'test-secret-that-is-at-least-32-characters-long';
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/** The cluster project's shared Redis Cluster (test/support/onRedisCluster.ts); unset: the single Redis at TEST_REDIS_URL. */
export function testRedisClusterNodes(): string | undefined {
  return process.env.TEST_REDIS_CLUSTER_NODES || undefined;
}

export interface TestEnv {
  /** The file's own PostgreSQL schema and Redis key prefix, so files run in parallel. */
  schema: string;
  keyPrefix: string;
  vars: Record<string, string>;
}

/** Environment for servers started by one test file. */
export function testEnv(name: string, overrides: Record<string, string> = {}): TestEnv {
  const suffix = randomBytes(3).toString('hex');
  const schema = `t_${name.replace(/\W/g, '_')}_${suffix}`;
  const keyPrefix = `t:${name}:${suffix}:`;
  const url = new URL(TEST_DATABASE_URL);
  url.searchParams.set('schema', schema);
  const clusterNodes = testRedisClusterNodes();
  return {
    schema,
    keyPrefix,
    vars: {
      NODE_ENV: 'test',
      PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      DATABASE_URL: url.toString(),
      REDIS_URL: TEST_REDIS_URL,
      ...(clusterNodes ? { REDIS_CLUSTER_NODES: clusterNodes } : {}),
      REDIS_KEY_PREFIX: keyPrefix,
      JWT_SECRET: TEST_JWT_SECRET,
      PAYMENT_WEBHOOK_SECRET: TEST_PAYMENT_SECRET,
      // The secret is set, so the sandbox is asked for: tests pay as the provider would.
      SANDBOX_PAYMENTS: '1',
      // Storms come from 127.0.0.1, some with hundreds of subscriptions: the limits are tested with their own settings.
      RATE_LIMIT_MUTATIONS: '0',
      RATE_LIMIT_ANONYMOUS: '0',
      RATE_LIMIT_COST: '0',
      RATE_LIMIT_WS_CONNECTIONS: '0',
      WS_CONNECTIONS_PER_ADDRESS: '0',
      SUBSCRIPTIONS_PER_USER: '0',
      SUBSCRIPTIONS_PER_SOCKET: '0',
      ...overrides,
    },
  };
}
