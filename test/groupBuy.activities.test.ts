import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { activityKeys, teamKeys } from '../src/domain/teams/store.ts';
import {
  CreateGroupBuyActivityDocument,
  GroupBuyActivitiesDocument,
  type GroupBuyActivitiesQuery,
  GroupBuyActivityDocument,
  OpenTeamDocument,
  UpdateGroupBuyActivityDocument,
  type UpdateGroupBuyActivityInput,
} from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { cursorOf, expectInvalidCursor } from './support/paging.ts';
import { paymentViolations } from './support/paymentInvariants.ts';
import { waitFor } from './support/poll.ts';
import { startServerProcess } from './support/server.ts';
import { loseKeysAtOnce, stateKeys } from './support/stores.ts';
import { expectTeamInvariants } from './support/teamInvariants.ts';
import { activityInput, teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('gb_activities');
const started = startedServer(env);
const url = () => started.server.url;
const operator = () => tokenOf('gb-ops', { admin: true });
const newId = () => `gb-${randomUUID().slice(0, 8)}`;

async function create(input: Record<string, unknown>, token?: string) {
  return gql(url(), CreateGroupBuyActivityDocument, { input: input as never }, token ?? (await operator()));
}

/** The activity's status as a signed-in user reads it. */
async function statusOf(id: string) {
  return (await gql(url(), GroupBuyActivityDocument, { id }, await tokenOf('gb-reader'))).body.data?.groupBuyActivity?.status;
}

async function activityCount(): Promise<number> {
  return (await started.stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM group_buy_activity')).rows[0]!.n;
}

describe('createGroupBuyActivity', () => {
  it('is for operators: users get FORBIDDEN, anonymous callers UNAUTHENTICATED', async () => {
    const before = await activityCount();
    expect(errorCodes(await gql(url(), CreateGroupBuyActivityDocument, { input: activityInput(newId()) }))).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(await create(activityInput(newId()), await tokenOf('gb-user')))).toEqual(['FORBIDDEN']);
    expect(await activityCount()).toBe(before);
    const id = newId();
    const { body } = await create({ ...activityInput(id, { capacity: 4, lockSeconds: 60, groupPriceCents: 500, priceCents: 800 }), description: 'tea for four' });
    expect(body.data?.createGroupBuyActivity).toMatchObject({ id, capacity: 4, lockSeconds: 60, groupPriceCents: 500, priceCents: 800, description: 'tea for four' });
  });

  const bad: [string, Record<string, unknown>][] = [
    ['capacity 1', { capacity: 1 }],
    ['capacity 51', { capacity: 51 }],
    ['lockSeconds 0', { lockSeconds: 0 }],
    ['lockSeconds above an hour', { lockSeconds: 3601 }],
    ['formationSeconds 0', { formationSeconds: 0 }],
    ['formationSeconds beyond a week', { formationSeconds: 604_801 }],
    ['priceCents 0', { priceCents: 0 }],
    ['groupPriceCents 0', { groupPriceCents: 0 }],
    ['a group price above the price', { priceCents: 500, groupPriceCents: 501 }],
    ['a price beyond a million yuan', { priceCents: 100_000_001 }],
    ['endsAt before startsAt', { startsAt: '2026-12-02T00:00:00Z', endsAt: '2026-12-01T00:00:00Z' }],
    ['endsAt equal to startsAt', { startsAt: '2026-12-01T00:00:00Z', endsAt: '2026-12-01T00:00:00Z' }],
    ['a window over 366 days', { startsAt: '2026-01-01T00:00:00Z', endsAt: '2027-01-03T00:00:00Z' }],
    ['a window already over', { startsAt: new Date(Date.now() - 7_200_000).toISOString(), endsAt: new Date(Date.now() - 1_000).toISOString() }],
    ['a date that is no date', { startsAt: 'tomorrow' }],
    // Stored by PostgreSQL, but no longer read back by its driver: every list would fail.
    ['an end after the year 9999', { endsAt: '+020000-01-02T00:00:00Z' }],
    ['a start before 1970', { startsAt: '1969-12-31T00:00:00Z' }],
    ['maxTeamsPerUser 0', { maxTeamsPerUser: 0 }],
    ['maxOpenTeamsPerLeader 0', { maxOpenTeamsPerLeader: 0 }],
    ['maxOpenTeamsPerLeader 1001', { maxOpenTeamsPerLeader: 1001 }],
    ['a blank title', { title: '   ' }],
    ['a title of 201 characters', { title: 't'.repeat(201) }],
    ['a description of 5001 characters', { description: 'd'.repeat(5001) }],
    ['an id with a brace', { id: '{tm:x}' }],
    ['an id of 65 characters', { id: 'x'.repeat(65) }],
    ['a float capacity', { capacity: 2.5 }],
    ['a string for capacity', { capacity: 'three' }],
    ['an unknown field', { discount: 5 }],
    ['an empty requestId', { requestId: '' }],
    ['a requestId of 129 characters', { requestId: 'r'.repeat(129) }],
    ['a requestId with a NUL', { requestId: 'a\u0000b' }],
  ];
  it.each(bad)('refuses %s with BAD_USER_INPUT, creating nothing', async (_name, change) => {
    const before = await activityCount();
    const response = await create({ ...activityInput(newId()), ...change });
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
    expect(await activityCount()).toBe(before);
  });

  it('refuses an id that exists, leaving the first activity as it was', async () => {
    const id = newId();
    await create(activityInput(id, { capacity: 5 }));
    expect(errorCodes(await create(activityInput(id, { capacity: 2 })))).toEqual(['BAD_USER_INPUT']);
    expect((await gql(url(), GroupBuyActivityDocument, { id }, await tokenOf('gb-user'))).body.data?.groupBuyActivity?.capacity).toBe(5);
  });

  describe('with a requestId', () => {
    const rowsTitled = async (title: string) => (await started.stores.sql.query<{ id: string }>('SELECT id FROM group_buy_activity WHERE title = $1', [title])).rows.map((row) => row.id);

    it('creates once however many retries race, its id minted once; the requestId for other terms is refused, creating nothing', async () => {
      const title = `retried ${newId()}`;
      const input = { ...activityInput(''), id: undefined, title, requestId: 'console-42' };
      // A console that timed out and sent again, 20 times at once, then once more.
      const answers = await Promise.all(Array.from({ length: 20 }, () => create(input)));
      expect(answers.flatMap((answer) => answer.body.errors ?? [])).toEqual([]);
      const ids = new Set(answers.map((answer) => answer.body.data?.createGroupBuyActivity.id));
      expect(ids.size).toBe(1);
      const [first] = ids;
      expect((await create(input)).body.data?.createGroupBuyActivity).toMatchObject({ id: first, title, capacity: input.capacity });
      expect(await rowsTitled(title)).toEqual([first]);

      const before = await activityCount();
      const other = await create({ ...input, capacity: 4 });
      expect(errorCodes(other)).toEqual(['BAD_USER_INPUT']);
      expect(other.body.errors?.[0]?.extensions?.issues).toMatchObject([{ path: ['input', 'requestId'], code: 'REQUEST_ID_OF_ANOTHER_CREATE' }]);
      expect(await activityCount()).toBe(before);
    });

    it("gets a retry of a chosen id the first activity rather than ACTIVITY_ID_TAKEN; the requestId is each operator's own", async () => {
      const id = newId();
      const input = { ...activityInput(id), requestId: 'r'.repeat(128) };
      const first = (await create(input)).body.data?.createGroupBuyActivity;
      expect(first).toMatchObject({ id, capacity: input.capacity });
      const retried = await create(input);
      expect(retried.body.errors).toBeUndefined();
      expect(retried.body.data?.createGroupBuyActivity).toEqual(first);

      const theirs = await create({ ...input, id: newId() }, await tokenOf('gb-ops-2', { admin: true }));
      expect(theirs.body.errors).toBeUndefined();
      expect(theirs.body.data?.createGroupBuyActivity.id).not.toBe(id);
      expect(await rowsTitled(input.title)).toHaveLength(2);
    });
  });
});

describe('reading activities', () => {
  it('one by id, and a paginated list newest first, for signed-in callers', async () => {
    const ids = [newId(), newId(), newId()];
    for (const id of ids) await create(activityInput(id));
    const user = await tokenOf('gb-reader');
    expect(errorCodes(await gql(url(), GroupBuyActivityDocument, { id: ids[0]! }))).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(await gql(url(), GroupBuyActivitiesDocument, {}))).toEqual(['UNAUTHENTICATED']);
    expect((await gql(url(), GroupBuyActivityDocument, { id: ids[0]! }, user)).body.data?.groupBuyActivity?.id).toBe(ids[0]);
    expect((await gql(url(), GroupBuyActivityDocument, { id: 'none' }, user)).body.data?.groupBuyActivity).toBeNull();

    const seen: string[] = [];
    let after: string | null = null;
    for (let page = 0; page < 100; page++) {
      const { body }: GraphqlResponse<GroupBuyActivitiesQuery> = await gql(url(), GroupBuyActivitiesDocument, { first: 2, after }, user);
      const connection: GroupBuyActivitiesQuery['groupBuyActivities'] = body.data!.groupBuyActivities;
      seen.push(...connection.edges.map((edge) => edge.node.id));
      if (!connection.pageInfo.hasNextPage) break;
      after = connection.pageInfo.endCursor!;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen.filter((id) => ids.includes(id))).toEqual([...ids].reverse());
    expect(seen).toHaveLength(await activityCount());

    for (const variables of [{ first: -1 }, { first: 101 }, { after: 'garbage' }, { after: '' }]) {
      expect(errorCodes(await gql(url(), GroupBuyActivitiesDocument, variables, user)), JSON.stringify(variables)).toEqual(['BAD_USER_INPUT']);
    }
    expectInvalidCursor(await gql(url(), GroupBuyActivitiesDocument, { first: 2, after: cursorOf('no-such-activity') }, user), 'no activity');
  });
});

describe('openTeam', () => {
  const open = async (leader: string, activityId: string) => (await gql(url(), OpenTeamDocument, { input: { activityId } }, await tokenOf(leader))).body.data!.openTeam;

  it("takes the activity's terms; an unknown activity is NotFound; outside the window, GroupBuyNotActive", async () => {
    const id = newId();
    await create(activityInput(id, { capacity: 7, lockSeconds: 42, formationSeconds: 600 }));
    const team = await open('gb-leader', id);
    if (team.__typename !== 'Team') throw new Error(`got ${team.__typename}`);
    expect(team).toMatchObject({ activityId: id, capacity: 7, lockSeconds: 42, freeSeats: 6, status: 'OPEN' });
    expect(Date.parse(team.deadline) - Date.parse(team.serverTime)).toBeGreaterThan(590_000);
    expect(errorCodes(await gql(url(), OpenTeamDocument, { input: { activityId: id } }))).toEqual(['UNAUTHENTICATED']);
    expect(await statusOf(id)).toBe('ACTIVE');

    const teamsBefore = (await started.stores.sql.query('SELECT count(*)::int AS n FROM team')).rows[0].n;
    expect(await open('gb-leader', 'no-such-activity')).toMatchObject({ __typename: 'NotFound' });
    const later = newId();
    await create(activityInput(later, { startsAt: new Date(Date.now() + 3_600_000).toISOString(), endsAt: new Date(Date.now() + 7_200_000).toISOString() }));
    expect(await open('gb-leader', later)).toMatchObject({ __typename: 'GroupBuyNotActive', message: 'this group-buy has not started yet' });
    expect(await statusOf(later)).toBe('UPCOMING');
    const over = newId();
    const endsAt = Date.now() + 1_000;
    await create(activityInput(over, { startsAt: new Date(Date.now() - 7_200_000).toISOString(), endsAt: new Date(endsAt).toISOString() }));
    await new Promise((resolve) => setTimeout(resolve, endsAt - Date.now() + 50));
    expect(await open('gb-leader', over)).toMatchObject({ __typename: 'GroupBuyNotActive', message: 'this group-buy has ended' });
    expect(await statusOf(over)).toBe('ENDED');
    expect((await started.stores.sql.query('SELECT count(*)::int AS n FROM team')).rows[0].n).toBe(teamsBefore);
  });

  it('lets a leader hold no more open teams than the cap, however many opens race', async () => {
    const id = newId();
    await create(activityInput(id, { maxOpenTeamsPerLeader: 2 }));
    const results = await Promise.all(Array.from({ length: 12 }, () => open('gb-racer', id)));
    const kinds = results.map((result) => result.__typename).sort();
    expect(kinds.filter((kind) => kind === 'Team')).toHaveLength(2);
    expect(kinds.filter((kind) => kind === 'OpenTeamLimitReached')).toHaveLength(10);
    expect(results.find((result) => result.__typename === 'OpenTeamLimitReached')).toMatchObject({ maxOpenTeamsPerLeader: 2 });
    const { rows } = await started.stores.sql.query(`SELECT count(*)::int AS n FROM team WHERE activity_id = $1 AND leader_id = 'gb-racer'`, [id]);
    expect(rows[0].n).toBe(2);
    // Another leader is not held back by it.
    expect((await open('gb-other', id)).__typename).toBe('Team');
  });

  describe('with a requestId', () => {
    const openAs = async (leader: string, activityId: string, requestId: string, headers: Record<string, string> = {}) =>
      gql(url(), OpenTeamDocument, { input: { activityId, requestId } }, await tokenOf(leader), headers);
    const openedTeam = (response: Awaited<ReturnType<typeof openAs>>) => {
      const team = response.body.data?.openTeam;
      if (team?.__typename !== 'Team') throw new Error(`openTeam answered ${JSON.stringify(response.body)}`);
      return team;
    };
    const teamRows = async (activityId: string) =>
      (await started.stores.sql.query<{ id: string; leader_id: string }>('SELECT id, leader_id FROM team WHERE activity_id = $1 ORDER BY created_at, id', [activityId])).rows;
    /** The teams Redis holds of the activity: one meta key each. */
    const redisTeams = async (activityId: string) => (await stateKeys(started.stores.redis, env.keyPrefix, teamKeys(activityId, '*').meta)).map((key) => /:team:([^:]+):meta$/.exec(key)![1]);

    it.each([
      ['who may open many', 1000],
      ['capped at one open team', 1],
    ])('opens one team for a leader %s, however many retries race, and answers a later retry with it', async (_name, maxOpenTeamsPerLeader) => {
      const id = newId();
      const leader = `gb-retrier-${maxOpenTeamsPerLeader}`;
      await create(activityInput(id, { maxOpenTeamsPerLeader }));
      // A mini-program that timed out and sent again, 20 times at once, then once more.
      const answers = await Promise.all(Array.from({ length: 20 }, () => openAs(leader, id, 'tap-1')));
      const ids = new Set(answers.map((answer) => openedTeam(answer).id));
      expect(ids.size).toBe(1);
      const [teamId] = ids;
      expect(openedTeam(await openAs(leader, id, 'tap-1'))).toMatchObject({ id: teamId, activityId: id, status: 'OPEN', members: [{ userId: leader }] });
      expect(await teamRows(id)).toEqual([{ id: teamId, leader_id: leader }]);
      expect(await redisTeams(id)).toEqual([teamId]);
      await expectTeamInvariants(started.stores, id, [teamId!]);
    });

    it("answers a retry with the first team as it is now, at the leader's cap and once the activity paused or ended", async () => {
      const id = newId();
      await create(activityInput(id, { maxOpenTeamsPerLeader: 1 }));
      const first = openedTeam(await openAs('gb-tapper', id, 'tap-1'));
      expect(first).toMatchObject({ freeSeats: 2, locks: [] });
      expect((await teamsAt(url()).lock('gb-locker', first.id)).__typename).toBe('SeatLocked');
      expect(openedTeam(await openAs('gb-tapper', id, 'tap-1'))).toMatchObject({ id: first.id, freeSeats: 1, locks: [expect.anything()] });
      // A new tap is a new team, which the cap refuses.
      expect((await openAs('gb-tapper', id, 'tap-2')).body.data?.openTeam).toMatchObject({ __typename: 'OpenTeamLimitReached', maxOpenTeamsPerLeader: 1 });

      const change = async (input: UpdateGroupBuyActivityInput) =>
        expect((await gql(url(), UpdateGroupBuyActivityDocument, { activityId: id, input }, await operator())).body.data?.updateGroupBuyActivity?.__typename).toBe('GroupBuyActivity');
      await change({ paused: true });
      expect(openedTeam(await openAs('gb-tapper', id, 'tap-1')).id).toBe(first.id);
      await change({ endsAt: new Date(Date.now() - 60_000).toISOString() });
      expect(openedTeam(await openAs('gb-tapper', id, 'tap-1')).id).toBe(first.id);
      expect((await openAs('gb-tapper', id, 'tap-3')).body.data?.openTeam).toMatchObject({ __typename: 'GroupBuyNotActive' });
      expect(await teamRows(id)).toEqual([{ id: first.id, leader_id: 'gb-tapper' }]);
      expect(await redisTeams(id)).toEqual([first.id]);
    });

    it("refuses the requestId for another activity, opening nothing; another leader's same requestId opens their own team", async () => {
      const [id, other] = [newId(), newId()];
      await create(activityInput(id));
      await create(activityInput(other));
      const first = openedTeam(await openAs('gb-reuser', id, 'tap-1'));
      for (const [headers, message] of [
        [{}, 'requestId tap-1 was already used to open a team of another group-buy activity'],
        [{ 'accept-language': 'zh-CN' }, 'requestId tap-1 已用于在另一个拼团活动中开团'],
      ] as const) {
        const refused = await openAs('gb-reuser', other, 'tap-1', headers);
        expect(refused.body.data?.openTeam ?? null).toBeNull();
        expect(refused.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'requestId'], code: 'REQUEST_ID_OF_ANOTHER_TEAM', message }] });
      }
      expect(await teamRows(other)).toEqual([]);
      expect(await redisTeams(other)).toEqual([]);

      const theirs = openedTeam(await openAs('gb-someone-else', id, 'tap-1'));
      expect(theirs.id).not.toBe(first.id);
      expect(await teamRows(id)).toEqual([
        { id: first.id, leader_id: 'gb-reuser' },
        { id: theirs.id, leader_id: 'gb-someone-else' },
      ]);
    });
  });
});

describe('the limit on teams joined', () => {
  it('holds against a buyer racing payments for many teams, and after Redis loses its data', async () => {
    const id = newId();
    const teams = teamsAt(url());
    await teams.activity(id, { maxTeamsPerUser: 2, capacity: 4 });
    const teamIds = await Promise.all(Array.from({ length: 8 }, async (_, i) => (await teams.open(`gb-lead-${i}`, { activityId: id, maxTeamsPerUser: 2, capacity: 4 })).id));
    const buyers = Array.from({ length: 10 }, (_, i) => `gb-buyer-${i}`);
    // Each buyer tries every team at once: locks move, payments race them, most land late.
    await Promise.all(buyers.flatMap((buyer) => teamIds.map((teamId) => teams.pay(buyer, teamId))));
    // Then one by one, until the limit answers.
    for (const buyer of buyers) {
      for (const teamId of teamIds) {
        const { locked } = await teams.pay(buyer, teamId);
        if (locked.__typename === 'TeamLimitReached') {
          expect(locked.maxTeamsPerUser).toBe(2);
          break;
        }
      }
    }
    const joined = async () =>
      (
        await started.stores.sql.query<{ user_id: string; n: number }>(
          `SELECT m.user_id, count(*)::int AS n FROM team_member m JOIN team t ON t.id = m.team_id WHERE t.activity_id = $1 AND m.user_id <> t.leader_id GROUP BY m.user_id ORDER BY m.user_id`,
          [id],
        )
      ).rows;
    const counts = await joined();
    expect(counts.every((row) => row.n <= 2)).toBe(true);
    expect(counts.filter((row) => row.n === 2).length).toBeGreaterThan(0);

    // Redis loses everything: the counts are rebuilt from PostgreSQL, and the limit still holds.
    expect(await loseKeysAtOnce(started.stores.redis, env.keyPrefix)).toBeGreaterThan(0);
    const full = counts.find((row) => row.n === 2)!.user_id;
    for (const teamId of teamIds) {
      const locked = await teams.lock(full, teamId);
      expect(['TeamLimitReached', 'AlreadyMember', 'TeamFull', 'TeamClosed']).toContain(locked.__typename);
    }
    expect(await joined()).toEqual(counts);
    await expectTeamInvariants(started.stores, id, teamIds, { locksLost: true });
    expect(await paymentViolations(started.stores, teamIds)).toEqual([]);
  });
});

describe('updateGroupBuyActivity', () => {
  const update = async (activityId: string, input: UpdateGroupBuyActivityInput, token?: string) =>
    gql(url(), UpdateGroupBuyActivityDocument, { activityId, input }, token === undefined ? await operator() : token);
  const openAt = async (serverUrl: string, leader: string, activityId: string) =>
    (await gql(serverUrl, OpenTeamDocument, { input: { activityId } }, await tokenOf(leader))).body.data!.openTeam;
  const rowOf = async (id: string) => (await started.stores.sql.query('SELECT * FROM group_buy_activity WHERE id = $1', [id])).rows[0];
  const teamIdsOf = async (id: string) => (await started.stores.sql.query<{ id: string }>('SELECT id FROM team WHERE activity_id = $1', [id])).rows.map((row) => row.id);

  it('is for operators: users get FORBIDDEN, anonymous callers UNAUTHENTICATED, and nothing changes', async () => {
    const id = newId();
    await create(activityInput(id));
    const before = await rowOf(id);
    for (const [token, code] of [
      ['', 'UNAUTHENTICATED'],
      ['not-a-jwt', 'UNAUTHENTICATED'],
      [await tokenOf('gb-user'), 'FORBIDDEN'],
    ] as const) {
      const response = await gql(url(), UpdateGroupBuyActivityDocument, { activityId: id, input: { paused: true } }, token || undefined);
      expect(errorCodes(response)).toEqual([code]);
    }
    expect(await rowOf(id)).toEqual(before);
    expect((await update('no-such-activity', { paused: true })).body.data?.updateGroupBuyActivity).toMatchObject({ __typename: 'NotFound', code: 'NOT_FOUND' });
    for (const badId of ['', 'a'.repeat(65), 'a b']) expect(errorCodes(await update(badId, { paused: true })), badId).toEqual(['BAD_USER_INPUT']);
  });

  const bad: [string, Record<string, unknown>][] = [
    ['nothing to change', {}],
    ['only nulls', { title: null, description: null, endsAt: null, paused: null }],
    ['a blank title', { title: '   ' }],
    ['a title of 201 characters', { title: 't'.repeat(201) }],
    ['a description of 5001 characters', { description: 'd'.repeat(5001) }],
    ['an end before the start', { endsAt: new Date(Date.now() + 1_800_000).toISOString() }],
    ['an end already past, before the start', { endsAt: new Date(Date.now() - 60_000).toISOString() }],
    ['a window over 366 days', { endsAt: new Date(Date.now() + 400 * 86_400_000).toISOString() }],
    ['a date that is no date', { endsAt: 'tomorrow' }],
    ['a string for paused', { paused: 'yes' }],
  ];

  it.each(bad)('with %s is BAD_USER_INPUT and changes nothing', async (_name, input) => {
    const id = newId();
    // Starting in an hour: an end before that is refused, even one already past (which ends a started activity now).
    await create(activityInput(id, { startsAt: new Date(Date.now() + 3_600_000).toISOString(), endsAt: new Date(Date.now() + 7_200_000).toISOString() }));
    const before = await rowOf(id);
    const response = await update(id, input as UpdateGroupBuyActivityInput);
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
    expect(await rowOf(id)).toEqual(before);
  });

  /**
   * 200 opens over a second, spread over the servers, with the change a fifth of the way
   * in: some opens are refused, and not one team commits after the change answered,
   * whatever each instance's copy of the activity said. The opens' answers.
   */
  async function stormChangedMidway(id: string, servers: string[], change: UpdateGroupBuyActivityInput) {
    let teamsWhenChanged = -1;
    const opens = Array.from({ length: 200 }, (_, i) => new Promise((resolve) => setTimeout(resolve, 5 * i)).then(() => openAt(servers[i % servers.length]!, `gb-storm-${i}`, id)));
    const changed = new Promise((resolve) => setTimeout(resolve, 200))
      .then(() => update(id, change))
      .then(async (response) => {
        teamsWhenChanged = (await teamIdsOf(id)).length;
        return response;
      });
    expect((await changed).body.data?.updateGroupBuyActivity).toMatchObject({ __typename: 'GroupBuyActivity' });
    const results = await Promise.all(opens);
    expect(results.filter((result) => result.__typename === 'GroupBuyNotActive').length, 'opens refused after the change').toBeGreaterThan(0);
    expect(await teamIdsOf(id)).toHaveLength(teamsWhenChanged);
    return results;
  }

  it('pauses a storm of openTeam on every instance, while teams already open still fill; then resumes', async () => {
    const id = newId();
    await create(activityInput(id, { capacity: 2 }));
    const teams = teamsAt(url());
    const early = await openAt(url(), 'gb-early', id);
    if (early.__typename !== 'Team') throw new Error(`got ${early.__typename}`);
    const other = await startServerProcess(env.vars);
    try {
      // Warm the other instance's copy of the activity, so the pause must reach it.
      expect((await openAt(other.url, 'gb-warm', id)).__typename).toBe('Team');
      const results = await stormChangedMidway(id, [url(), other.url], { paused: true });
      expect(results.every((result) => result.__typename === 'Team' || (result.__typename === 'GroupBuyNotActive' && result.paused))).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      expect(await statusOf(id)).toBe('PAUSED');
      for (const at of [url(), other.url]) {
        expect(await openAt(at, 'gb-after', id)).toMatchObject({ __typename: 'GroupBuyNotActive', paused: true, message: 'this group-buy is paused: no new team opens for now' });
      }
      // The team opened before the pause fills.
      await teams.pay('gb-joiner', early.id);
      expect((await teams.team('gb-joiner', early.id))?.status).toBe('COMPLETE');

      expect((await update(id, { paused: false })).body.data?.updateGroupBuyActivity).toMatchObject({ paused: false, status: 'ACTIVE' });
      await waitFor('the other instance to see the resume', async () => (await openAt(other.url, 'gb-resumed', id)).__typename === 'Team', { timeoutMs: 5_000 });
    } finally {
      await other.stop();
    }
    const teamIds = await teamIdsOf(id);
    await expectTeamInvariants(started.stores, id, teamIds);
    expect(await paymentViolations(started.stores, teamIds)).toEqual([]);
  });

  it('ends a storm of openTeam early: no team commits after the end answered', async () => {
    const id = newId();
    await create(activityInput(id));
    const results = await stormChangedMidway(id, [url()], { endsAt: new Date(Date.now() - 60_000).toISOString() });
    expect(results.every((result) => result.__typename === 'Team' || (result.__typename === 'GroupBuyNotActive' && !result.paused))).toBe(true);
    await expectTeamInvariants(started.stores, id, await teamIdsOf(id));
  });

  it('ends an activity early: no team opens, open ones fill; ended, it keeps its end and cannot be paused, but takes a new title', async () => {
    const id = newId();
    await create(activityInput(id, { capacity: 2 }));
    const teams = teamsAt(url());
    const team = await openAt(url(), 'gb-before-end', id);
    if (team.__typename !== 'Team') throw new Error(`got ${team.__typename}`);
    const askedAt = Date.now();
    const ended = await update(id, { endsAt: new Date(askedAt - 60_000).toISOString() });
    const activity = ended.body.data?.updateGroupBuyActivity;
    if (activity?.__typename !== 'GroupBuyActivity') throw new Error(`got ${JSON.stringify(ended.body)}`);
    // An end already past ends it now, not before the teams it let open.
    expect(Date.parse(activity.endsAt)).toBeGreaterThanOrEqual(askedAt - 1_000);
    expect(await openAt(url(), 'gb-too-late', id)).toMatchObject({ __typename: 'GroupBuyNotActive', paused: false, message: 'this group-buy has ended' });
    await teams.pay('gb-last-buyer', team.id);
    expect((await teams.team('gb-last-buyer', team.id))?.status).toBe('COMPLETE');

    const before = await rowOf(id);
    for (const [input, issue] of [
      [{ endsAt: new Date(Date.now() + 86_400_000).toISOString() }, 'GROUP_BUY_ENDED'],
      [{ paused: true }, 'GROUP_BUY_ENDED'],
    ] as const) {
      const response = await update(id, input);
      expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
      expect(response.body.errors?.[0]?.extensions?.issues).toEqual([expect.objectContaining({ code: issue })]);
    }
    expect(await rowOf(id)).toEqual(before);
    expect((await update(id, { title: '双十一奶茶团（已结束）', description: 'thanks' })).body.data?.updateGroupBuyActivity).toMatchObject({
      title: '双十一奶茶团（已结束）',
      description: 'thanks',
    });
    await expectTeamInvariants(started.stores, id, await teamIdsOf(id));
  });

  it("a later end keeps the activity's keys in Redis that much longer", async () => {
    const id = newId();
    const endsAt = Date.now() + 3_600_000;
    await create(activityInput(id, { endsAt: new Date(endsAt).toISOString(), formationSeconds: 600 }));
    const team = await openAt(url(), 'gb-keys', id);
    if (team.__typename !== 'Team') throw new Error(`got ${team.__typename}`);
    // A seat lock reads the activity's terms: they are in Redis from then on.
    await teamsAt(url()).lock('gb-keys-buyer', team.id);
    const keys = activityKeys(id);
    const before = await started.stores.redis.pttl(keys.activity);
    expect(before).toBeGreaterThan(0);
    await update(id, { endsAt: new Date(endsAt + 30 * 86_400_000).toISOString() });
    const after = await started.stores.redis.pttl(keys.activity);
    expect(after - before).toBeGreaterThan(29 * 86_400_000);
    // Brought forward again, the keys keep the later expiry: its teams may still be filling.
    await update(id, { endsAt: new Date(endsAt).toISOString() });
    expect(await started.stores.redis.pttl(keys.activity)).toBeGreaterThan(29 * 86_400_000);
  });
});
