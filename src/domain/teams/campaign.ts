import { Campaign, type Missing } from '../../infra/campaign/campaign.ts';
import type { JournalEntry } from '../../infra/journal/journal.ts';
import { retainUntil } from '../../infra/redis/keys.ts';
import type { CampaignDeps } from '../deps.ts';
import { ServiceUnavailableError } from '../errors.ts';
import { NotFound } from '../problems.ts';
import { GroupBuyActivities } from './activities.ts';
import { watchActivity } from './lockExpiry.ts';
import { activityOfTeam, loadSnapshot, seatsJournalKind, teamsChangedBy } from './persistence.ts';
import { type TeamRef, type TeamSnapshot, type TeamState, TeamStore, teamKeys } from './store.ts';

export type TeamDeps = Omit<CampaignDeps, 'random'>;

const ACTIVITY_CACHE_MAX = 100_000;

/**
 * Group-buy teams on the campaign runtime. A team is one campaign, named by its activity
 * and its id: its keys are its own, but every team of an activity journals to the
 * activity's stream, so that one script can move a lock between two of them. The
 * commands and both sweepers share this.
 */
export class TeamCampaign {
  readonly store: TeamStore;
  readonly groupBuys: GroupBuyActivities;
  readonly runtime: Campaign<TeamRef, TeamSnapshot, TeamState>;
  /** teamId -> activityId; a team never changes activity, so entries never go stale. */
  private readonly activities = new Map<string, string>();

  constructor(private readonly deps: TeamDeps) {
    this.store = new TeamStore(deps.redis, deps.scripts);
    this.groupBuys = new GroupBuyActivities(deps);
    this.runtime = new Campaign(deps, {
      name: 'team',
      keys: ({ activityId, teamId }) => teamKeys(activityId, teamId),
      load: ({ teamId }) => loadSnapshot(deps.prisma, teamId),
      write: async (snapshot) => {
        await watchActivity(deps.redis, snapshot.activityId, retainUntil(snapshot.deadline.getTime()));
        await this.store.write(snapshot);
      },
      retainUntilMs: (snapshot) => retainUntil(snapshot.deadline.getTime()),
      live: {
        topic: ({ teamId }) => `team:${teamId}`,
        // One transaction of Redis reads (members, locks and version together), published
        // after the change's commit, so the last event is the durable state.
        state: (ref) => this.read(ref),
        versionOf: (state) => state.version,
        isFinal: (state) => state.status !== 'OPEN',
        // Nothing is published at the deadline (the sweeper fails the team up to a sweep
        // later): every instance with watchers reloads then, and reads it FAILED.
        changesIn: (state) => (state.status === 'OPEN' ? Date.parse(state.deadline) - Date.parse(state.serverTime) : null),
        changedBy: teamsChangedBy,
      },
    });
    // A change PostgreSQL turned down took a seat (and maybe moved a lock) in Redis.
    this.runtime.persistsWith(seatsJournalKind, teamsChangedBy);
  }

  /** The team's campaign id, its activity looked up once; null if there is no such team. */
  async refOf(teamId: string): Promise<TeamRef | null> {
    const cached = this.activities.get(teamId);
    if (cached) return { activityId: cached, teamId };
    const activityId = await activityOfTeam(this.deps.prisma, teamId);
    if (!activityId) return null;
    this.remember({ activityId, teamId });
    return { activityId, teamId };
  }

  remember({ activityId, teamId }: TeamRef): void {
    if (this.activities.size >= ACTIVITY_CACHE_MAX) this.activities.delete(this.activities.keys().next().value!);
    this.activities.set(teamId, activityId);
  }

  /**
   * A team script's call, its change committed to PostgreSQL and published to every team
   * it changed before it is answered (the activity's keys and the team's rebuilt while they
   * are missing). Null if the team, or its activity, does not exist.
   */
  journaled<Reply extends { kind: string; entry?: JournalEntry | null }>(ref: TeamRef, call: () => Promise<Reply | Missing>) {
    return this.runtime.journaled(ref, {
      call,
      rebuild: async () => (await this.groupBuys.install(ref.activityId)) && this.runtime.rebuild(ref),
      entryOf: (reply) => reply.entry ?? null,
      unavailable: () => new ServiceUnavailableError('the team is being rebuilt; try again'),
    });
  }

  /** The team from Redis, rebuilt from PostgreSQL if its keys are gone; null if it does not exist. */
  read(ref: TeamRef): Promise<TeamState | null> {
    return this.runtime.read(ref, () => this.store.readState(ref.activityId, ref.teamId));
  }

  /** For a team known to exist: its keys may have gone since, so a rebuild may be needed. */
  async mustRead(ref: TeamRef): Promise<TeamState> {
    const state = await this.read(ref);
    if (!state) throw new NotFound('team', ref.teamId);
    return state;
  }
}
