import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { ExecutionResult } from 'graphql';
import { describe, expect, it } from 'vitest';
import { UserAliases, aliasScope, logAliases } from '../src/domain/privacy.ts';
import { ADMIN_ROLE } from '../src/infra/auth/tokens.ts';
import {
  CreditWalletDocument,
  LotteryWinnersDocument,
  type LotteryWinnersSubscription,
  PacketPeopleDocument,
  type PacketPeopleFragment,
  PacketPeopleUpdatedDocument,
  type PacketPeopleUpdatedSubscription,
  type TeamStateFragment,
  TeamStatusDocument,
  type TeamStatusSubscription,
} from './gql/generated.ts';
import { type Subscription, errorCodes, gql, subscribeSse, subscribeWs } from './support/client.ts';
import { TEST_JWT_SECRET, testEnv } from './support/env.ts';
import { stopAll, twoInstances } from './support/lifecycle.ts';
import { lotteryAt } from './support/lottery.ts';
import { ALIAS_PATTERN } from './support/privacy.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { startServerProcess } from './support/server.ts';
import { teamsAt } from './support/teams.ts';
import { type As, tokenOf } from './support/tokens.ts';

// Two instances of one deployment: subscribers on one, the changes made through the other.
const env = testEnv('privacy');
const instances = twoInstances(env);
const { track } = instances;

const dataOf = <T, K extends keyof T>(events: ExecutionResult<T>[], field: K): T[K][] =>
  events.flatMap((event) => {
    expect(event.errors).toBeUndefined();
    return event.data ? [event.data[field]] : [];
  });

/** Who a viewer sees: `show` maps each real id to what that viewer should get. */
type Show = (userId: string) => string;
const everyone: Show = (userId) => userId;

/** Aliases read off a stranger's view, checked to look like aliases and to differ between users. */
function aliasesFrom(pairs: [string, string][]): Show {
  const aliases = new Map(pairs);
  for (const alias of aliases.values()) expect(alias).toMatch(ALIAS_PATTERN);
  expect(new Set(aliases.values()).size).toBe(aliases.size);
  return (userId) => aliases.get(userId) ?? `no alias seen for ${userId}`;
}
const shownTo =
  (viewer: string, aliases: Show): Show =>
  (userId) =>
    userId === viewer ? userId : aliases(userId);

describe('user ids in red packets', () => {
  const packetPeople = (packet: PacketPeopleFragment) => ({
    senderId: packet.senderId,
    shares: packet.shares.map((share) => share.userId),
    bestLuck: packet.bestLuck?.userId ?? null,
  });

  it('are shown in full to the user and to operators, and as per-packet aliases to anyone else, in queries and per subscriber in every event', async () => {
    const sender = 'rp-sender';
    const grabbers = ['rp-alice', 'rp-bob', 'rp-carol'];
    const near = redPacketsAt(instances.server.url);
    const far = redPacketsAt(instances.other.url);
    const packet = await near.create(sender, { totalAmount: 600, count: 3 });
    const watch = async (subscribe: typeof subscribeWs, token: string) => track(subscribe(instances.server.url, PacketPeopleUpdatedDocument, { packetId: packet.id }, token));
    const subscribers = {
      stranger: await watch(subscribeSse, await tokenOf('rp-stranger')),
      alice: await watch(subscribeWs, await tokenOf('rp-alice')),
      operator: await watch(subscribeWs, await tokenOf('rp-ops', { admin: true })),
    };
    await Promise.all(Object.values(subscribers).map((subscription) => subscription.until((events) => events.length >= 1)));
    for (const user of grabbers) {
      const grabRedPacket = await far.grab(user, packet.id);
      expect(grabRedPacket.__typename).toBe('GrabbedShare');
    }
    const views = async (subscription: Subscription<PacketPeopleUpdatedSubscription>) =>
      dataOf(await subscription.until((events) => dataOf(events, 'redPacketUpdated').at(-1)?.shares.length === 3), 'redPacketUpdated').map(packetPeople);
    const [strangerViews, aliceViews, operatorViews] = await Promise.all([views(subscribers.stranger), views(subscribers.alice), views(subscribers.operator)]);

    const final = operatorViews.at(-1)!;
    expect(final).toMatchObject({ senderId: sender, shares: grabbers });
    const luckiest = final.bestLuck!;
    expect(grabbers).toContain(luckiest);
    const strangerFinal = strangerViews.at(-1)!;
    const aliases = aliasesFrom([[sender, strangerFinal.senderId], ...grabbers.map((user, i): [string, string] => [user, strangerFinal.shares[i]!])]);
    const expected = (show: Show, shares = 3, empty = true) => ({ senderId: show(sender), shares: grabbers.slice(0, shares).map(show), bestLuck: empty ? show(luckiest) : null });

    // Every event, per subscriber: the same aliases from the first event to the last.
    for (const [views, show] of [
      [strangerViews, aliases],
      [aliceViews, shownTo('rp-alice', aliases)],
      [operatorViews, everyone],
    ] as const) {
      for (const view of views) expect(view).toEqual(expected(show, view.shares.length, view.bestLuck !== null));
      expect(views.at(-1)!.bestLuck).not.toBeNull();
    }
    // Queries, on either instance, agree with the events.
    for (const redPackets of [near, far]) {
      const read = async (viewer: string, as: As = {}) => packetPeople((await redPackets.people(viewer, packet.id, as))!);
      expect(await read('rp-stranger')).toEqual(expected(aliases));
      expect(await read('rp-bob')).toEqual(expected(shownTo('rp-bob', aliases)));
      expect(await read(sender)).toEqual(expected(shownTo(sender, aliases)));
      expect(await read('rp-ops', { admin: true })).toEqual(expected(everyone));
    }
    const again = await near.grab('rp-alice', packet.id);
    expect(again).toMatchObject({ __typename: 'AlreadyGrabbed', share: { userId: 'rp-alice' } });
    // Without a token there is nothing to see at all.
    const anonymous = await near.raw(PacketPeopleDocument, { id: packet.id });
    expect(errorCodes(anonymous)).toEqual(['UNAUTHENTICATED']);
    expect(anonymous.body.data?.redPacket ?? null).toBeNull();

    // Another packet: the same users, unrelated aliases.
    const next = await near.create(sender, { totalAmount: 600, count: 3 });
    for (const user of grabbers.slice(0, 2)) await far.grab(user, next.id);
    const elsewhere = packetPeople((await near.people('rp-stranger', next.id))!);
    aliasesFrom([
      [sender, elsewhere.senderId],
      ['rp-alice', elsewhere.shares[0]!],
      ['rp-bob', elsewhere.shares[1]!],
    ]);
    expect([elsewhere.senderId, ...elsewhere.shares].filter((alias) => [aliases(sender), ...grabbers.map(aliases)].includes(alias))).toEqual([]);
  });
});

describe('user ids in teams', () => {
  const teamPeople = (team: TeamStateFragment) => ({
    leaderId: team.leaderId,
    members: team.members.map((member) => member.userId),
    locks: team.locks.map((lock) => lock.userId),
  });

  it('follow the same rule, with one alias per user across every team and event of the activity', async () => {
    const activityId = `privacy-${randomUUID().slice(0, 8)}`;
    const far = teamsAt(instances.other.url);
    const near = teamsAt(instances.server.url);
    const team = await far.open('tm-leader', { activityId, capacity: 4 });
    expect((await far.confirm('tm-member', team.id, 'tm-pay')).__typename).toBe('Team');
    const watch = async (subscribe: typeof subscribeWs, token: string) => track(subscribe(instances.server.url, TeamStatusDocument, { teamId: team.id }, token));
    const subscribers = {
      stranger: await watch(subscribeSse, await tokenOf('tm-stranger')),
      member: await watch(subscribeWs, await tokenOf('tm-member')),
      operator: await watch(subscribeWs, await tokenOf('tm-ops', { admin: true })),
    };
    await Promise.all(Object.values(subscribers).map((subscription) => subscription.until((events) => events.length >= 1)));
    expect((await far.lock('tm-holder', team.id)).__typename).toBe('SeatLocked');
    const views = async (subscription: Subscription<TeamStatusSubscription>) =>
      dataOf(await subscription.until((events) => dataOf(events, 'teamStatus').at(-1)?.locks.length === 1), 'teamStatus').map(teamPeople);
    const [strangerViews, memberViews, operatorViews] = await Promise.all([views(subscribers.stranger), views(subscribers.member), views(subscribers.operator)]);

    expect(operatorViews.at(-1)).toEqual({ leaderId: 'tm-leader', members: ['tm-leader', 'tm-member'], locks: ['tm-holder'] });
    const strangerFinal = strangerViews.at(-1)!;
    const aliases = aliasesFrom([
      ['tm-leader', strangerFinal.leaderId],
      ['tm-member', strangerFinal.members[1]!],
      ['tm-holder', strangerFinal.locks[0]!],
    ]);
    const expected = (show: Show, locks = 1) => ({ leaderId: show('tm-leader'), members: ['tm-leader', 'tm-member'].map(show), locks: ['tm-holder'].slice(0, locks).map(show) });
    for (const [views, show] of [
      [strangerViews, aliases],
      [memberViews, shownTo('tm-member', aliases)],
      [operatorViews, everyone],
    ] as const) {
      for (const view of views) expect(view).toEqual(expected(show, view.locks.length));
    }
    for (const teams of [near, far]) {
      expect(teamPeople((await teams.team('tm-stranger', team.id))!)).toEqual(expected(aliases));
      expect(teamPeople((await teams.team('tm-holder', team.id))!)).toEqual(expected(shownTo('tm-holder', aliases)));
      expect(teamPeople((await teams.team('tm-leader', team.id))!)).toEqual(expected(shownTo('tm-leader', aliases)));
    }

    // Another team of the activity: the same aliases. Another activity: unrelated ones.
    const second = await far.open('tm-member', { activityId, capacity: 4 });
    expect((await near.team('tm-stranger', second.id))?.leaderId).toBe(aliases('tm-member'));
    const elsewhere = await far.open('tm-member', { activityId: `${activityId}-b` });
    const otherAlias = (await near.team('tm-stranger', elsewhere.id))!.leaderId;
    expect(otherAlias).toMatch(ALIAS_PATTERN);
    expect([aliases('tm-leader'), aliases('tm-member'), aliases('tm-holder')]).not.toContain(otherAlias);
  });
});

describe('lottery winners', () => {
  it('are aliased per activity, the same for every subscription of the activity on any instance', async () => {
    const now = Date.now();
    const create = () =>
      lotteryAt(instances.server.url).create('lw-ops', {
        title: 'privacy',
        startsAt: new Date(now - 60_000).toISOString(),
        endsAt: new Date(now + 3_600_000).toISOString(),
        prizes: [{ title: 'prize', weight: 1, totalStock: 10 }],
      });
    const [first, second] = [await create(), await create()];
    for (const activity of [first, second]) {
      for (const user of ['lw-winner', 'lw-runner-up']) {
        expect((await lotteryAt(instances.other.url).draw(user, activity.id)).__typename).toBe('LotteryWin');
      }
    }
    const stranger = await tokenOf('lw-stranger');
    const winners = async (url: string, activityId: string) => {
      const subscription = track(subscribeWs(url, LotteryWinnersDocument, { activityId, recent: 2 }, stranger));
      const events: ExecutionResult<LotteryWinnersSubscription>[] = await subscription.until((all) => all.length >= 2);
      return dataOf(events, 'lotteryWinners').map((win) => win.userId);
    };
    const firstAliases = await winners(instances.server.url, first.id);
    aliasesFrom([
      ['lw-winner', firstAliases[0]!],
      ['lw-runner-up', firstAliases[1]!],
    ]);
    expect(await winners(instances.other.url, first.id)).toEqual(firstAliases);
    const secondAliases = await winners(instances.server.url, second.id);
    aliasesFrom([
      ['lw-winner', secondAliases[0]!],
      ['lw-runner-up', secondAliases[1]!],
    ]);
    expect(secondAliases.filter((alias) => firstAliases.includes(alias))).toEqual([]);
  });
});

describe('USER_ALIAS_SECRET', () => {
  it('keys the aliases instead of the JWT secret', async () => {
    const secret = 'a-dedicated-alias-secret-of-32-characters-or-more';
    const custom = await startServerProcess({ ...env.vars, USER_ALIAS_SECRET: secret });
    try {
      const redPackets = redPacketsAt(instances.server.url);
      const packet = await redPackets.create('as-sender', { totalAmount: 100, count: 1 });
      await redPackets.grab('as-bob', packet.id);
      const shown = async (url: string) => (await redPacketsAt(url).people('as-stranger', packet.id))!.shares[0]!.userId;
      const scope = aliasScope.redPacket(packet.id);
      expect(await shown(instances.server.url)).toBe(new UserAliases(TEST_JWT_SECRET).alias(scope, 'as-bob'));
      expect(await shown(custom.url)).toBe(new UserAliases(secret).alias(scope, 'as-bob'));
      expect(await shown(custom.url)).not.toBe(await shown(instances.server.url));
    } finally {
      await stopAll(custom);
    }
  });
});

describe('LOG_USER_IDS=alias', () => {
  it("writes each user id in log lines as the user's log alias, which npm run log-alias gives", async () => {
    const phone = '+8613900000000';
    const aliased = await startServerProcess({ ...env.vars, LOG_LEVEL: 'info', LOG_USER_IDS: 'alias' });
    try {
      const credited = await gql(aliased.url, CreditWalletDocument, { userId: phone, amountCents: 100, reason: 'log test', requestId: randomUUID() }, await tokenOf('ops', { admin: true }));
      expect(credited.body.errors).toBeUndefined();
      const alias = logAliases(TEST_JWT_SECRET)(phone);
      expect(alias).toMatch(ALIAS_PATTERN);
      expect(alias).not.toBe(new UserAliases(TEST_JWT_SECRET).alias(aliasScope.redPacket('any'), phone));
      await expect.poll(() => aliased.output().includes('wallet credited')).toBe(true);
      const line = aliased
        .output()
        .split('\n')
        .find((entry) => entry.includes('wallet credited'))!;
      expect(JSON.parse(line)).toMatchObject({ userId: alias, amountCents: 100 });
      expect(aliased.output()).not.toContain(phone);
      const script = execFileSync(process.execPath, ['--import', 'tsx', 'scripts/log-alias.ts', phone], { env: { ...process.env, ...env.vars }, encoding: 'utf8' });
      expect(script.trim()).toBe(alias);
    } finally {
      await stopAll(aliased);
    }
  });
});

describe('UserAliases', () => {
  const aliases = new UserAliases(TEST_JWT_SECRET);
  const scope = aliasScope.redPacket('p1');

  it('shows an anonymous caller and other users the alias, the user and operators the id', () => {
    const alias = aliases.alias(scope, 'bob');
    expect(alias).toMatch(ALIAS_PATTERN);
    expect(aliases.shownTo(null, scope, 'bob')).toBe(alias);
    expect(aliases.shownTo({ userId: 'alice', roles: [] }, scope, 'bob')).toBe(alias);
    expect(aliases.shownTo({ userId: 'bob', roles: [] }, scope, 'bob')).toBe('bob');
    expect(aliases.shownTo({ userId: 'ops', roles: [ADMIN_ROLE] }, scope, 'bob')).toBe('bob');
  });

  it('depends on the secret and keeps campaigns apart, however ids are chosen', () => {
    expect(new UserAliases('another-secret-that-is-at-least-32-characters').alias(scope, 'bob')).not.toBe(aliases.alias(scope, 'bob'));
    // The same text split differently between campaign id and user id.
    expect(aliases.alias(aliasScope.redPacket('p1:x'), 'y')).not.toBe(aliases.alias(aliasScope.redPacket('p1'), 'x:y'));
    expect(aliases.alias(aliasScope.lottery('p1'), 'bob')).not.toBe(aliases.alias(scope, 'bob'));
  });
});
