import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CreateGroupBuyActivityDocument, GroupBuyActivitiesDocument, type GroupBuyActivitiesQuery, GroupBuyActivityDocument, OpenTeamDocument } from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { paymentViolations } from './support/paymentInvariants.ts';
import { loseKeysAtOnce } from './support/stores.ts';
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

    const teamsBefore = (await started.stores.sql.query('SELECT count(*)::int AS n FROM team')).rows[0].n;
    expect(await open('gb-leader', 'no-such-activity')).toMatchObject({ __typename: 'NotFound' });
    const later = newId();
    await create(activityInput(later, { startsAt: new Date(Date.now() + 3_600_000).toISOString(), endsAt: new Date(Date.now() + 7_200_000).toISOString() }));
    expect(await open('gb-leader', later)).toMatchObject({ __typename: 'GroupBuyNotActive', message: 'this group-buy has not started yet' });
    const over = newId();
    const endsAt = Date.now() + 1_000;
    await create(activityInput(over, { startsAt: new Date(Date.now() - 7_200_000).toISOString(), endsAt: new Date(endsAt).toISOString() }));
    await new Promise((resolve) => setTimeout(resolve, endsAt - Date.now() + 50));
    expect(await open('gb-leader', over)).toMatchObject({ __typename: 'GroupBuyNotActive', message: 'this group-buy has ended' });
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
