import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';

const LOCK_TTL_MS = 10_000;
const WAIT_STEP_MS = 20;
const WAIT_LIMIT_MS = 5_000;

export class HydrationTimeoutError extends Error {}

/**
 * Rebuilds a campaign's Redis keys from PostgreSQL when its `meta` key is missing.
 * One instance takes a short `SET NX PX` lock and runs `rebuild`; the others wait
 * for `meta` to appear. `rebuild` must write every key in one MULTI/EXEC with
 * `meta` included, so scripts never see a half-built campaign.
 *
 * Returns false when the campaign does not exist in PostgreSQL either.
 */
export async function hydrate(
  redis: Redis,
  keys: { meta: string; hydrating: string },
  rebuild: () => Promise<boolean>,
): Promise<boolean> {
  const token = randomUUID();
  const deadline = Date.now() + WAIT_LIMIT_MS;
  while (Date.now() < deadline) {
    if ((await redis.exists(keys.meta)) === 1) return true;
    if ((await redis.set(keys.hydrating, token, 'PX', LOCK_TTL_MS, 'NX')) === 'OK') {
      try {
        return await rebuild();
      } finally {
        // Only release our own lock; after LOCK_TTL_MS another instance may hold it.
        if ((await redis.get(keys.hydrating)) === token) await redis.del(keys.hydrating);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
  }
  throw new HydrationTimeoutError(`timed out waiting for ${keys.meta} to be rebuilt`);
}

const REBUILD_ATTEMPTS = 3;

/**
 * Runs a script call that answers `{ kind: 'missing' }` when the campaign's keys are
 * gone; rebuilds the campaign from PostgreSQL and calls again. Resolves with null
 * when the campaign does not exist at all.
 */
export async function withRebuild<Reply extends { kind: string }>(
  call: () => Promise<Reply>,
  rebuild: () => Promise<boolean>,
): Promise<Exclude<Reply, { kind: 'missing' }> | null> {
  for (let attempt = 1; attempt <= REBUILD_ATTEMPTS; attempt++) {
    const reply = await call();
    if (reply.kind !== 'missing') return reply as Exclude<Reply, { kind: 'missing' }>;
    if (!(await rebuild())) return null;
  }
  throw new HydrationTimeoutError('campaign keys vanished again right after each rebuild');
}
