import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { teamKeys } from '../src/domain/teams/store.ts';
import { signToken } from '../src/infra/auth/tokens.ts';
import {
  ConfirmTeamSeatDocument,
  LockTeamSeatDocument,
  OpenTeamDocument,
  type OpenTeamInput,
  ReleaseTeamSeatDocument,
  TeamDocument,
  TeamStatusDocument,
  TeamsDocument,
} from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql, subscribeSse, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores, stateKeys } from './support/stores.ts';
import { OPERATOR, type TeamsClient, teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('tm_input');
let server: ServerProcess;
let stores: Stores;
let teams: TeamsClient;
/** The caller of the requests that are refused for their input. */
const USER = 'input-user';
/** A live team with a member and a lock, which refused requests must leave alone. */
let teamId: string;
const ACTIVITY = 'input-activity';

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
  teams = teamsAt(server.url);
  teamId = (await teams.open('input-leader', { activityId: ACTIVITY, capacity: 4 })).id;
  expect((await teams.confirm('input-member', teamId, 'input-pay')).__typename).toBe('Team');
  expect((await teams.lock('input-locker', teamId)).__typename).toBe('SeatLocked');
});

afterAll(async () => {
  await server?.stop();
  await stores?.cleanup();
});

/** Everything a request could change: rows of every team table, every Redis key under the prefix, the live team's keys. */
async function state() {
  const counts = await Promise.all(
    ['team', 'team_member', 'team_seat_event', 'payment', 'refund', 'group_buy_activity'].map(
      async (table) => (await stores.sql.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`)).rows[0]!.n,
    ),
  );
  const keys = await stateKeys(stores.redis, env.keyPrefix);
  const live = teamKeys(ACTIVITY, teamId);
  return {
    counts,
    keys,
    meta: await stores.redis.hgetall(live.meta),
    members: await stores.redis.hgetall(live.members),
    locks: await stores.redis.zrange(live.locks, 0, -1, 'WITHSCORES'),
  };
}

async function unchanged<T>(request: () => Promise<T>): Promise<T> {
  const before = await state();
  const result = await request();
  expect(await state()).toEqual(before);
  return result;
}

describe('malformed input is BAD_USER_INPUT and changes nothing', () => {
  const badInputs: [string, Record<string, unknown>][] = [
    // The activity sets the terms; the caller may not.
    ['a capacity', { activityId: ACTIVITY, capacity: 3 }],
    ['a lockSeconds', { activityId: ACTIVITY, lockSeconds: 60 }],
    ['a formationSeconds', { activityId: ACTIVITY, formationSeconds: 60 }],
    ['an empty activityId', { activityId: '' }],
    ['an activityId with a brace', { activityId: '{tm:x}' }],
    ['an activityId with a space', { activityId: 'a b' }],
    ['an activityId of 65 characters', { activityId: 'x'.repeat(65) }],
    ['no activityId', {}],
    ['a null activityId', { activityId: null }],
    ['a number for activityId', { activityId: 2.5 }],
    ['an unknown field', { activityId: 'a', discount: 5 }],
    ['an empty requestId', { activityId: ACTIVITY, requestId: '' }],
    ['a requestId of 129 characters', { activityId: ACTIVITY, requestId: 'r'.repeat(129) }],
    ['a requestId with a NUL', { activityId: ACTIVITY, requestId: 'a\u0000b' }],
    ['a requestId with a lone surrogate', { activityId: ACTIVITY, requestId: 'a\uD800b' }],
    ['a number for requestId', { activityId: ACTIVITY, requestId: 5 }],
  ];

  it.each(badInputs)('openTeam with %s', async (_name, input) => {
    const response = await unchanged(() => teams.raw(OpenTeamDocument, { input: input as unknown as OpenTeamInput }, USER));
    expect(response.body.data?.openTeam ?? null).toBeNull();
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
  });

  it('openTeam with terms the activity sets, inline', async () => {
    for (const capacity of [2, 51]) {
      const response = await unchanged(() => teams.raw(`mutation { openTeam(input: { activityId: "${ACTIVITY}", capacity: ${capacity} }) { __typename } }`, {}, USER));
      expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
    }
  });

  it('confirmTeamSeat with an empty, blank or overlong paymentRef', async () => {
    for (const paymentRef of ['', '   ', 'p'.repeat(129)]) {
      const response = await unchanged(() => teams.raw(ConfirmTeamSeatDocument, { teamId, userId: 'input-buyer', paymentRef }, OPERATOR, { admin: true }));
      expect(errorCodes(response), JSON.stringify(paymentRef)).toEqual(['BAD_USER_INPUT']);
    }
  });

  it('seat mutations without their arguments, or with arguments of the wrong type', async () => {
    for (const variables of [{}, { teamId: null }, { teamId: { id: 1 } }, { teamId: [teamId] }]) {
      const malformed = variables as unknown as { teamId: string };
      const requests: (() => Promise<GraphqlResponse<unknown>>)[] = [() => teams.raw(LockTeamSeatDocument, malformed, USER), () => teams.raw(ReleaseTeamSeatDocument, malformed, USER)];
      for (const request of requests) {
        const response = await unchanged(request);
        expect(errorCodes(response), JSON.stringify(variables)).toEqual(['BAD_USER_INPUT']);
      }
    }
    const response = await unchanged(() =>
      teams.raw(ConfirmTeamSeatDocument, { teamId, userId: 'input-buyer' } as { teamId: string; userId: string; paymentRef: string }, OPERATOR, { admin: true }),
    );
    expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
  });

  it('teams with a bad activityId, limit or status', async () => {
    for (const variables of [{ activityId: 'a b' }, { activityId: ACTIVITY, limit: 0 }, { activityId: ACTIVITY, limit: 201 }, { activityId: ACTIVITY, status: 'CLOSED' }]) {
      const response = await unchanged(() => teams.raw(TeamsDocument, variables as { activityId: string }, USER));
      expect(errorCodes(response), JSON.stringify(variables)).toEqual(['BAD_USER_INPUT']);
    }
  });
});

describe('an unknown team', () => {
  const unknownIds = ['00000000-0000-0000-0000-000000000000', 'nope', '{tm:x}:team', '*'];

  it('is NotFound for lockTeamSeat and confirmTeamSeat, NOT_FOUND for releaseTeamSeat, null for team; nothing changes', async () => {
    for (const id of unknownIds) {
      const lock = await unchanged(() => teams.raw(LockTeamSeatDocument, { teamId: id }, USER));
      expect(lock.body.data?.lockTeamSeat.__typename, id).toBe('NotFound');
      const confirm = await unchanged(() => teams.raw(ConfirmTeamSeatDocument, { teamId: id, userId: USER, paymentRef: 'p' }, OPERATOR, { admin: true }));
      expect(confirm.body.data?.confirmTeamSeat.__typename, id).toBe('NotFound');
      const release = await unchanged(() => teams.raw(ReleaseTeamSeatDocument, { teamId: id }, USER));
      expect(errorCodes(release), id).toEqual(['NOT_FOUND']);
      const team = await unchanged(() => teams.raw(TeamDocument, { id }, USER));
      expect(team.body.errors).toBeUndefined();
      expect(team.body.data?.team, id).toBeNull();
    }
  });

  it.each([
    ['SSE', subscribeSse],
    ['graphql-ws', subscribeWs],
  ] as const)('is NOT_FOUND for teamStatus over %s', async (_name, subscribe) => {
    const subscription = subscribe(server.url, TeamStatusDocument, { teamId: unknownIds[0]! }, await tokenOf(USER));
    const events = await subscription.until((all) => all.length >= 1);
    subscription.close();
    expect(events[0]!.data?.teamStatus ?? null).toBeNull();
    expect(events[0]!.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });
});

describe('callers without a valid token', () => {
  type Operation = [name: string, run: (token?: string) => Promise<GraphqlResponse<Record<string, unknown>>>];
  const operations = (): Operation[] => [
    ['openTeam', (t) => gql(server.url, OpenTeamDocument, { input: { activityId: ACTIVITY } }, t)],
    ['lockTeamSeat', (t) => gql(server.url, LockTeamSeatDocument, { teamId }, t)],
    ['releaseTeamSeat', (t) => gql(server.url, ReleaseTeamSeatDocument, { teamId }, t)],
    ['confirmTeamSeat', (t) => gql(server.url, ConfirmTeamSeatDocument, { teamId, userId: 'intruder', paymentRef: 'intruder-pay' }, t)],
    ['team', (t) => gql(server.url, TeamDocument, { id: teamId }, t)],
    ['teams', (t) => gql(server.url, TeamsDocument, { activityId: ACTIVITY }, t)],
  ];
  const badTokens: [string, () => Promise<string | undefined>][] = [
    ['no token', async () => undefined],
    ['garbage', async () => 'not-a-jwt'],
    ['signed with another secret', () => signToken('another-secret-that-is-also-32-characters-long', { userId: 'input-locker', roles: ['admin'] })],
  ];

  it.each(badTokens)('UNAUTHENTICATED with %s, and nothing changes', async (_name, makeToken) => {
    const bad = await makeToken();
    for (const [name, run] of operations()) {
      const response = await unchanged(() => run(bad));
      expect(response.body.data?.[name] ?? null, name).toBeNull();
      expect(errorCodes(response), name).toEqual(['UNAUTHENTICATED']);
    }
  });

  it.each([
    ['SSE', subscribeSse],
    ['graphql-ws', subscribeWs],
  ] as const)('UNAUTHENTICATED for teamStatus over %s without a token', async (_name, subscribe) => {
    const subscription = subscribe(server.url, TeamStatusDocument, { teamId });
    const events = await subscription.until((all) => all.length >= 1);
    subscription.close();
    expect(events[0]!.data?.teamStatus ?? null).toBeNull();
    expect(events[0]!.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });
});
