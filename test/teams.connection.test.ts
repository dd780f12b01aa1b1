import { beforeAll, describe, expect, it } from 'vitest';
import { TeamsConnectionDocument, type TeamsConnectionQuery, type TeamsConnectionQueryVariables, TeamsDocument } from './gql/generated.ts';
import { errorCodes, requestsAt } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { cursorOf, everyPage, expectRefusedAsMixed, mixedPages } from './support/paging.ts';
import { OPERATOR, teamsAt } from './support/teams.ts';

const env = testEnv('teams_conn');
const started = startedServer(env);

type ListedTeam = TeamsConnectionQuery['teamsConnection']['edges'][number]['node'];
type Page = TeamsConnectionQuery['teamsConnection'];

async function page(variables: TeamsConnectionQueryVariables): Promise<Page> {
  return (await requestsAt(started.server.url).data(TeamsConnectionDocument, variables, OPERATOR, { admin: true })).teamsConnection;
}

/** Every team of the list, page by page forwards from `after`. */
function everyTeam(variables: Omit<TeamsConnectionQueryVariables, 'after'>, after: string | null = null): Promise<ListedTeam[]> {
  return everyPage((from) => page({ ...variables, after: from }), after);
}

/** The activity's team ids as PostgreSQL holds them, oldest first. */
async function teamsInPostgres(activityId: string, status?: string): Promise<string[]> {
  const { rows } = await started.stores.sql.query<{ id: string }>(`SELECT id FROM team WHERE activity_id = $1 AND ($2::text IS NULL OR status::text = $2) ORDER BY created_at, id`, [
    activityId,
    status ?? null,
  ]);
  return rows.map((row) => row.id);
}

const ACTIVITY = 'report-teams';
const OTHER = 'report-other';
const opened: string[] = [];

beforeAll(async () => {
  const teams = teamsAt(started.server.url);
  // Two seats a team: one confirmation completes it.
  for (let i = 0; i < 9; i++) opened.push((await teams.open(`leader-${i}`, { activityId: ACTIVITY, capacity: 2 })).id);
  for (const i of [1, 4]) await teams.confirm(`buyer-${i}`, opened[i]!, `pay-${i}`);
  for (let i = 0; i < 2; i++) await teams.open(`other-leader-${i}`, { activityId: OTHER, capacity: 2 });
});

describe('teamsConnection pages every team of an activity for operators', () => {
  it('lists every team oldest first, each as it is now with user ids in full, and only those of the activity', async () => {
    const expected = await teamsInPostgres(ACTIVITY);
    expect(expected).toHaveLength(9);
    expect(new Set(expected)).toEqual(new Set(opened));
    const teams = await everyTeam({ activityId: ACTIVITY, first: 4 });
    expect(teams.map((team) => team.id)).toEqual(expected);
    expect(teams.every((team) => team.activityId === ACTIVITY)).toBe(true);
    const byId = new Map(teams.map((team) => [team.id, team]));
    expect(byId.get(opened[1]!)).toMatchObject({ status: 'COMPLETE', leaderId: 'leader-1', members: [{ userId: 'leader-1' }, { userId: 'buyer-1' }] });
    expect(byId.get(opened[0]!)).toMatchObject({ status: 'OPEN', leaderId: 'leader-0', members: [{ userId: 'leader-0' }] });

    const last = await page({ activityId: ACTIVITY, last: 4 });
    expect(last.edges.map((edge) => edge.node.id)).toEqual(expected.slice(-4));
    expect(last.pageInfo).toMatchObject({ hasPreviousPage: true, hasNextPage: false });
    const before = await page({ activityId: ACTIVITY, last: 4, before: last.pageInfo.startCursor });
    expect(before.edges.map((edge) => edge.node.id)).toEqual(expected.slice(-8, -4));

    expect(await everyTeam({ activityId: 'no-such-activity' })).toEqual([]);
    // The "join a team" list stays as it was.
    const joinable = (await requestsAt(started.server.url).data(TeamsDocument, { activityId: ACTIVITY, limit: 200 }, 'someone')).teams;
    expect(new Set(joinable.map((team) => team.id))).toEqual(new Set(expected));
  });

  it('filters by status, and keeps its place when the team at the cursor leaves the status', async () => {
    for (const status of ['OPEN', 'COMPLETE', 'FAILED'] as const) {
      const teams = await everyTeam({ activityId: ACTIVITY, status, first: 2 });
      expect(teams.map((team) => team.id)).toEqual(await teamsInPostgres(ACTIVITY, status));
      expect(teams.every((team) => team.status === status)).toBe(true);
    }
    const open = await teamsInPostgres(ACTIVITY, 'OPEN');
    expect(open.length).toBeGreaterThanOrEqual(5);

    const first = await page({ activityId: ACTIVITY, status: 'OPEN', first: 2 });
    const atCursor = first.edges[1]!.node.id;
    expect(atCursor).toBe(open[1]);
    // The team the cursor names fills before the next page is read.
    await teamsAt(started.server.url).confirm('late-buyer', atCursor, 'pay-late');
    const rest = await everyTeam({ activityId: ACTIVITY, status: 'OPEN', first: 2 }, first.pageInfo.endCursor ?? null);
    expect(rest.map((team) => team.id)).toEqual(open.slice(2));
  });

  it('refuses a page that mixes first/after with last/before, and still pages each way', async () => {
    const expected = await teamsInPostgres(ACTIVITY);
    const cursors = (await page({ activityId: ACTIVITY, first: 9 })).edges.map((edge) => edge.cursor);
    const { raw } = requestsAt(started.server.url);
    for (const mixed of mixedPages(cursors[1]!, cursors[4]!)) {
      expectRefusedAsMixed(await raw(TeamsConnectionDocument, { activityId: ACTIVITY, ...mixed.variables }, OPERATOR, { admin: true }), mixed);
    }
    const ids = (read: Page) => read.edges.map((edge) => edge.node.id);
    expect(ids(await page({ activityId: ACTIVITY, first: 2, after: cursors[1] }))).toEqual(expected.slice(2, 4));
    expect(ids(await page({ activityId: ACTIVITY, last: 2, before: cursors[4] }))).toEqual(expected.slice(2, 4));
    expect(ids(await page({ activityId: ACTIVITY }))).toEqual(expected);
  });

  it('refuses garbage cursors and arguments, anonymous callers and plain users', async () => {
    const { raw } = requestsAt(started.server.url);
    const otherTeam = (await teamsInPostgres(OTHER))[0]!;
    const refused: TeamsConnectionQueryVariables[] = [
      { activityId: ACTIVITY, after: 'garbage' },
      { activityId: ACTIVITY, after: '' },
      { activityId: ACTIVITY, before: Buffer.from('c1:').toString('base64url') },
      { activityId: ACTIVITY, after: cursorOf('no-such-team') },
      // Another activity's team is no row of this list.
      { activityId: ACTIVITY, after: cursorOf(otherTeam) },
      { activityId: ACTIVITY, first: 101 },
      { activityId: ACTIVITY, first: -1 },
      { activityId: 'not an id!' },
    ];
    for (const variables of refused) {
      expect(errorCodes(await raw(TeamsConnectionDocument, variables, OPERATOR, { admin: true })), JSON.stringify(variables)).toEqual(['BAD_USER_INPUT']);
    }
    expect(errorCodes(await raw(TeamsConnectionDocument, { activityId: ACTIVITY, status: 'BOGUS' as never }, OPERATOR, { admin: true }))).toEqual(['BAD_USER_INPUT']);
    expect(errorCodes(await raw(TeamsConnectionDocument, { activityId: ACTIVITY, first: 5 }))).toEqual(['UNAUTHENTICATED']);
    expect(errorCodes(await raw(TeamsConnectionDocument, { activityId: ACTIVITY, first: 5 }, 'leader-0'))).toEqual(['FORBIDDEN']);
  });
});
