import { ConfirmTeamSeatDocument, LockTeamSeatDocument, OpenTeamDocument, type OpenTeamInput, ReleaseTeamSeatDocument, TeamDocument, type TeamStateFragment } from '../gql/generated.ts';
import { requestsAt } from './client.ts';
import type { As } from './tokens.ts';

/** The team operations as one user at a time, against one server. */
export function teamsAt(url: string) {
  const { raw, data } = requestsAt(url);
  return {
    raw,
    async open(leader: string, input: Partial<OpenTeamInput> & { activityId: string }): Promise<TeamStateFragment> {
      return (await data(OpenTeamDocument, { input }, leader)).openTeam;
    },
    async lock(user: string, teamId: string) {
      return (await data(LockTeamSeatDocument, { teamId }, user)).lockTeamSeat;
    },
    async confirm(user: string, teamId: string, paymentRef: string) {
      return (await data(ConfirmTeamSeatDocument, { teamId, paymentRef }, user)).confirmTeamSeat;
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
