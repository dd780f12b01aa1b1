import {
  ConfirmTeamSeatDocument,
  LockTeamSeatDocument,
  OpenTeamDocument,
  type OpenTeamInput,
  ReleaseTeamSeatDocument,
  TeamDocument,
  type TeamStateFragment,
} from '../gql/generated.ts';
import { gql, gqlData, tokenFor } from './client.ts';

const tokens = new Map<string, Promise<string>>();

/** A signed token per user id, minted once. */
export function tokenOf(userId: string, options: { admin?: boolean } = {}): Promise<string> {
  const key = `${userId}\u0000${options.admin ? 'admin' : ''}`;
  let token = tokens.get(key);
  if (!token) {
    token = tokenFor(userId, options);
    tokens.set(key, token);
  }
  return token;
}

/** The team operations as one user at a time, against one server. */
export function teamsAt(url: string) {
  return {
    async open(leader: string, input: Partial<OpenTeamInput> & { activityId: string }): Promise<TeamStateFragment> {
      return (await gqlData(url, OpenTeamDocument, { input }, await tokenOf(leader))).openTeam;
    },
    async lock(user: string, teamId: string) {
      return (await gqlData(url, LockTeamSeatDocument, { teamId }, await tokenOf(user))).lockTeamSeat;
    },
    async confirm(user: string, teamId: string, paymentRef: string) {
      return (await gqlData(url, ConfirmTeamSeatDocument, { teamId, paymentRef }, await tokenOf(user))).confirmTeamSeat;
    },
    async release(user: string, teamId: string): Promise<TeamStateFragment> {
      return (await gqlData(url, ReleaseTeamSeatDocument, { teamId }, await tokenOf(user))).releaseTeamSeat;
    },
    async team(viewer: string, id: string, options: { admin?: boolean } = {}): Promise<TeamStateFragment | null | undefined> {
      return (await gqlData(url, TeamDocument, { id }, await tokenOf(viewer, options))).team;
    },
    /** The raw response, errors included. */
    async raw<T, V>(document: Parameters<typeof gql<T, V>>[1], variables: V, user?: string) {
      return gql(url, document, variables, user ? await tokenOf(user) : undefined);
    },
  };
}
