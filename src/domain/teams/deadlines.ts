import { randomUUID } from 'node:crypto';
import { redisTimeMs } from '../../infra/redis/time.ts';
import type { TeamCampaign, TeamDeps } from './campaign.ts';
import { teamsPastDeadline } from './persistence.ts';

const DEADLINE_BATCH = 100;

/**
 * Fails the teams still OPEN at their deadline: Redis first (no seat can be taken after),
 * then PostgreSQL through the journal, with every member recorded as owed a refund.
 */
export class DeadlineSweeper {
  constructor(
    private readonly deps: TeamDeps,
    private readonly teams: TeamCampaign,
  ) {}

  /** One sweep over the overdue teams PostgreSQL lists; returns how many it failed. */
  async sweep(): Promise<number> {
    const now = new Date(await redisTimeMs(this.deps.redis));
    let failed = 0;
    for (const { id: teamId, activityId } of await teamsPastDeadline(this.deps.prisma, now, DEADLINE_BATCH)) {
      this.teams.remember({ activityId, teamId });
      try {
        const reply = await this.teams.journaled({ activityId, teamId }, () => this.teams.store.fail(activityId, teamId, randomUUID()));
        if (reply?.kind !== 'failed') continue;
        this.deps.log.info({ teamId, activityId }, 'a team missed its deadline; its members are to be refunded');
        failed++;
      } catch (error) {
        // One team's trouble must not hold up the others; the next sweep tries it again.
        this.deps.log.error({ err: error, teamId, activityId }, 'could not fail an overdue team');
      }
    }
    return failed;
  }
}
