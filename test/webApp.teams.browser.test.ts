import type { Page, WebSocketRoute } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServerTimeDocument } from './gql/generated.ts';
import { STEP_MS, focused, startWebApp } from './support/browser.ts';
import { requestsAt } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { webDocumentId } from './support/persistedDocuments.ts';
import { teamsAt } from './support/teams.ts';
import { walletsAt } from './support/wallets.ts';

// The web app's group-buy pages and wallet, in real browsers: each context is one person's phone.
const env = testEnv('web_app_teams');
/** Short enough to watch a lock run out; long enough to lock a seat and pay for it under load. */
const LOCK_SECONDS = 6;
/** The skew of one phone's clock: its countdowns must still agree with the server's. */
const CLOCK_AHEAD_MS = 90_000;
/** How long a failing team has: time enough to open it, lock a seat and pay for it under load. */
const FORMATION_SECONDS = 7;
let web: Awaited<ReturnType<typeof startWebApp>>;
let server: typeof web.server;
let appUrl: string;
let app: typeof web.app;

beforeAll(async () => {
  // Expired locks are swept often, so a page sees its seat free soon after the countdown ends;
  // and so are the teams past their deadline, and the refunds they leave.
  web = await startWebApp(env, { TEAM_SWEEP_INTERVAL_MS: '50', SWEEP_INTERVAL_MS: '200' });
  ({ server, appUrl, app } = web);
});

afterAll(() => web?.close());

const seats = (page: Page, kind: 'member-seat' | 'paying-seat' | 'free-seat') => page.getByTestId(kind).count();

/** The seats every page shows, once they all agree: [members, paying, free]. */
async function expectSeats(pages: Page[], expected: [number, number, number], timeout = STEP_MS): Promise<void> {
  for (const page of pages) {
    await expect.poll(async () => [await seats(page, 'member-seat'), await seats(page, 'paying-seat'), await seats(page, 'free-seat')], { timeout }).toEqual(expected);
  }
}

/** A 64-character name, the longest the development sign-in takes, with no break opportunity. */
const longName = (prefix: string) => `${prefix}${'W'.repeat(64 - prefix.length)}`;

/** Whether the page scrolls sideways at its width (a long word, a fixed-size box). */
const scrollsSideways = (page: Page) => page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);

/** How far a page's countdown (the seat's, or the payment's) is from `expiresAt` counted on the server's clock, in ms. */
async function countdownError(page: Page, expiresAt: string, countdown: 'seat-countdown' | 'pay-countdown' = 'seat-countdown'): Promise<number> {
  const [shown, { serverTime }] = await Promise.all([page.getByTestId(countdown).getAttribute('data-remaining-ms'), requestsAt(server.url).data(ServerTimeDocument, {}, 'clock')]);
  return Math.abs(Number(shown) - (Date.parse(expiresAt) - Date.parse(serverTime)));
}

describe('a group-buy team', () => {
  it('two phones watch one team: a lock counts down on the server clock, runs out, is paid, and the team completes', { timeout: 120_000 }, async () => {
    const activityId = 'web-tea';
    const teams = teamsAt(server.url);
    await teams.activity(activityId, { title: '拼团奶茶', capacity: 3, lockSeconds: LOCK_SECONDS, groupPriceCents: 990 });

    const leader = await app.signedIn('grace');
    await leader.goto(`${appUrl}#/groupbuy/${activityId}`);
    await leader.getByRole('button', { name: '我要开团' }).click();
    await leader.waitForURL(/#\/team\/[\w-]+$/);
    const teamId = leader.url().split('/').pop()!;

    // This phone's clock is a minute and a half fast; what it counts down must not be.
    const buyer = await app.signedIn('heidi', { clockAheadMs: CLOCK_AHEAD_MS });
    expect((await buyer.evaluate(() => Date.now())) - Date.now()).toBeGreaterThan(CLOCK_AHEAD_MS - 10_000);
    await buyer.getByRole('link', { name: '拼团' }).click();
    await buyer.getByRole('link', { name: '拼团奶茶' }).waitFor();
    await app.screenshot(buyer, 'group-buy-activities');
    await buyer.getByRole('link', { name: '拼团奶茶' }).click();
    // Each team's link says whose team it is (others' ids are aliases), and the struck-through price that it is the original one.
    await buyer.getByRole('link', { name: /^参团（2 个空位）：拼友 [\w-]{4} 的团$/ }).waitFor();
    expect(await buyer.locator('s').textContent()).toMatch(/^原价 ¥\d+\.\d\d$/);
    await app.screenshot(buyer, 'group-buy-teams');
    await buyer.getByRole('link', { name: /^参团/ }).click();
    await buyer.waitForURL(leader.url());
    const watchers = [leader, buyer];
    await expectSeats(watchers, [1, 0, 2]);
    // A shared link says what is bought and for how much before any seat is locked.
    await expect.poll(() => buyer.getByRole('heading', { level: 2 }).textContent()).toContain('拼团奶茶');
    await expect.poll(() => buyer.getByTestId('team-price').textContent()).toBe('拼团价 ¥9.90');
    // The leader has the team's link to hand round, as a packet's sender has the packet's.
    expect(await leader.getByTestId('share-link').textContent()).toBe(leader.url());
    // A reload would lose this: every change below must arrive live.
    for (const page of watchers) await page.evaluate(() => Object.assign(window, { notReloaded: true }));
    // Changes are said in a live region that was there before them, not one inserted with its text.
    const leaderNews = (await leader.getByTestId('team-news').elementHandle())!;
    const buyerNews = (await buyer.getByTestId('team-news').elementHandle())!;
    expect(await leaderNews.textContent()).toBe('');

    const lockId = webDocumentId('WebLockTeamSeat');
    const locked = buyer.waitForResponse((response) => response.url().endsWith('/graphql') && response.request().postDataJSON()?.documentId === lockId);
    await buyer.getByRole('button', { name: '参团：锁定座位' }).click();
    const { payment } = (await (await locked).json()).data.lockTeamSeat as { payment: { expiresAt: string } };
    await leader.getByTestId('paying-seat').waitFor({ timeout: 1000 });
    const lock = (await teams.team('heidi', teamId))!.locks[0]!;
    await expectSeats(watchers, [1, 1, 1]);
    // The buyer is told to pay by the payment's deadline, a tenth of the lock before the seat frees.
    expect(Date.parse(lock.expiresAt) - Date.parse(payment.expiresAt)).toBe(LOCK_SECONDS * 100);
    expect(await countdownError(buyer, payment.expiresAt, 'pay-countdown')).toBeLessThan(1000);
    await expect.poll(() => leaderNews.textContent()).toBe('1/3 人已入团，1 人支付中，1 个空位');
    await expect.poll(() => buyerNews.textContent()).toBe('1/3 人已入团，1 人支付中，1 个空位；支付将在 10 秒内截止，请尽快支付');
    for (const page of watchers) {
      expect(await countdownError(page, lock.expiresAt)).toBeLessThan(1000);
      const [minutes, seconds] = (await page.getByTestId('seat-countdown').textContent())!.split(':').map(Number);
      // Within the same second of slack: the page learns the server's time from an event that took a moment to arrive.
      expect(minutes! * 60 + seconds!).toBeLessThanOrEqual(LOCK_SECONDS + 1);
    }
    await app.screenshot(buyer, 'team-paying');

    // Nobody pays: the seat frees itself on both phones when the server lets the lock go. A
    // third phone signs in meanwhile.
    const [third] = await Promise.all([app.signedIn('ivan'), expectSeats(watchers, [1, 0, 2], LOCK_SECONDS * 1000 + STEP_MS)]);
    await expect.poll(() => leaderNews.textContent()).toBe('1/3 人已入团，0 人支付中，2 个空位');
    for (const page of watchers) expect(await page.evaluate(() => 'notReloaded' in window)).toBe(true);

    // A lock paid through the sandbox provider becomes a seat on every phone.
    await third.goto(leader.url());
    const phones = [...watchers, third];
    await expectSeats([third], [1, 0, 2]);
    await buyer.getByRole('button', { name: '参团：锁定座位' }).click();
    // Each button is replaced by the next step, which takes the focus: pay, then the message.
    await expect.poll(() => focused(buyer)).toBe('BUTTON 沙箱支付 ¥9.90');
    await buyer.getByRole('button', { name: '沙箱支付 ¥9.90' }).click();
    await expect.poll(() => buyer.getByTestId('team-message').textContent()).toBe('支付成功，你已入团');
    await expect.poll(() => focused(buyer)).toBe('P 支付成功，你已入团');
    await expectSeats(phones, [2, 0, 1]);

    // The last seat is held: the full team says when it frees, then its payment completes the team.
    await third.getByRole('button', { name: '参团：锁定座位' }).click();
    await expectSeats(phones, [2, 1, 0]);
    await expect.poll(() => leader.getByTestId('next-unlock').textContent()).toMatch(/下一个座位 0:0\d 后释放/);
    await expect.poll(() => leaderNews.textContent()).toBe('2/3 人已入团，1 人支付中，暂无空位');
    await app.screenshot(leader, 'team-full');
    await third.getByRole('button', { name: '沙箱支付 ¥9.90' }).click();
    for (const page of phones) await expect.poll(() => page.getByTestId('team-status').getAttribute('data-status')).toBe('COMPLETE');
    await expect.poll(() => leaderNews.textContent()).toBe('拼团成功');
    await expectSeats(phones, [3, 0, 0]);
    for (const page of watchers) expect(await page.evaluate(() => 'notReloaded' in window)).toBe(true);
    await app.screenshot(leader, 'team-complete');
    expect(app.misbehaviour).toEqual([]);
  });
});

describe("a buyer's time to pay", () => {
  it("counts down to the payment's deadline; once it passes, the pay button gives way while the seat is still held", { timeout: 60_000 }, async () => {
    const team = await teamsAt(server.url).open('pia', { activityId: 'web-pay-by', title: '付款截止', capacity: 3 });
    const buyer = await app.signedIn('quinn');
    // The page's clock, so the test can jump to the payment's deadline without waiting for it.
    await buyer.clock.install();
    await buyer.goto(`${appUrl}#/team/${team.id}`);
    await buyer.getByRole('button', { name: '参团：锁定座位' }).click();
    await buyer.getByRole('button', { name: '沙箱支付 ¥9.90' }).waitFor();
    // A 300 s lock: pay within 4:30 (a tenth of it, 30 s, is left for the provider's notify).
    expect(await buyer.getByTestId('pay-countdown').textContent()).toMatch(/^请在 4:(30|29) 内支付$/);
    await buyer.clock.fastForward(271_000);
    await buyer.getByTestId('pay-closed').waitFor();
    expect(await buyer.getByRole('button', { name: '沙箱支付 ¥9.90' }).count()).toBe(0);
    // The seat is still held for the buyer, counting down to when the lock frees it.
    await expectSeats([buyer], [1, 1, 1]);
    expect(Number(await buyer.getByTestId('seat-countdown').getAttribute('data-remaining-ms'))).toBeGreaterThan(0);
    await buyer.getByRole('button', { name: '放弃座位' }).click();
    await expectSeats([buyer], [1, 0, 2]);
    expect(app.misbehaviour).toEqual([]);
  });
});

describe('the wallet', () => {
  it('shows my balance and its entries, newest first', { timeout: 60_000 }, async () => {
    const wallets = walletsAt(server.url);
    await wallets.credit('web-operator', { userId: 'judy', amountCents: 1000, reason: '新人礼' });
    await wallets.credit('web-operator', { userId: 'judy', amountCents: 234, reason: '活动奖励' });
    const page = await app.signedIn('judy');
    await page.getByRole('link', { name: '钱包' }).click();
    await expect.poll(() => page.getByTestId('wallet-balance').textContent()).toBe('12.34');
    const entries = await page.getByTestId('wallet-entry').allTextContents();
    expect(entries).toHaveLength(2);
    expect(entries[0]).toContain('活动奖励');
    expect(entries[0]).toContain('+2.34');
    expect(entries[1]).toContain('+10.00');
    await app.screenshot(page, 'wallet');
    expect(app.misbehaviour).toEqual([]);
  });

  it('a double tap on 加载更多 adds the next page once', { timeout: 60_000 }, async () => {
    const wallets = walletsAt(server.url);
    for (let i = 1; i <= 25; i++) await wallets.credit('web-operator', { userId: 'karl', amountCents: i, reason: `第 ${i} 笔` });
    const page = await app.signedIn('karl');
    await page.getByRole('link', { name: '钱包' }).click();
    await expect.poll(() => page.getByTestId('wallet-entry').count()).toBe(20);
    // Two clicks in one task: the second comes before the page could re-render a disabled button.
    await page.getByRole('button', { name: '加载更多' }).evaluate((button: HTMLButtonElement) => {
      button.click();
      button.click();
    });
    await expect.poll(() => page.getByTestId('wallet-entry').count()).toBe(25);
    await page.waitForTimeout(500);
    const entries = await page.getByTestId('wallet-entry').allTextContents();
    expect(entries).toHaveLength(25);
    expect(new Set(entries).size).toBe(25);
    expect(await page.getByRole('button', { name: '加载更多' }).count()).toBe(0);
    expect(app.misbehaviour).toEqual([]);
  });
});

describe('a team that fails', () => {
  it('a buyer who paid reads that it failed, not that they joined', { timeout: 90_000 }, async () => {
    const activityId = 'web-failing';
    const teams = teamsAt(server.url);
    // Signed in first: the team's few seconds are left for locking a seat and paying for it.
    const buyer = await app.signedIn('lena');
    // Two seats of three are taken by the deadline: the team fails, and the payment is refunded.
    // The lock would outlive the deadline: its payment is due a second (a tenth of the lock) before it, and payable.
    const team = await teams.open('kim', { activityId, title: '拼团失败的奶茶', capacity: 3, lockSeconds: 10, formationSeconds: FORMATION_SECONDS });
    await buyer.goto(`${appUrl}#/team/${team.id}`);
    await buyer.getByRole('button', { name: '参团：锁定座位' }).click();
    // The seat's countdown runs to the deadline, not to the lock's expiry further away.
    const remainingMs = async () => Number(await buyer.getByTestId('seat-countdown').getAttribute('data-remaining-ms'));
    await expect.poll(remainingMs).toBeGreaterThan(0);
    expect(await remainingMs()).toBeLessThanOrEqual(FORMATION_SECONDS * 1000);
    await buyer.getByRole('button', { name: '沙箱支付 ¥9.90' }).click();
    await expect.poll(() => buyer.getByTestId('team-message').textContent()).toBe('支付成功，你已入团');
    await expect.poll(() => buyer.getByTestId('team-status').getAttribute('data-status'), { timeout: FORMATION_SECONDS * 1000 + STEP_MS }).toBe('FAILED');
    expect(await buyer.getByTestId('team-status').textContent()).toBe('未能成团，已付的钱会退回');
    expect(await buyer.getByTestId('team-message').count()).toBe(0);
    await app.screenshot(buyer, 'team-failed');
    // The refund reaches the wallet, saying what it was for.
    await buyer.getByRole('link', { name: '钱包' }).click();
    await expect
      .poll(
        async () => {
          await buyer.reload();
          return (await buyer.getByTestId('wallet-entry').allTextContents()).join('\n');
        },
        { timeout: 20_000, interval: 500 },
      )
      .toContain('退款 · 拼团未成功');
    expect(app.misbehaviour).toEqual([]);
  });
});

describe('a leader whose answer was lost', () => {
  it('taps 我要开团 again and lands on the team the first tap opened: one team', { timeout: 60_000 }, async () => {
    const activityId = 'web-lost-open';
    await teamsAt(server.url).activity(activityId, { title: '回答丢了' });
    const page = await app.signedIn('lost-open');
    await page.goto(`${appUrl}#/groupbuy/${activityId}`);
    await page.getByRole('button', { name: '我要开团' }).waitFor();
    // The server opens the team; its answer never reaches the phone.
    await page.route('**/graphql', async (route) => {
      const response = await route.fetch();
      if ((await response.text()).includes('"openTeam"')) return route.abort('connectionreset');
      return route.fulfill({ response });
    });
    await page.getByRole('button', { name: '我要开团' }).click();
    await page.getByRole('alert').waitFor();
    await page.unroute('**/graphql');
    await page.getByRole('button', { name: '我要开团' }).click();
    await page.waitForURL(/#\/team\/[\w-]+$/);
    const { rows } = await web.stores.sql.query("SELECT id FROM team WHERE leader_id = 'lost-open'");
    expect(rows).toEqual([{ id: page.url().split('/').pop() }]);
    // The browser logs the reset itself (dropped, for the tests after this one); nothing else may be logged.
    expect(app.misbehaviour.filter((line) => !line.includes('ERR_CONNECTION_RESET'))).toEqual([]);
    app.misbehaviour.splice(0, app.misbehaviour.length);
  });
});

describe('a team page cut off from its live updates', () => {
  it('says it is reconnecting, holds back the pay button, and recovers', { timeout: 90_000 }, async () => {
    const activityId = 'web-offline';
    const teams = teamsAt(server.url);
    const team = await teams.open('mona', { activityId, title: '断线奶茶', capacity: 3 });
    const buyer = await app.signedIn('nina');
    // Installed before the page's live updates start, so their timers run on it (see below).
    await buyer.clock.install();
    // Every socket of the page passes through here: `down` refuses new ones, as a server that
    // is gone would; `silent` drops every frame both ways without closing, as a dead network does.
    const sockets: WebSocketRoute[] = [];
    let down = false;
    let silent = false;
    await buyer.routeWebSocket(/\/graphql$/, (socket) => {
      if (down) return void socket.close({ code: 1006 });
      const toServer = socket.connectToServer();
      socket.onMessage((message) => silent || toServer.send(message));
      toServer.onMessage((message) => silent || socket.send(message));
      sockets.push(socket);
    });
    await buyer.goto(`${appUrl}#/team/${team.id}`);
    await buyer.getByRole('button', { name: '参团：锁定座位' }).click();
    const pay = buyer.getByRole('button', { name: '沙箱支付 ¥9.90' });
    await expect.poll(() => pay.isEnabled()).toBe(true);
    expect(await buyer.getByTestId('reconnecting').isVisible()).toBe(false);
    // The live region is in the page (not hidden) while there is nothing to say, so what it says next is read.
    expect(await buyer.getByTestId('reconnecting').evaluate((region) => region.closest('[hidden]') === null && region.getAttribute('role'))).toBe('status');

    down = true;
    for (const socket of sockets) await socket.close({ code: 1006 });
    await expect.poll(() => buyer.getByTestId('reconnecting').textContent()).toBe('连接中断，正在重连…');
    await expect.poll(() => buyer.getByTestId('reconnecting').isVisible()).toBe(true);
    await expect.poll(() => pay.isDisabled()).toBe(true);
    expect(await buyer.getByTestId('pay-stale').isVisible()).toBe(true);
    await app.screenshot(buyer, 'team-reconnecting');

    down = false;
    // The retry waits at most 10 s; the pushed state comes first on the new socket.
    await expect.poll(() => buyer.getByTestId('reconnecting').isVisible(), { timeout: 10_000 + STEP_MS }).toBe(false);
    await expect.poll(() => pay.isEnabled()).toBe(true);

    // A device that goes offline says so too, and a request that cannot leave reads as a network problem.
    await buyer.context().setOffline(true);
    await expect.poll(() => buyer.getByTestId('reconnecting').isVisible()).toBe(true);
    await buyer.getByRole('button', { name: '放弃座位' }).click();
    await expect.poll(() => buyer.getByTestId('team-network-problem').textContent()).toBe('网络连接失败，请检查网络后重试');
    await buyer.context().setOffline(false);
    await buyer.getByRole('button', { name: '放弃座位' }).click();
    await expect.poll(() => buyer.getByTestId('team-network-problem').count()).toBe(0);
    await expectSeats([buyer], [1, 0, 2]);

    // A socket that stays open but carries nothing: its ping goes unanswered, so it is
    // closed and replaced (ping every 5 s, 3 s for the pong). The page's clock jumps over
    // both waits, each once its timer is set.
    await expect.poll(() => buyer.getByTestId('reconnecting').isVisible()).toBe(false);
    silent = true;
    await buyer.clock.fastForward(5_000);
    await buyer.clock.fastForward(3_000);
    await expect.poll(() => buyer.getByTestId('reconnecting').isVisible(), { timeout: 10_000 + STEP_MS }).toBe(true);
    silent = false;
    await expect.poll(() => buyer.getByTestId('reconnecting').isVisible(), { timeout: 10_000 + STEP_MS }).toBe(false);
    // The failed fetch logs a console error of its own (dropped, for the tests after this one); nothing else may.
    const expected = (line: string) => line.includes('net::ERR_INTERNET_DISCONNECTED');
    expect(app.misbehaviour.filter((line) => !expected(line))).toEqual([]);
    app.misbehaviour.splice(0, app.misbehaviour.length);
  });
});

describe('long names on a 320px phone', () => {
  it('the team page and the wallet do not scroll sideways; with large text a price stays whole', { timeout: 60_000 }, async () => {
    const leader = longName('olga');
    const team = await teamsAt(server.url).open(leader, { activityId: 'web-narrow', title: '窄屏奶茶'.repeat(8), capacity: 3, priceCents: 5900, groupPriceCents: 4900 });
    await walletsAt(server.url).credit('web-operator', { userId: leader, amountCents: 500, reason: '超长备注'.repeat(10) });
    const page = await app.signedIn(leader);
    await page.setViewportSize({ width: 320, height: 640 });
    await page.goto(`${appUrl}#/team/${team.id}`);
    await page.getByTestId('member-seat').waitFor();
    await page.getByTestId('team-price').waitFor();
    expect(await scrollsSideways(page)).toBe(false);
    await app.screenshot(page, 'team-320-long-name');
    // Text at 200% on this phone lays out as a 160px-wide page: "¥49.0" over "0" would read as another price.
    await page.setViewportSize({ width: 160, height: 640 });
    const price = page.getByTestId('team-price').locator('.big');
    expect(await price.textContent()).toBe('¥49.00');
    expect(await price.evaluate((element) => new Set([...element.getClientRects()].map((line) => line.top)).size)).toBe(1);
    expect(await scrollsSideways(page)).toBe(false);
    await page.setViewportSize({ width: 320, height: 640 });
    await page.getByRole('link', { name: '钱包' }).click();
    await expect.poll(() => page.getByTestId('wallet-balance').textContent()).toBe('5.00');
    expect(await scrollsSideways(page)).toBe(false);
    await app.screenshot(page, 'wallet-320-long-name');
    expect(app.misbehaviour).toEqual([]);
  });
});
