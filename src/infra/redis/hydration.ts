import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Scripts } from './scripts.ts';
import { ServiceUnavailableError } from '../../errors.ts';

const LOCK_TTL_MS = 10_000;
const WAIT_STEP_MS = 20;
const WAIT_LIMIT_MS = 5_000;
/** How long "not in PostgreSQL either" is remembered, so a crowd asking for an unknown id waits on no lock. */
const ABSENT_TTL_MS = 1_000;
const ABSENT = 'absent';

/** Retryable: the client is told SERVICE_UNAVAILABLE, not an unexpected error. */
export class HydrationTimeoutError extends ServiceUnavailableError {}

/** The connection and the loaded scripts; every campaign service has both. */
interface LockDeps {
  redis: Redis;
  scripts: Scripts;
}

/**
 * Rebuilds a campaign's Redis keys from PostgreSQL when its `meta` key is missing.
 * One instance takes a short `SET NX PX` lock and runs `rebuild`; the others wait
 * for `meta` to appear. `rebuild` must write every key in one MULTI/EXEC with
 * `meta` included, so scripts never see a half-built campaign.
 *
 * Returns false when the campaign does not exist in PostgreSQL either; that answer is
 * kept for a second, so a storm of requests for an unknown id costs one lookup.
 */
export function hydrate(
  deps: LockDeps,
  keys: { meta: string; hydrating: string },
  rebuild: () => Promise<boolean>,
): Promise<boolean> {
  const { redis } = deps;
  return underLock(
    deps,
    keys.hydrating,
    async () => {
      const found = await rebuild();
      if (!found) await redis.set(keys.hydrating, ABSENT, 'PX', ABSENT_TTL_MS);
      return found;
    },
    async () => {
      if ((await redis.exists(keys.meta)) === 1) return true;
      return (await redis.get(keys.hydrating)) === ABSENT ? false : undefined;
    },
  );
}

/**
 * Runs `task` holding the lock a rebuild takes, so no rebuild runs meanwhile. For a
 * change made in PostgreSQL first and in Redis second, with both writes inside `task`:
 * a rebuild that read PostgreSQL just before the change could otherwise write its older
 * copy over it, and one that read just after could have the change applied twice.
 */
export function withHydrationLock<T>(deps: LockDeps, lockKey: string, task: () => Promise<T>): Promise<T> {
  return underLock(deps, lockKey, task, async () => undefined);
}

/** Waits for the lock and runs `task` under it, unless `settled` answers first. */
async function underLock<T>({ redis, scripts }: LockDeps, lockKey: string, task: () => Promise<T>, settled: () => Promise<T | undefined>): Promise<T> {
  const token = randomUUID();
  const deadline = Date.now() + WAIT_LIMIT_MS;
  while (Date.now() < deadline) {
    const answer = await settled();
    if (answer !== undefined) return answer;
    if ((await redis.set(lockKey, token, 'PX', LOCK_TTL_MS, 'NX')) === 'OK') {
      try {
        // The holder before may have finished between the check above and the SET: a
        // rebuild run again then would overwrite keys that scripts are already changing.
        const settledMeanwhile = await settled();
        if (settledMeanwhile !== undefined) return settledMeanwhile;
        return await task();
      } finally {
        await scripts.run('releaseLock', [lockKey], [token]);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
  }
  throw new HydrationTimeoutError(`timed out waiting for ${lockKey}`);
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
