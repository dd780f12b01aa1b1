import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TeamStatusDocument, TeamsDocument } from './gql/generated.ts';
import { type Subscription, requestsAt, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { sleep } from './support/poll.ts';
import { type TeamsClient, teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

// The deadline sweeper runs once a minute, so it does not come within a test: what a team
// reads past its deadline is judged when it is read, not left to the sweeper.
const env = testEnv('tm_deadline', { SWEEP_INTERVAL_MS: '60000' });
const started = startedServer(env);
let teams: TeamsClient;
const open: Subscription<unknown>[] = [];

beforeAll(() => {
  teams = teamsAt(started.server.url);
});

afterAll(() => {
  for (const subscription of open) subscription.close();
});

const ms = (iso: string) => Date.parse(iso);

describe('a team past its deadline, before the deadline sweeper fails it', () => {
  it('reads FAILED without its locks, as lockTeamSeat refuses it, in queries, lists and subscriptions', async () => {
    const activityId = `overdue-${randomUUID().slice(0, 8)}`;
    const team = await teams.open('od-leader', { activityId, capacity: 3, formationSeconds: 5 });
    // A lock that would outlive the deadline.
    expect((await teams.lock('od-locker', team.id)).__typename).toBe('SeatLocked');
    const early = subscribeWs(started.server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('od-early'));
    open.push(early as Subscription<unknown>);
    await early.until((events) => events.length >= 1);
    expect(early.events[0]!.data!.teamStatus).toMatchObject({ status: 'OPEN', freeSeats: 1 });
    expect(early.events[0]!.data!.teamStatus.locks).toHaveLength(1);

    // The early subscriber hears FAILED at the deadline, and the stream completes.
    await early.until(() => early.completed(), 10_000);
    const heard = early.events.at(-1)!.data!.teamStatus;
    expect(heard).toMatchObject({ status: 'FAILED', freeSeats: 0, locks: [], nextUnlockAt: null });
    expect(heard.version).toBeGreaterThan(early.events[0]!.data!.teamStatus.version);
    expect(ms(heard.serverTime)).toBeGreaterThanOrEqual(ms(team.deadline));

    // This process's clock is the machine's, which Redis's is too.
    await sleep(ms(team.deadline) + 100 - Date.now());
    const read = await teams.team('od-reader', team.id);
    expect(read).toMatchObject({ status: 'FAILED', freeSeats: 0, locks: [], nextUnlockAt: null });
    expect(read!.members).toHaveLength(1);
    expect(ms(read!.serverTime)).toBeGreaterThanOrEqual(ms(team.deadline));
    expect(await teams.lock('od-late', team.id)).toMatchObject({ __typename: 'TeamClosed', status: 'FAILED' });
    const { data } = requestsAt(started.server.url);
    expect((await data(TeamsDocument, { activityId, status: 'OPEN' }, 'od-reader')).teams).toEqual([]);

    const late = subscribeWs(started.server.url, TeamStatusDocument, { teamId: team.id }, await tokenOf('od-late'));
    open.push(late as Subscription<unknown>);
    await late.until(() => late.completed(), 5_000);
    expect(late.events.map((event) => event.data?.teamStatus.status ?? event.errors)).toEqual(['FAILED']);

    // All of it before the sweeper: PostgreSQL still holds the team OPEN.
    const { rows } = await started.stores.sql.query<{ status: string }>('SELECT status FROM team WHERE id = $1', [team.id]);
    expect(rows).toEqual([{ status: 'OPEN' }]);
  });
});
