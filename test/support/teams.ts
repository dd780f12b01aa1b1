import type { App } from '../../src/app.ts';
import type { GroupBuyActivityInput } from '../../src/domain/teams/activities.ts';
import type { TeamState } from '../../src/domain/teams/store.ts';
import {
  ConfirmTeamSeatDocument,
  CreateGroupBuyActivityDocument,
  type CreateGroupBuyActivityInput,
  LockTeamSeatDocument,
  OpenTeamDocument,
  ReleaseTeamSeatDocument,
  TeamDocument,
  type TeamStateFragment,
} from '../gql/generated.ts';
import { requestsAt } from './client.ts';
import { type NotifyBody, sendNotify } from './payments.ts';
import type { As } from './tokens.ts';

/** The operator the tests create activities and confirm seats as. */
export const OPERATOR = 'ops';

/** The terms a test gives a group-buy activity; the rest are generous defaults. */
export type ActivityTerms = Partial<Omit<CreateGroupBuyActivityInput, 'id'>>;

export const GROUP_PRICE_CENTS = 990;

/** Open from an hour ago for a day, with limits no test reaches unless it sets them. */
export function activityInput(id: string, terms: ActivityTerms = {}): CreateGroupBuyActivityInput {
  const now = Date.now();
  return {
    id,
    title: `activity ${id}`,
    priceCents: 1990,
    groupPriceCents: GROUP_PRICE_CENTS,
    capacity: 3,
    lockSeconds: 300,
    formationSeconds: 86_400,
    startsAt: new Date(now - 3_600_000).toISOString(),
    endsAt: new Date(now + 86_400_000).toISOString(),
    maxTeamsPerUser: 1000,
    maxOpenTeamsPerLeader: 1000,
    ...terms,
  };
}

// The activities this test file created, by id, with the terms they were created with;
// every server of a file shares one database.
const created = new Map<string, Promise<string>>();

/** The team operations as one user at a time, against one server. */
export function teamsAt(url: string) {
  const { raw, data } = requestsAt(url);

  /** Creates the activity (as an operator) the first time a test names it; the same terms each time. */
  function activity(activityId: string, terms: ActivityTerms = {}): Promise<void> {
    const key = JSON.stringify(terms, Object.keys(terms).sort());
    let made = created.get(activityId);
    if (!made) {
      made = data(CreateGroupBuyActivityDocument, { input: activityInput(activityId, terms) }, OPERATOR, { admin: true }).then(() => key);
      created.set(activityId, made);
    }
    return made.then((terms) => {
      if (terms !== key) throw new Error(`activity ${activityId} was created with ${terms}, not ${key}: its teams share its terms`);
    });
  }

  return {
    raw,
    activity,
    /** Opens a team of the activity, creating the activity with `terms` first if this client has not. */
    async open(leader: string, { activityId, ...terms }: ActivityTerms & { activityId: string }): Promise<TeamStateFragment> {
      await activity(activityId, terms);
      const opened = (await data(OpenTeamDocument, { input: { activityId } }, leader)).openTeam;
      if (opened.__typename !== 'Team') throw new Error(`openTeam answered ${opened.__typename}`);
      return opened;
    },
    async lock(user: string, teamId: string) {
      return (await data(LockTeamSeatDocument, { teamId }, user)).lockTeamSeat;
    },
    /** An operator's manual confirmation of `user`'s seat. */
    async confirm(user: string, teamId: string, paymentRef: string) {
      return (await data(ConfirmTeamSeatDocument, { teamId, userId: user, paymentRef }, OPERATOR, { admin: true })).confirmTeamSeat;
    },
    /** The way a buyer joins: a seat lock, then the provider's signed notify of its payment. */
    async pay(user: string, teamId: string, notice: Partial<NotifyBody> = {}) {
      const locked = await this.lock(user, teamId);
      if (locked.__typename !== 'SeatLocked') return { locked, notified: null };
      const { paymentRef, amountCents } = locked.payment;
      const notified = await sendNotify(url, { paymentRef, amountCents, status: 'SUCCEEDED', providerTxnId: `txn-${paymentRef}`, ...notice });
      return { locked, notified };
    },
    async release(user: string, teamId: string): Promise<TeamStateFragment> {
      return (await data(ReleaseTeamSeatDocument, { teamId }, user)).releaseTeamSeat;
    },
    async team(viewer: string, id: string, as: As = {}): Promise<TeamStateFragment | null | undefined> {
      return (await data(TeamDocument, { id }, viewer, as)).team;
    },
  };
}

export type TeamsClient = ReturnType<typeof teamsAt>;

/** In-process: creates the activity through the service unless it exists. */
export async function activityInApp(app: App, activityId: string, terms: ActivityTerms = {}): Promise<void> {
  if (await app.teams.activity(activityId)) return;
  const input = activityInput(activityId, terms);
  await app.teams.createActivity(OPERATOR, { ...input, description: '', startsAt: new Date(input.startsAt), endsAt: new Date(input.endsAt) } as GroupBuyActivityInput);
}

/** In-process: opens a team of the activity through the service, creating the activity on first use. */
export async function openInApp(app: App, leader: string, activityId: string, terms: ActivityTerms = {}): Promise<TeamState> {
  await activityInApp(app, activityId, terms);
  return app.teams.open(leader, { activityId });
}
