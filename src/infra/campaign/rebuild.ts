import { randomUUID } from 'node:crypto';
import { ServiceUnavailableError } from '../../domain/errors.ts';
import { campaignRebuilds } from '../metrics.ts';
import type { RedisClient } from '../redis/connection.ts';
import { type Scripts, defineScript } from '../redis/scripts.ts';

/** How long a lock outlives a holder that died: its campaign waits that long, at most. */
const LOCK_TTL_MS = 10_000;
const WAIT_STEP_MS = 20;
const WAIT_LIMIT_MS = 5_000;
/** How long "not in PostgreSQL either" is remembered, so a crowd asking for an unknown id waits on no lock. */
const ABSENT_TTL_MS = 1_000;
const ABSENT = 'absent';

const releaseLock = defineScript('releaseLock', ['lock'], { released: () => ({}), notHeld: () => ({}) });
const renewLock = defineScript('renewLock', ['lock'], { renewed: () => ({}), notHeld: () => ({}) });

/** Retryable: the client is told SERVICE_UNAVAILABLE, not an unexpected error. */
export class RebuildTimeoutError extends ServiceUnavailableError {}

/** The connection and the loaded scripts; every campaign has both. */
export interface LockDeps {
  redis: RedisClient;
  scripts: Scripts;
  /** Tests only: the lease, LOCK_TTL_MS unless set (a crash test's dead process holds its locks that long). */
  lockTtlMs?: number;
}

/** The two keys a rebuild needs: the one whose absence calls for it, and its lock. */
export interface RebuildKeys {
  meta: string;
  rebuilding: string;
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
export function rebuildOnce(deps: LockDeps, keys: RebuildKeys, rebuild: () => Promise<boolean>): Promise<boolean> {
  const { redis } = deps;
  return underLock(
    deps,
    keys.rebuilding,
    async () => {
      campaignRebuilds.inc();
      const found = await rebuild();
      if (!found) await redis.set(keys.rebuilding, ABSENT, 'PX', ABSENT_TTL_MS);
      return found;
    },
    async () => {
      if ((await redis.exists(keys.meta)) === 1) return true;
      return (await redis.get(keys.rebuilding)) === ABSENT ? false : undefined;
    },
  );
}

/**
 * Runs `task` holding the lock a rebuild takes, so no rebuild runs meanwhile. For a
 * change made in PostgreSQL first and in Redis second, with both writes inside `task`:
 * a rebuild that read PostgreSQL just before the change could otherwise write its older
 * copy over it, and one that read just after could have the change applied twice.
 * `answered`, asked before each try for the lock, lets a waiter go once another holder's
 * task did what it needed.
 */
export function underRebuildLock<T>(deps: LockDeps, lockKey: string, task: () => Promise<T>, answered: () => Promise<T | undefined> = async () => undefined): Promise<T> {
  return underLock(deps, lockKey, task, answered);
}

/** Waits for the lock and runs `task` under it, unless `answered` has an answer first. */
async function underLock<T>({ redis, scripts, lockTtlMs = LOCK_TTL_MS }: LockDeps, lockKey: string, task: () => Promise<T>, answered: () => Promise<T | undefined>): Promise<T> {
  const token = randomUUID();
  const deadline = Date.now() + WAIT_LIMIT_MS;
  while (Date.now() < deadline) {
    const answer = await answered();
    if (answer !== undefined) return answer;
    if ((await redis.set(lockKey, token, 'PX', lockTtlMs, 'NX')) === 'OK') {
      // Renewed three times per lease, so a holder that runs long (a large rebuild, a change
      // under a storm) keeps it. A failed renewal is left to the next one: the lease outlasts two of them.
      const renewal = setInterval(() => {
        scripts.call(renewLock, { lock: lockKey }, [token, lockTtlMs]).catch(() => {});
      }, lockTtlMs / 3);
      try {
        // The holder before may have finished between the check above and the SET: a
        // rebuild run again then would overwrite keys that scripts are already changing.
        const answeredMeanwhile = await answered();
        if (answeredMeanwhile !== undefined) return answeredMeanwhile;
        return await task();
      } finally {
        clearInterval(renewal);
        await scripts.call(releaseLock, { lock: lockKey }, [token]);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
  }
  // The key stays out of the message: clients read it, and it names the service's internals.
  throw new RebuildTimeoutError("this campaign is busy with a rebuild or an operator's change; try again");
}
