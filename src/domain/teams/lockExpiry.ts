import { randomUUID } from 'node:crypto';
import { groupBy } from '../../infra/collections.ts';
import type { RedisClient } from '../../infra/redis/connection.ts';
import { redisTimeMs } from '../../infra/redis/time.ts';
import type { TeamCampaign, TeamDeps } from './campaign.ts';
import { type TeamRef, activityKeys } from './store.ts';

/** Activities with teams whose locks the expiry sweeper watches: activityId -> until (ms). */
const ACTIVITY_REGISTRY = 'teams:activities';
const EXPIRY_BATCH = 500;

/** Has the sweeper watch the activity's locks until `untilMs` at least; done whenever a team's keys are written. */
export async function watchActivity(redis: RedisClient, activityId: string, untilMs: number): Promise<void> {
  await redis.zadd(ACTIVITY_REGISTRY, 'GT', untilMs, activityId);
}

/**
 * Frees the seats of locks that ran out, without waiting for anyone to ask, and announces
 * it. Each activity keeps an index of its locks by expiry; the expire script re-checks
 * each team against Redis TIME, whatever the index said.
 */
export class LockExpirySweeper {
  constructor(
    private readonly deps: TeamDeps,
    private readonly teams: TeamCampaign,
  ) {}

  /** One sweep over every watched activity; returns the locks it expired. */
  async sweep(): Promise<number> {
    const nowMs = await redisTimeMs(this.deps.redis);
    const registered = await this.deps.redis.zrange(ACTIVITY_REGISTRY, 0, -1, 'WITHSCORES');
    const activities: { activityId: string; until: number }[] = [];
    for (let i = 0; i < registered.length; i += 2) activities.push({ activityId: registered[i]!, until: Number(registered[i + 1]) });
    // Not one pipeline: on a cluster the activities lie on several nodes. Auto-pipelining
    // still sends these in one write per node.
    const dueByActivity = await Promise.all(activities.map(({ activityId }) => this.deps.redis.zrangebyscore(activityKeys(activityId).expiries, '-inf', nowMs, 'LIMIT', 0, EXPIRY_BATCH)));

    const expirations: Promise<number>[] = [];
    for (const [index, { activityId, until }] of activities.entries()) {
      const entries = dueByActivity[index]!;
      if (entries.length === 0) {
        if (until < nowMs) await this.unwatch(activityId);
        continue;
      }
      // Entries are "<teamId>:<userId>"; team ids are UUIDs, user ids may hold anything.
      const byTeam = groupBy(entries, (entry) => entry.slice(0, entry.indexOf(':')));
      for (const [teamId, ofTeam] of byTeam) {
        const users = ofTeam.map((entry) => entry.slice(teamId.length + 1));
        expirations.push(this.expire({ activityId, teamId }, users));
      }
    }
    const counts = await Promise.all(expirations);
    return counts.reduce((a, b) => a + b, 0);
  }

  /** A team whose keys are gone has no locks left: the script drops its index entries, and nothing is rebuilt. */
  private async expire({ activityId, teamId }: TeamRef, dueUsers: string[]): Promise<number> {
    const reply = await this.teams.journaled({ activityId, teamId }, () => this.teams.store.expire(activityId, teamId, randomUUID(), dueUsers));
    return reply?.kind === 'expired' ? reply.count : 0;
  }

  /** Stops watching an activity past its retention once no lock of it is left. */
  private async unwatch(activityId: string): Promise<void> {
    if ((await this.deps.redis.zcard(activityKeys(activityId).expiries)) === 0) {
      await this.deps.redis.zrem(ACTIVITY_REGISTRY, activityId);
    }
  }
}
