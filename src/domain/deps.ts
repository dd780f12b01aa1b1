import type { PrismaClient } from '../generated/prisma/client.ts';
import type { Journal } from '../infra/journal/journal.ts';
import type { Logger } from '../infra/logger.ts';
import type { RedisClient } from '../infra/redis/connection.ts';
import type { LiveEvents } from '../infra/redis/pubsub.ts';
import type { Scripts } from '../infra/redis/scripts.ts';
import type { RandomSource } from './random.ts';

/** What every campaign service is built from: the shared core each flow runs on. */
export interface CampaignDeps {
  prisma: PrismaClient;
  redis: RedisClient;
  scripts: Scripts;
  journal: Journal;
  events: LiveEvents;
  log: Logger;
  /** Node's crypto unless a test replays chosen numbers. */
  random?: RandomSource;
  /** TEST_LOCK_TTL_MS: the lease of the locks rebuilds and changes take (src/infra/campaign/rebuild.ts). */
  lockTtlMs?: number;
}
