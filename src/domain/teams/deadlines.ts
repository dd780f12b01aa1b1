import { randomUUID } from 'node:crypto';
import { redisTimeMs } from '../../infra/redis/time.ts';
import type { TeamCampaign, TeamDeps } from './campaign.ts';
import { type OpenTeam, teamsPastDeadline } from './persistence.ts';

const DEADLINE_BATCH = 100;

/**
 * Fails the teams still OPEN at their deadline: Redis first (no seat can be taken after),
 * then PostgreSQL through the journal, with every member recorded as owed a refund. An
 * operator's cancel fails its activity's teams the same way, having brought their
 * deadlines forward in PostgreSQL; this sweep finishes what a cancel left undone.
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
    for (const team of await teamsPastDeadline(this.deps.prisma, now, DEADLINE_BATCH)) {
      try {
        if (await this.fail(team)) failed++;
      } catch (error) {
        // One team's trouble must not hold up the others; the next sweep tries it again.
        this.deps.log.error({ err: error, teamId: team.teamId, activityId: team.activityId }, 'could not fail an overdue team');
      }
    }
    return failed;
  }

  /**
   * Fails the team if it is still OPEN at its deadline, the sooner of Redis's and
   * PostgreSQL's (`deadline`); resolves once that is committed and published. True if this
   * call failed it.
   */
  async fail({ activityId, teamId, deadline }: OpenTeam): Promise<boolean> {
    this.teams.remember({ activityId, teamId });
    const reply = await this.teams.journaled({ activityId, teamId }, () => this.teams.store.fail(activityId, teamId, randomUUID(), deadline.getTime()));
    if (reply?.kind !== 'failed') return false;
    this.deps.log.info({ teamId, activityId }, 'a team missed its deadline; its members are to be refunded');
    return true;
  }
}
