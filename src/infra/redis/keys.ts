/**
 * Every key of one campaign shares a Redis Cluster hash tag, `{<kind>:<id>}`,
 * so a script that gets several of them still runs on one cluster node.
 */
export function campaignKeys<const Suffix extends string>(kind: string, id: string, suffixes: readonly Suffix[]): Record<Suffix, string> {
  const tag = `{${kind}:${id}}`;
  // Built by assignment, not Object.fromEntries: this runs for every script call, and
  // objects built alike share one shape, which keeps reading them cheap.
  const keys = {} as Record<Suffix, string>;
  for (const suffix of suffixes) keys[suffix] = `${tag}:${suffix}`;
  return keys;
}

/** A campaign's keys stay this long after it ends; later reads rebuild them from PostgreSQL. */
const DEFAULT_RETENTION_AFTER_END_MS = 24 * 3600 * 1000;
const REBUILT_KEYS_MIN_TTL_MS = 3600 * 1000;

/** When a campaign's keys, and the sweeper's watch on its journal, may go. */
export function retainUntil(endsAtMs: number, retentionMs = DEFAULT_RETENTION_AFTER_END_MS): number {
  return endsAtMs + retentionMs;
}

/**
 * The PEXPIREAT for keys written now: never within the hour, or the rebuild of a long
 * finished campaign would vanish before the read that asked for it.
 */
export function keysExpireAt(retainUntilMs: number, nowMs = Date.now()): number {
  return Math.max(retainUntilMs, nowMs + REBUILT_KEYS_MIN_TTL_MS);
}
