import { print } from 'graphql';
import { Agent, fetch } from 'undici';
import { beforeAll, describe, expect, it } from 'vitest';
import { LotteryStore } from '../src/domain/lottery/store.ts';
import { Scripts } from '../src/infra/redis/scripts.ts';
import { type CreateLotteryInput, DrawLotteryDocument, UpdateLotteryDocument, type UpdateLotteryInput, type UpdateLotteryMutation } from './gql/generated.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { type LotteryClient, lotteryAt, runningWindow } from './support/lottery.ts';
import { expectLotteryInvariants, loadDraws } from './support/lotteryInvariants.ts';
import { waitFor } from './support/poll.ts';
import { stormOf, tallyOf } from './support/storm.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('lot_hot');
const lot = startedServer(env);
const OPERATOR = 'lot_hot-op';
let lottery: LotteryClient;

beforeAll(() => {
  lottery = lotteryAt(lot.server.url);
});

const create = (input: Omit<CreateLotteryInput, 'startsAt' | 'endsAt'>) => lottery.create(OPERATOR, { ...runningWindow(), ...input });
const draw = (activityId: string, user: string) => lottery.draw(user, activityId);

async function update(activityId: string, input: UpdateLotteryInput) {
  const updateLotteryActivity = await lottery.update(OPERATOR, activityId, input);
  if (updateLotteryActivity.__typename !== 'LotteryActivity') throw new Error(JSON.stringify(updateLotteryActivity));
  return updateLotteryActivity;
}

const drawStorm = (activityId: string, tokens: string[]) => stormOf(lot.server.url, DrawLotteryDocument, { activityId }, tokens);

/** An operator's change sent on a connection of its own, past the draws queued on theirs. */
async function updateBesideTheStorm(activityId: string, input: UpdateLotteryInput) {
  const operator = new Agent({ connections: 1 });
  const response = await fetch(lot.server.url, {
    method: 'POST',
    dispatcher: operator,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${await tokenOf(OPERATOR, { admin: true })}` },
    body: JSON.stringify({ query: print(UpdateLotteryDocument), variables: { activityId, input } }),
  });
  const changed = ((await response.json()) as { data: UpdateLotteryMutation }).data.updateLotteryActivity;
  await operator.close();
  return changed;
}

describe('operators change a running activity', () => {
  it('changes weights while 500 draws are in flight: each draw used the old settings or the new ones, never a mix', async () => {
    const oldWeights = [1, 3, 6, 10, 20, 60];
    const newWeights = [60, 20, 10, 6, 3, 1];
    const activity = await create({ title: 'hot', noPrizeWeight: 0, prizes: oldWeights.map((weight, i) => ({ title: `p${i}`, weight, totalStock: 100_000 })) });
    const tokens = await Promise.all(Array.from({ length: 500 }, (_, i) => tokenOf(`hot-${i}`)));

    // The change goes once 50 draws are answered.
    const storm = drawStorm(activity.id, tokens);
    await waitFor('the first draws to be answered', () => storm.progress.answered >= 50, { intervalMs: 2 });
    const changed = await updateBesideTheStorm(activity.id, { noPrizeWeight: 25, prizes: activity.prizes.map((prize, i) => ({ prizeId: prize.id, weight: newWeights[i] })) });
    expect(storm.progress.answered, 'draws still in flight when the change was answered').toBeLessThan(500);
    expect(changed).toMatchObject({ __typename: 'LotteryActivity', settingsVersion: 2, noPrizeWeight: 25 });
    const answers = await storm.answers;

    // Every answer carries its version, and a win the weight of that version.
    const weightsOf = { 1: oldWeights, 2: newWeights } as Record<number, number[]>;
    const versions = new Map<number, number>();
    for (const body of answers) {
      expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
      const result = body.data!.drawLottery;
      if (result.__typename !== 'LotteryWin' && result.__typename !== 'LotteryLose') throw new Error(JSON.stringify(result));
      versions.set(result.settingsVersion, (versions.get(result.settingsVersion) ?? 0) + 1);
      if (result.__typename === 'LotteryWin') {
        const position = activity.prizes.findIndex((prize) => prize.id === result.prize.id);
        expect(result.prize.weight).toBe(weightsOf[result.settingsVersion]![position]);
      }
    }
    expect([...versions.keys()].sort()).toEqual([1, 2]);
    expect(versions.get(1)).toBeGreaterThanOrEqual(50);

    // In PostgreSQL: every draw replays exactly against the settings of its version
    // (weights, noPrizeWeight and total all from that one version), and the switch
    // happened at one point in time.
    const rows = await expectLotteryInvariants(lot.stores, activity.id);
    expect(rows).toHaveLength(500);
    for (const row of rows) expect(row.weight_total).toBe(row.settings_version === 1 ? 100 : 125);
    const lastOld = Math.max(...rows.filter((row) => row.settings_version === 1).map((row) => row.drawn_at.getTime()));
    const firstNew = Math.min(...rows.filter((row) => row.settings_version === 2).map((row) => row.drawn_at.getTime()));
    expect(lastOld).toBeLessThanOrEqual(firstNew);

    for (const row of [rows[0]!, rows.at(-1)!]) {
      const lotteryDrawAudit = await lottery.audit(OPERATOR, row.id);
      expect(lotteryDrawAudit).toMatchObject({ drawId: row.id, settingsVersion: row.settings_version, recordedPrizeId: row.prize_id, replayedPrizeId: row.prize_id, matches: true });
    }
  });

  it('ends an activity now while draws are in flight: none is recorded after the end it records', async () => {
    // The window is a few Redis round trips wide: three rounds make a miss unlikely.
    for (let round = 0; round < 3; round++) {
      const activity = await create({ title: `ending ${round}`, noPrizeWeight: 1, prizes: [{ title: 'p', weight: 1, totalStock: 100_000 }] });
      const tokens = await Promise.all(Array.from({ length: 400 }, (_, i) => tokenOf(`ending-${round}-${i}`)));
      const storm = drawStorm(activity.id, tokens);
      await waitFor('the first draws to be answered', () => storm.progress.answered >= 50, { intervalMs: 2 });
      const ended = await updateBesideTheStorm(activity.id, { endsAt: new Date(Date.parse(activity.startsAt) + 1).toISOString() });
      if (ended.__typename !== 'LotteryActivity') throw new Error(JSON.stringify(ended));
      expect(ended.status).toBe('ENDED');
      const kinds = await tallyOf(storm.answers, ({ drawLottery: result }) => (result.__typename === 'ActivityNotActive' ? result.reason : result.__typename));
      expect(kinds.get('ENDED'), JSON.stringify([...kinds])).toBeGreaterThan(0);

      const rows = await expectLotteryInvariants(lot.stores, activity.id);
      expect(rows.length).toBe((kinds.get('LotteryWin') ?? 0) + (kinds.get('LotteryLose') ?? 0));
      const { rows: recorded } = await lot.stores.sql.query<{ ends_at: Date }>('SELECT ends_at FROM lottery_activity WHERE id = $1', [activity.id]);
      expect(recorded[0]!.ends_at.toISOString()).toBe(ended.endsAt);
      const lastDrawnAt = Math.max(...rows.map((row) => row.drawn_at.getTime()));
      expect(lastDrawnAt, `round ${round}: last draw ${new Date(lastDrawnAt).toISOString()}, end ${ended.endsAt}`).toBeLessThan(Date.parse(ended.endsAt));
    }
  });

  it('pauses and resumes: a paused activity refuses draws without counting them', async () => {
    const activity = await create({ title: 'pause', dailyDrawLimit: 2, prizes: [{ title: 'a', weight: 1, totalStock: 10 }] });
    expect((await draw(activity.id, 'pauser')).__typename).toBe('LotteryWin');
    expect(await update(activity.id, { paused: true })).toMatchObject({ paused: true, status: 'PAUSED', settingsVersion: 2 });
    expect(await draw(activity.id, 'pauser')).toMatchObject({ __typename: 'ActivityNotActive', reason: 'PAUSED' });
    expect(await update(activity.id, { paused: false })).toMatchObject({ paused: false, status: 'ACTIVE', settingsVersion: 3 });
    // The refused draw did not count: one draw is left today.
    expect((await draw(activity.id, 'pauser')).__typename).toBe('LotteryWin');
    expect((await draw(activity.id, 'pauser')).__typename).toBe('DrawLimitReached');
    await expectLotteryInvariants(lot.stores, activity.id);
  });

  it('tops up stock, and changes limits and the end time, for the next draw', async () => {
    const activity = await create({ title: 'top-up', prizes: [{ title: 'rare', weight: 1, totalStock: 3 }] });
    const [rare] = activity.prizes;
    const results = async (n: number) => {
      const kinds: string[] = [];
      for (let i = 0; i < n; i++) kinds.push((await draw(activity.id, `topper-${i % 2}`)).__typename);
      return kinds;
    };
    expect(await results(4)).toEqual(['LotteryWin', 'LotteryWin', 'LotteryWin', 'LotteryLose']);
    const toppedUp = await update(activity.id, { prizes: [{ prizeId: rare!.id, addStock: 2 }] });
    expect(toppedUp.prizes[0]).toMatchObject({ totalStock: 5, remainingStock: 2 });
    expect(await results(3)).toEqual(['LotteryWin', 'LotteryWin', 'LotteryLose']);

    // topper-0 has drawn 4 times today, topper-1 3 times.
    const limited = await update(activity.id, { dailyDrawLimit: 4 });
    // A change to what is already so makes no new version.
    expect(await update(activity.id, { dailyDrawLimit: 4, prizes: [{ prizeId: rare!.id, weight: toppedUp.prizes[0]!.weight }] })).toMatchObject({
      settingsVersion: limited.settingsVersion,
    });
    expect(await draw(activity.id, 'topper-0')).toMatchObject({ __typename: 'DrawLimitReached', dailyDrawLimit: 4 });
    expect((await draw(activity.id, 'topper-1')).__typename).toBe('LotteryLose');

    // An end already past (just after the start) ends it now: no draw made since is dated after the end.
    const endingAtMs = Date.now();
    const ended = await update(activity.id, { endsAt: new Date(Date.parse(activity.startsAt) + 1).toISOString() });
    expect(ended.status).toBe('ENDED');
    expect(Date.parse(ended.endsAt)).toBeGreaterThanOrEqual(endingAtMs - 1_000);
    const lastDrawnAt = Math.max(...(await loadDraws(lot.stores, activity.id)).map((row) => row.drawn_at.getTime()));
    expect(Date.parse(ended.endsAt)).toBeGreaterThanOrEqual(lastDrawnAt);
    expect(await draw(activity.id, 'topper-1')).toMatchObject({ __typename: 'ActivityNotActive', reason: 'ENDED' });
    // Ended stays ended: its subscribers were told so.
    const reopened = await lottery.raw(UpdateLotteryDocument, { activityId: activity.id, input: { endsAt: new Date(Date.now() + 86_400_000).toISOString() } }, OPERATOR, { admin: true });
    expect(reopened.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'endsAt'], code: 'ENDED_STAYS_ENDED' }] });
    const paused = await lottery.raw(UpdateLotteryDocument, { activityId: activity.id, input: { paused: true } }, OPERATOR, { admin: true });
    expect(paused.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'paused'], code: 'ENDED_NO_CHANGE' }] });
    expect(await draw(activity.id, 'topper-1')).toMatchObject({ __typename: 'ActivityNotActive', reason: 'ENDED' });
    // Decided again in the script, in Redis time: a change that passed the service's check
    // an instant before the end cannot land after it.
    const store = new LotteryStore(lot.stores.redis, new Scripts(lot.stores.redis));
    const current = (await store.readSettings(activity.id))!;
    const moved = { ...current, version: current.version + 1, endsAtMs: Date.now() + 86_400_000 };
    expect((await store.updateSettings(activity.id, current.version, moved, OPERATOR, null, new Map(), 0)).kind).toBe('ended');

    const lotteryActivity = await lottery.activity(OPERATOR, activity.id, { admin: true });
    expect(lotteryActivity).toMatchObject({ settingsVersion: 4, dailyDrawLimit: 4, prizes: [{ totalStock: 5, remainingStock: 0 }] });
    const rows = await expectLotteryInvariants(lot.stores, activity.id);
    expect(rows.map((row) => row.settings_version)).toEqual([1, 1, 1, 1, 2, 2, 2, 3]);
    expect((await loadDraws(lot.stores, activity.id)).filter((row) => row.prize_id).map((row) => row.stock_unit)).toEqual([1, 2, 3, 4, 5]);
  });

  it("keeps every prize's chance with soldOutOdds NO_PRIZE; SHARED hands a sold-out prize's chance to the prizes left", async () => {
    // A 1-in-a-million grand prize beside a common coupon that runs out after 3 wins.
    const activity = await create({
      title: 'odds',
      noPrizeWeight: 0,
      soldOutOdds: 'NO_PRIZE',
      prizes: [
        { title: 'grand', weight: 1, totalStock: 5 },
        { title: 'coupon', weight: 1_000_000, totalStock: 3 },
      ],
    });
    expect(activity.soldOutOdds).toBe('NO_PRIZE');
    const wins = [];
    for (let i = 0; i < 3; i += 1) wins.push(await draw(activity.id, `odds-${i}`));
    expect(wins.map((won) => (won.__typename === 'LotteryWin' ? won.prize.title : won.__typename))).toEqual(['coupon', 'coupon', 'coupon']);
    // The coupon's weight now loses: the grand prize stays at one in a million.
    const losses = [];
    for (let i = 3; i < 23; i += 1) losses.push(await draw(activity.id, `odds-${i}`));
    expect(new Set(losses.map((lost) => lost.__typename))).toEqual(new Set(['LotteryLose']));
    const [lost] = await loadDraws(lot.stores, activity.id).then((rows) => rows.filter((row) => !row.prize_id));
    expect(await lottery.audit(OPERATOR, lost!.id)).toMatchObject({ weightTotal: 1_000_001, matches: true, replayedPrizeId: null });

    // SHARED, from the next draw: the grand prize is all that is left in the pool.
    expect(await update(activity.id, { soldOutOdds: 'SHARED' })).toMatchObject({ soldOutOdds: 'SHARED' });
    const shared = await draw(activity.id, 'odds-shared');
    expect(shared.__typename === 'LotteryWin' && shared.prize.title).toBe('grand');
    await expectLotteryInvariants(lot.stores, activity.id);
  });

  it('tells a change that was not applied from one that may be: 20 restocks racing, each retried with its requestId, add 20 units', async () => {
    const activity = await create({ title: 'racing restocks', prizes: [{ title: 'cup', weight: 1, totalStock: 3 }] });
    const [cup] = activity.prizes;
    const told: string[] = [];
    const restock = async (requestId: string) => {
      const input = { requestId, prizes: [{ prizeId: cup!.id, addStock: 1 }] };
      for (;;) {
        const { body } = await lottery.raw(UpdateLotteryDocument, { activityId: activity.id, input }, OPERATOR, { admin: true });
        if (!body.errors) return body.data!.updateLotteryActivity;
        expect(body.errors.map((error) => error.extensions?.code)).toEqual(['SERVICE_UNAVAILABLE']);
        told.push(body.errors[0]!.message);
      }
    };
    // Each read the settings of one version, and only one change a version can be made over.
    await Promise.all(Array.from({ length: 20 }, (_, i) => restock(`race-${i}`)));
    expect(told.length, 'changes that lost every race').toBeGreaterThan(0);
    // Nothing held PostgreSQL back: each was told it was not applied, and was, once, when sent again.
    expect(new Set(told)).toEqual(new Set(['the lottery changed while the change was being applied, so it was not applied; try again']));
    expect(await lottery.activity(OPERATOR, activity.id, { admin: true })).toMatchObject({ settingsVersion: 21, prizes: [{ totalStock: 23 }] });
    // A retry now answers each change as it is, applied once.
    expect(await restock('race-7')).toMatchObject({ settingsVersion: 21, prizes: [{ totalStock: 23 }] });
    const { rows } = await lot.stores.sql.query<{ total_stock: number }>('SELECT total_stock FROM lottery_prize WHERE id = $1', [cup!.id]);
    expect(rows).toEqual([{ total_stock: 23 }]);
  });

  it('refuses a daily stock of 0, as on creation, and removes the daily stock with clearDailyStock', async () => {
    const activity = await create({ title: 'daily', noPrizeWeight: 0, prizes: [{ title: 'cup', weight: 1, totalStock: 10, dailyStock: 1 }] });
    const [cup] = activity.prizes;
    expect((await draw(activity.id, 'daily-0')).__typename).toBe('LotteryWin');
    expect((await draw(activity.id, 'daily-1')).__typename).toBe('LotteryLose');
    // An operator typing 0 "to stop this prize for today" once lifted the cap instead.
    const zero = await lottery.raw(UpdateLotteryDocument, { activityId: activity.id, input: { prizes: [{ prizeId: cup!.id, dailyStock: 0 }] } }, OPERATOR, { admin: true });
    expect(zero.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'prizes', 0, 'dailyStock'], code: 'TOO_SMALL', minimum: 1 }] });
    const both = await lottery.raw(UpdateLotteryDocument, { activityId: activity.id, input: { prizes: [{ prizeId: cup!.id, dailyStock: 2, clearDailyStock: true }] } }, OPERATOR, {
      admin: true,
    });
    expect(both.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'prizes', 0, 'clearDailyStock'], code: 'SET_AND_CLEARED' }] });
    expect(await lottery.activity(OPERATOR, activity.id, { admin: true })).toMatchObject({ settingsVersion: 1, prizes: [{ dailyStock: 1 }] });
    expect((await draw(activity.id, 'daily-2')).__typename).toBe('LotteryLose');

    expect((await update(activity.id, { prizes: [{ prizeId: cup!.id, clearDailyStock: true }] })).prizes[0]).toMatchObject({ dailyStock: null });
    expect((await draw(activity.id, 'daily-3')).__typename).toBe('LotteryWin');
    expect((await update(activity.id, { prizes: [{ prizeId: cup!.id, dailyStock: 2 }] })).prizes[0]).toMatchObject({ dailyStock: 2 });
    expect((await draw(activity.id, 'daily-4')).__typename).toBe('LotteryLose');
    await expectLotteryInvariants(lot.stores, activity.id);
  });
});

describe('an operator retries a change with its requestId', () => {
  // A statement waits half a second for a lock before its commit is given up for the sweeper.
  const held = startedServer(testEnv('lot_hot_held', { DATABASE_LOCK_TIMEOUT_MS: '500' }));
  const CHANGE_MAY_BE_APPLIED = 'the change could not be confirmed in the database and may still be applied; retry with the same requestId (a retry without one may apply it twice)';

  it('adds stock once when PostgreSQL could not confirm the first call, however often it is retried, after a rebuild too', async () => {
    const client = lotteryAt(held.server.url);
    const activity = await client.create(OPERATOR, { ...runningWindow(), title: 'held restock', prizes: [{ title: 'cup', weight: 1, totalStock: 3 }] });
    const [cup] = activity.prizes;
    const restock = { requestId: 'restock-1', prizes: [{ prizeId: cup!.id, addStock: 2 }] };
    const send = (input: UpdateLotteryInput = restock) => client.raw(UpdateLotteryDocument, { activityId: activity.id, input }, OPERATOR, { admin: true });

    // Held by hand, as a migration or a stray session would.
    const holder = await held.stores.sql.connect();
    const whileHeld = [];
    try {
      await holder.query('BEGIN; LOCK TABLE lottery_prize IN ACCESS EXCLUSIVE MODE');
      // The first call, and a retry while its change waits in the journal.
      for (let i = 0; i < 2; i++) whileHeld.push((await send()).body.errors);
    } finally {
      await holder.query('COMMIT');
      holder.release();
    }
    for (const errors of whileHeld) expect(errors).toMatchObject([{ message: CHANGE_MAY_BE_APPLIED, extensions: { code: 'SERVICE_UNAVAILABLE' } }]);

    const changed = { __typename: 'LotteryActivity', settingsVersion: 2, prizes: [{ totalStock: 5 }] };
    for (let i = 0; i < 2; i++) expect((await send()).body.data?.updateLotteryActivity).toMatchObject(changed);
    // Redis forgets the activity: rebuilt from PostgreSQL, it still knows the change.
    await held.stores.redis.del(`{lot:${activity.id}}:meta`);
    expect((await send()).body.data?.updateLotteryActivity).toMatchObject(changed);

    // The same requestId for another change is refused, and changes nothing.
    const other = await send({ ...restock, prizes: [{ prizeId: cup!.id, addStock: 3 }] });
    expect(other.body.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', issues: [{ path: ['input', 'requestId'], code: 'REQUEST_ID_OF_ANOTHER_CHANGE' }] });
    // Another operator's requestId is their own.
    expect(await client.update(`${OPERATOR}-2`, activity.id, restock)).toMatchObject({ settingsVersion: 3, prizes: [{ totalStock: 7 }] });

    const { rows } = await held.stores.sql.query('SELECT version, changed_by, request_id FROM lottery_settings WHERE activity_id = $1 ORDER BY version', [activity.id]);
    expect(rows).toEqual([
      { version: 1, changed_by: OPERATOR, request_id: null },
      { version: 2, changed_by: OPERATOR, request_id: 'restock-1' },
      { version: 3, changed_by: `${OPERATOR}-2`, request_id: 'restock-1' },
    ]);
    expect((await held.stores.sql.query('SELECT total_stock FROM lottery_prize WHERE id = $1', [cup!.id])).rows).toEqual([{ total_stock: 7 }]);
  });
});
