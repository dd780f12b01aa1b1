import { describe, expect, it } from 'vitest';
import { MyTeamsDocument, type MyTeamsQuery, TeamMyLockDocument } from './gql/generated.ts';
import { errorCodes, requestsAt } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { cursorOf, everyPage, expectInvalidCursor } from './support/paging.ts';
import { waitFor } from './support/poll.ts';
import { teamsAt } from './support/teams.ts';

const env = testEnv('me_teams');
const started = startedServer(env);

type MyTeam = MyTeamsQuery['me']['teams']['edges'][number]['node'];

/** Every team of the user's list, page by page forwards. */
function everyTeam(user: string, first: number): Promise<MyTeam[]> {
  const { data } = requestsAt(started.server.url);
  return everyPage(async (after) => (await data(MyTeamsDocument, { first, after }, user)).me.teams);
}

/** What PostgreSQL says the list is: the teams `user` is a member of, newest first. */
async function membershipsInPostgres(user: string): Promise<string[]> {
  const { rows } = await started.stores.sql.query<{ id: string }>(
    'SELECT t.id FROM team t WHERE EXISTS (SELECT 1 FROM team_member m WHERE m.team_id = t.id AND m.user_id = $1) ORDER BY t.created_at DESC, t.id DESC',
    [user],
  );
  return rows.map((row) => row.id);
}

const ids = (teams: { id: string }[]) => teams.map((team) => team.id);

describe('Me.teams', () => {
  it('pages the teams I lead or joined, newest first, forwards and backwards, and nobody else’s', async () => {
    const teams = teamsAt(started.server.url);
    const led = [];
    for (let i = 0; i < 5; i++) led.push(await teams.open('alice', { activityId: 'mine-a' }));
    const bobs = await teams.open('bob', { activityId: 'mine-a' });
    await teams.open('carol', { activityId: 'mine-a' });
    const { notified } = await teams.pay('alice', bobs.id);
    expect(notified?.status).toBe(200);

    const expected = await membershipsInPostgres('alice');
    expect(new Set(expected)).toEqual(new Set([...ids(led), bobs.id]));
    const forwards = await everyTeam('alice', 2);
    expect(ids(forwards)).toEqual(expected);
    expect(forwards.every((team) => team.myLock === null && team.members.some((member) => member.userId === 'alice'))).toBe(true);
    expect(forwards.find((team) => team.id === bobs.id)?.leaderId).not.toBe('bob');

    const { data } = requestsAt(started.server.url);
    const oldest = (await data(MyTeamsDocument, { last: 2 }, 'alice')).me.teams;
    expect(ids(oldest.edges.map((edge) => edge.node))).toEqual(expected.slice(-2));
    expect(oldest.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: false });
    const before = (await data(MyTeamsDocument, { last: 3, before: oldest.pageInfo.startCursor }, 'alice')).me.teams;
    expect(ids(before.edges.map((edge) => edge.node))).toEqual(expected.slice(-5, -2));
    const after = (await data(MyTeamsDocument, { first: 10, after: before.edges[0]!.cursor }, 'alice')).me.teams;
    expect(ids(after.edges.map((edge) => edge.node))).toEqual(expected.slice(-4));

    expect(ids(await everyTeam('bob', 10))).toEqual(await membershipsInPostgres('bob'));
    expect(await everyTeam('nobody-at-all', 10)).toEqual([]);
    // Page by page one team at a time, by Alice's own cursors: none skipped or repeated.
    expect(ids(await everyTeam('alice', 1))).toEqual(expected);
  });

  it("takes only a cursor of a team of mine: another's team, or none, is INVALID_CURSOR", async () => {
    const teams = teamsAt(started.server.url);
    // Opened in turn, so each of Carol's teams falls between two of Alice's.
    for (let i = 0; i < 3; i++) {
      for (const user of ['cursor-alice', 'cursor-carol']) await teams.open(user, { activityId: 'mine-cursors' });
    }
    const carols = await membershipsInPostgres('cursor-carol');
    const { raw } = requestsAt(started.server.url);
    for (const [what, id] of [
      ["Carol's team", carols[1]!],
      ['no team', 'no-such-team'],
    ] as const) {
      expectInvalidCursor(await raw(MyTeamsDocument, { first: 5, after: cursorOf(id) }, 'cursor-alice'), what);
      expectInvalidCursor(await raw(MyTeamsDocument, { last: 5, before: cursorOf(id) }, 'cursor-alice'), what, 'before');
    }
    expect(ids(await everyTeam('cursor-alice', 1))).toEqual(await membershipsInPostgres('cursor-alice'));
  });

  it('shows the lock I hold, where it moved, and drops it once released', async () => {
    const teams = teamsAt(started.server.url);
    const first = await teams.open('leader-1', { activityId: 'mine-locks' });
    const second = await teams.open('leader-2', { activityId: 'mine-locks' });
    const { data } = requestsAt(started.server.url);

    const locked = await teams.lock('dave', first.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`lockTeamSeat answered ${locked.__typename}`);
    let mine = await everyTeam('dave', 10);
    expect(ids(mine)).toEqual([first.id]);
    expect(mine[0]!.myLock).toEqual({ userId: 'dave', lockedAt: locked.lock.lockedAt, expiresAt: locked.lock.expiresAt });
    expect(Date.parse(mine[0]!.myLock!.expiresAt)).toBeGreaterThan(Date.parse(mine[0]!.serverTime));
    // Only the holder's own: the leader sees the team, with no lock of theirs.
    expect((await data(TeamMyLockDocument, { id: first.id }, 'dave')).team?.myLock?.expiresAt).toBe(locked.lock.expiresAt);
    expect((await data(TeamMyLockDocument, { id: first.id }, 'leader-1')).team?.myLock).toBeNull();
    expect((await everyTeam('leader-1', 10)).map((team) => team.myLock)).toEqual([null]);

    // Moved: the list follows the lock, as an app restarted after the move would find it.
    const moved = await teams.lock('dave', second.id);
    if (moved.__typename !== 'SeatLocked') throw new Error(`lockTeamSeat answered ${moved.__typename}`);
    expect(moved.releasedTeamId).toBe(first.id);
    mine = await everyTeam('dave', 10);
    expect(ids(mine)).toEqual([second.id]);
    expect(mine[0]!.myLock?.expiresAt).toBe(moved.lock.expiresAt);

    await teams.release('dave', second.id);
    expect(await everyTeam('dave', 10)).toEqual([]);
  });

  it('drops a lock once it runs out, and keeps the team once the lock became a seat', async () => {
    const teams = teamsAt(started.server.url);
    const team = await teams.open('leader-3', { activityId: 'mine-short-locks', lockSeconds: 1 });
    const locked = await teams.lock('erin', team.id);
    if (locked.__typename !== 'SeatLocked') throw new Error(`lockTeamSeat answered ${locked.__typename}`);
    expect((await everyTeam('erin', 10)).map((listed) => listed.myLock?.expiresAt)).toEqual([locked.lock.expiresAt]);
    await waitFor('the lock to run out of the list', async () => (await everyTeam('erin', 10)).length === 0, { timeoutMs: 5_000 });
    // The team a page of hers ended on while she held the lock still keeps her place.
    const { data } = requestsAt(started.server.url);
    expect((await data(MyTeamsDocument, { first: 10, after: cursorOf(team.id) }, 'erin')).me.teams.edges).toEqual([]);

    const { notified } = await teams.pay('frank', team.id);
    expect(notified?.status).toBe(200);
    const joined = await everyTeam('frank', 10);
    expect(joined.map((listed) => [listed.id, listed.myLock])).toEqual([[team.id, null]]);
    expect(joined[0]!.members.map((member) => member.userId)).toContain('frank');
  });

  it('needs a signed-in caller and a page of 0 to 100 teams', async () => {
    const { raw } = requestsAt(started.server.url);
    expect(errorCodes(await raw(MyTeamsDocument, { first: 5 }))).toEqual(['UNAUTHENTICATED']);
    for (const page of [{ first: 101 }, { last: 101 }, { first: -1 }, { last: -1 }]) {
      expect(errorCodes(await raw(MyTeamsDocument, page, 'alice')), JSON.stringify(page)).toEqual(['BAD_USER_INPUT']);
    }
    for (const after of ['garbage', ...['c1:', 'c1:\u0000', `c1:${'x'.repeat(300)}`].map((text) => Buffer.from(text).toString('base64url')), '']) {
      expect(errorCodes(await raw(MyTeamsDocument, { first: 5, after }, 'alice')), after).toEqual(['BAD_USER_INPUT']);
    }
    expect(errorCodes(await raw(TeamMyLockDocument, { id: 'x' }))).toEqual(['UNAUTHENTICATED']);
  });
});
