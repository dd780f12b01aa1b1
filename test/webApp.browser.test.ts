import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STEP_MS, focused, startWebApp } from './support/browser.ts';
import { testEnv } from './support/env.ts';
import { lotteryAt, runningWindow } from './support/lottery.ts';
import { webDocumentId } from './support/persistedDocuments.ts';
import { pointsAt } from './support/points.ts';
import { tokenOf } from './support/tokens.ts';
import { walletsAt } from './support/wallets.ts';

// The web app the server serves at /app/, in real browsers: each context is one person's phone.
const env = testEnv('web_app');
let web: Awaited<ReturnType<typeof startWebApp>>;
let server: typeof web.server;
let appUrl: string;
let app: typeof web.app;

beforeAll(async () => {
  web = await startWebApp(env);
  ({ server, appUrl, app } = web);
});

afterAll(() => web?.close());

/** How long the wheel spins: the page's timer that lands it, and the CSS transition that turns it. */
const SPIN_MS = 3_000;

/**
 * Ends at once a spin that has begun, on a page whose clock is installed: the clock jumps
 * over the timer that lands the wheel, and the turn is finished, so a screenshot shows where
 * the wheel stopped. The wheel still lands only when its timer fires, as it would in 3 s.
 */
async function endSpin(page: Page): Promise<void> {
  const wheel = page.getByTestId('wheel');
  // The turn runs once the result is in, and the timer is set with it.
  await expect.poll(() => wheel.evaluate((element) => element.getAnimations().length > 0 || element.dataset.landed !== '')).toBe(true);
  await page.clock.fastForward(SPIN_MS);
  await wheel.evaluate((element) => {
    for (const animation of element.getAnimations()) animation.finish();
  });
}

/**
 * The document's widest scrollWidth over the course of a spin that has begun: its turn is
 * sought from start to end, so the angles between the quarter turns are all measured.
 */
async function widestDuringSpin(page: Page): Promise<number> {
  const wheel = page.getByTestId('wheel');
  await expect.poll(() => wheel.evaluate((element) => element.getAnimations().length)).toBeGreaterThan(0);
  return wheel.evaluate((element, spinMs) => {
    const [turn] = element.getAnimations();
    const was = turn?.currentTime ?? null;
    let widest = document.documentElement.scrollWidth;
    for (let at = 0; turn && at < spinMs; at += 50) {
      turn.currentTime = at;
      widest = Math.max(widest, document.documentElement.scrollWidth);
    }
    // Put back where it was, running: a finished turn would leave endSpin nothing to end.
    if (turn) turn.currentTime = was;
    return widest;
  }, SPIN_MS);
}

describe('red packets', () => {
  it('three people grab one packet: each sees their own share, all the same remaining count', { timeout: 120_000 }, async () => {
    await walletsAt(server.url).credit('web-operator', { userId: 'alice', amountCents: 600 });
    const send = async () => {
      const sender = await app.signedIn('alice');
      await sender.getByLabel('总金额（元）').fill('6');
      await sender.getByLabel('红包个数').fill('3');
      await app.screenshot(sender, 'red-packet-send');
      await sender.getByRole('button', { name: '塞钱进红包' }).click();
      const link = await sender.getByTestId('share-link').textContent();
      expect(link).toMatch(/#\/packets\/[\w-]+$/);
      await app.screenshot(sender, 'red-packet-sent');
      return { sender, link };
    };
    // The grabbers sign in while the packet is sent.
    const [{ sender, link }, grabbers] = await Promise.all([send(), Promise.all(['bob', 'carol', 'dave'].map((name) => app.signedIn(name)))]);
    await Promise.all(grabbers.map((page) => page.goto(link!)));
    await Promise.all(grabbers.map((page) => page.getByRole('button', { name: '抢' }).click()));
    const shares = await Promise.all(grabbers.map(async (page) => Number(await page.getByTestId('my-share').textContent())));
    // The grab button is disabled now: focus is on the share, not lost to <body>.
    await expect.poll(() => focused(grabbers[0]!)).toMatch(/^P 你抢到/);
    // The button says why it is disabled: mine is taken, not the packet empty.
    expect(await grabbers[0]!.getByRole('button', { name: '已抢到', exact: true }).isDisabled()).toBe(true);
    expect(shares.reduce((sum, share) => sum + share, 0)).toBeCloseTo(6, 2);
    // The pushes reach every page, the sender's too, with no reload.
    for (const page of [sender, ...grabbers]) await expect.poll(() => page.getByTestId('remaining-count').textContent(), { timeout: STEP_MS }).toBe('0');
    await app.screenshot(grabbers[0]!, 'red-packet-grabbed');
    // A reload shows the share taken, not a grab button.
    await grabbers[0]!.reload();
    await expect.poll(() => grabbers[0]!.getByTestId('my-share').textContent(), { timeout: STEP_MS }).toBe(shares[0]!.toFixed(2));
    expect(app.misbehaviour).toEqual([]);
  });
});

describe('what a hurried user does', () => {
  it('taps again after the answer to a send was lost: one packet, paid once', { timeout: 60_000 }, async () => {
    await walletsAt(server.url).credit('web-operator', { userId: 'lost-answer', amountCents: 1_000 });
    const page = await app.signedIn('lost-answer');
    await page.getByLabel('总金额（元）').fill('4');
    await page.getByLabel('红包个数').fill('2');
    // The server makes the packet; its answer never reaches the phone.
    await page.route('**/graphql', async (route) => {
      if (!route.request().postData()?.includes('totalAmount')) return route.continue();
      await route.fetch();
      await route.abort('connectionreset');
    });
    await page.getByRole('button', { name: '塞钱进红包' }).click();
    await expect.poll(() => page.getByTestId('send-problem').count()).toBe(1);
    await page.unroute('**/graphql');
    await page.getByRole('button', { name: '塞钱进红包' }).click();
    await page.getByTestId('share-link').waitFor();
    const { rows } = await web.stores.sql.query("SELECT total_amount FROM red_packet WHERE sender_id = 'lost-answer'");
    expect(rows).toEqual([{ total_amount: 400 }]);
    const { rows: wallet } = await web.stores.sql.query("SELECT balance_cents FROM wallet_account WHERE user_id = 'lost-answer'");
    expect(wallet).toEqual([{ balance_cents: 600 }]);
    // The browser logs the reset itself (dropped, for the tests after this one); nothing else may be logged.
    expect(app.misbehaviour.filter((line) => !line.includes('ERR_CONNECTION_RESET'))).toEqual([]);
    app.misbehaviour.splice(0, app.misbehaviour.length);
  });

  it('taps again after the answer to a redemption or a draw was lost: each spends once', { timeout: 90_000 }, async () => {
    const points = pointsAt(server.url);
    await points.award('web-operator', { userId: 'lost-points', amount: 400 });
    await points.createGoods('web-operator', { title: '丢失的答复', pointsCost: 100, stock: 5 });
    const lottery = await lotteryAt(server.url).create('web-operator', {
      title: '丢失的抽奖',
      ...runningWindow(),
      drawCostPoints: 100,
      prizes: [{ title: '奖', weight: 1, totalStock: 10 }],
    });
    const page = await app.signedIn('lost-points');
    // As a page served over plain HTTP at a LAN address has it: no crypto.randomUUID.
    await page.addInitScript(() => Object.defineProperty(Crypto.prototype, 'randomUUID', { value: undefined }));
    await page.reload();
    await page.clock.install();
    // The server acts on the first `operation`; its answer never reaches the phone.
    const loseFirstAnswer = async (operation: string) => {
      let lost = false;
      await page.route('**/graphql', async (route) => {
        if (lost || route.request().postDataJSON()?.documentId !== webDocumentId(operation)) return route.continue();
        lost = true;
        await route.fetch();
        await route.abort('connectionreset');
      });
    };
    const balance = async () => (await points.me('lost-points')).pointsBalance;

    await loseFirstAnswer('WebRedeemPoints');
    await page.getByRole('link', { name: '积分商城' }).click();
    const redeem = page.locator('li', { hasText: '丢失的答复' }).getByRole('button');
    await redeem.click();
    await expect.poll(() => page.getByTestId('outcome').textContent()).toBe('丢失的答复：网络连接失败，请检查网络后重试');
    await redeem.click();
    await expect.poll(() => page.getByTestId('outcome').textContent()).toContain('兑换成功');
    expect(await balance()).toBe(300);
    await page.unroute('**/graphql');

    await loseFirstAnswer('WebDrawLottery');
    await page.goto(`${appUrl}#/lottery/${lottery.id}`);
    await page.getByRole('button', { name: '抽奖' }).click();
    await expect.poll(() => page.getByTestId('draw-problem').textContent()).toBe('网络连接失败，请检查网络后重试');
    await page.getByRole('button', { name: '抽奖' }).click();
    await endSpin(page);
    await expect.poll(() => page.getByTestId('wheel').getAttribute('data-landed'), { timeout: STEP_MS }).not.toBe('');
    expect(await balance()).toBe(200);
    expect(app.misbehaviour.filter((line) => !line.includes('ERR_CONNECTION_RESET'))).toEqual([]);
    app.misbehaviour.splice(0, app.misbehaviour.length);
  });

  it('a page opened offline loads once the connection is back; a failed load offers 重试', { timeout: 60_000 }, async () => {
    const lottery = await lotteryAt(server.url).create('web-operator', { title: '断网转盘', ...runningWindow(), noPrizeWeight: 1, prizes: [{ title: '奖', weight: 1, totalStock: 10 }] });
    const page = await app.signedIn('offline-olive');
    const networkProblem = '网络连接失败，请检查网络后重试';
    await page.context().setOffline(true);
    await page.getByRole('link', { name: '积分商城' }).click();
    await page.getByText(networkProblem).waitFor();
    await page.context().setOffline(false);
    await expect.poll(() => page.getByTestId('points-balance').textContent()).toBe('0');

    // Online, but the load's connection was reset: 重试 loads the page.
    let reset = false;
    await page.route('**/graphql', (route) => {
      if (reset || route.request().postDataJSON()?.documentId !== webDocumentId('WebLottery')) return route.continue();
      reset = true;
      return route.abort('connectionreset');
    });
    await page.goto(`${appUrl}#/lottery/${lottery.id}`);
    await page.getByText(networkProblem).waitFor();
    await page.getByRole('button', { name: '重试' }).click();
    await page.getByRole('button', { name: '抽奖' }).waitFor();
    // A draw that could not leave says so until the connection is back.
    await page.context().setOffline(true);
    await page.getByRole('button', { name: '抽奖' }).click();
    await expect.poll(() => page.getByTestId('draw-problem').textContent()).toBe(networkProblem);
    await page.context().setOffline(false);
    await expect.poll(() => page.getByTestId('draw-problem').count()).toBe(0);
    await page.unroute('**/graphql');
    expect(app.misbehaviour.filter((line) => !/ERR_CONNECTION_RESET|ERR_INTERNET_DISCONNECTED/.test(line))).toEqual([]);
    app.misbehaviour.splice(0, app.misbehaviour.length);
  });

  it('a double tap sends one packet; another packet opened in the same tab shows that packet', { timeout: 90_000 }, async () => {
    await walletsAt(server.url).credit('web-operator', { userId: 'frank', amountCents: 2_000 });
    await walletsAt(server.url).credit('web-operator', { userId: 'gina', amountCents: 1_000 });
    // gina's phone signs in alongside frank's, for later.
    const [page, gina] = await Promise.all([app.signedIn('frank'), app.signedIn('gina')]);
    await page.getByLabel('总金额（元）').fill('5');
    await page.getByLabel('红包个数').fill('1');
    // Two clicks in one task, before any re-render disables the button (a script, an assistive tool).
    await page.getByRole('button', { name: '塞钱进红包' }).evaluate((button: HTMLButtonElement) => {
      button.click();
      button.click();
    });
    const first = await page.getByTestId('share-link').textContent();
    const sent = async () => (await web.stores.sql.query("SELECT id FROM red_packet WHERE sender_id = 'frank'")).rowCount;
    expect(await sent()).toBe(1);

    // frank grabs his own packet, then opens gina's link in the same tab: gina's, grabbable.
    await page.getByRole('button', { name: '抢' }).click();
    await expect.poll(() => page.getByTestId('my-share').textContent()).toBe('5.00');
    await gina.getByLabel('总金额（元）').fill('3');
    await gina.getByLabel('红包个数').fill('1');
    await gina.getByRole('button', { name: '塞钱进红包' }).click();
    const second = await gina.getByTestId('share-link').textContent();
    expect(second).not.toBe(first);
    await page.evaluate((link) => {
      location.hash = new URL(link).hash;
    }, second!);
    await expect.poll(() => page.getByTestId('my-share').count()).toBe(0);
    await page.getByRole('button', { name: '抢' }).click();
    await expect.poll(() => page.getByTestId('my-share').textContent()).toBe('3.00');
    expect(app.misbehaviour).toEqual([]);
  });

  it('signs in again on the same link when the token is refused', { timeout: 60_000 }, async () => {
    const page = await app.signedIn('hank');
    await page.evaluate(() => {
      localStorage.setItem('campaign.session', JSON.stringify({ name: 'hank', token: 'not.a.token' }));
      location.hash = '#/shop';
    });
    await page.reload();
    await expect.poll(() => page.getByRole('button', { name: '登录', exact: true }).count()).toBe(1);
    expect(new URL(page.url()).hash).toBe('#/shop');
    // Said whether the refusal came before the reload or after it; a token that is no token did not expire.
    expect(await page.getByTestId('sign-in-notice').textContent()).toBe('登录已失效，请重新登录');
    // A token that is no token is refused here, before it could "end" on the next page.
    await page.getByLabel('或粘贴令牌 Or paste a token').fill('not.a.token');
    await page.getByRole('button', { name: '登录', exact: true }).click();
    await expect.poll(() => page.getByTestId('sign-in-problem').textContent()).toBe('这不是有效的登录令牌：请粘贴商城登录后得到的完整令牌');
    expect(await page.evaluate(() => localStorage.getItem('campaign.session'))).toBeNull();
    // A pasted token signs in as whom it names.
    await page.getByLabel('或粘贴令牌 Or paste a token').fill(await tokenOf('汉克'));
    await page.getByRole('button', { name: '登录', exact: true }).click();
    await page.getByText('汉克', { exact: true }).waitFor();
    await page.getByRole('button', { name: '退出登录' }).click();
    await page.getByLabel('昵称 Name').fill('hank');
    await page.getByRole('button', { name: '登录', exact: true }).click();
    await page.getByText('hank', { exact: true }).waitFor();
    await page.reload();
    await page.getByText('hank', { exact: true }).waitFor();
    expect(await page.getByTestId('sign-in-notice').count()).toBe(0);
  });

  it("names an unknown page, and reads a shared link's id decoded", { timeout: 60_000 }, async () => {
    const page = await app.signedIn('kate');
    await page.evaluate(() => {
      location.hash = '#/nonexistent/zzz';
    });
    await expect.poll(() => page.getByTestId('no-such-page').textContent()).toBe('没有这个页面');
    const askedFor: unknown[] = [];
    page.on('request', (request) => {
      if (request.method() === 'POST' && new URL(request.url()).pathname === '/graphql') askedFor.push(JSON.parse(request.postData() ?? '{}').variables?.id);
    });
    await page.evaluate(() => {
      location.hash = `#/packets/${encodeURIComponent('恭喜')}`;
    });
    await expect.poll(() => askedFor, { timeout: 15_000 }).toContain('恭喜');
  });

  it('signs out from beside the name; signed in, the nav offers no second sign-in', { timeout: 60_000 }, async () => {
    const page = await app.signedIn('ines');
    const nav = page.getByRole('navigation');
    expect(await nav.getByRole('link', { name: '登录' }).count()).toBe(0);
    expect(await nav.locator('[aria-current="page"]').textContent()).toBe('红包');
    // Each page has its <h1> and names the tab; signed in, or on another page, focus starts at that heading.
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('发红包');
    expect(await page.title()).toBe('发红包 · 活动 Campaigns');
    await expect.poll(() => focused(page)).toBe('H1 发红包');
    await nav.getByRole('link', { name: '钱包' }).click();
    await expect.poll(() => page.title()).toBe('钱包 · 活动 Campaigns');
    await expect.poll(() => focused(page)).toBe('H1 钱包');
    await page.getByRole('button', { name: '退出登录' }).click();
    await page.getByLabel('昵称 Name').waitFor();
    // Signed out, the sign-in screen is the current page, whatever the link.
    expect(await nav.locator('[aria-current="page"]').textContent()).toBe('登录');
    await expect.poll(() => focused(page)).toBe('H1 登录');
    expect(await page.evaluate(() => localStorage.getItem('campaign.session'))).toBeNull();
    expect(await page.getByTestId('sign-in-notice').count()).toBe(0);
  });

  it('says what is wrong with a name or a packet before asking the server', { timeout: 60_000 }, async () => {
    const page = await app.phone('jill');
    await page.goto(appUrl);
    await page.getByLabel('昵称 Name').fill('j b');
    await page.getByRole('button', { name: '登录' }).click();
    await expect.poll(() => page.getByTestId('sign-in-problem').textContent()).toContain('昵称：');
    expect(await page.getByTestId('sign-in-problem').textContent()).not.toContain('{');
    await page.getByLabel('昵称 Name').fill('jill');
    await page.getByRole('button', { name: '登录' }).click();
    await page.getByText('jill', { exact: true }).waitFor();

    const sent: string[] = [];
    page.on('request', (request) => {
      if (request.url().endsWith('/graphql') && request.postDataJSON()?.documentId === webDocumentId('WebCreateRedPacket')) sent.push(request.url());
    });
    const problem = page.getByTestId('send-problem');
    for (const [yuan, count, expected] of [
      ['abc', '5', '总金额：'],
      ['0', '5', '总金额：至少 0.01 元'],
      ['1.234', '5', '总金额：'],
      ['10', '0', '红包个数：请输入 1 到 10000 之间的整数'],
      ['10', '2.5', '红包个数：'],
      ['0.01', '5', '总金额：5 个红包每个至少 0.01 元，至少要 0.05 元'],
    ] as const) {
      await page.getByLabel('总金额（元）').fill(yuan);
      await page.getByLabel('红包个数').fill(count);
      await page.getByRole('button', { name: '塞钱进红包' }).click();
      await expect.poll(() => problem.textContent()).toContain(expected);
      expect(await problem.getAttribute('role')).toBe('alert');
    }
    await app.screenshot(page, 'red-packet-send-invalid');
    // The greeting stops at the server's bound; a wallet with nothing in it is the server's to refuse, in Chinese.
    expect(await page.locator('#greeting').getAttribute('maxlength')).toBe('64');
    await page.getByLabel('总金额（元）').fill('1');
    await page.getByLabel('红包个数').fill('1');
    await page.getByRole('button', { name: '塞钱进红包' }).click();
    await expect.poll(() => sent.length).toBe(1);
    await expect.poll(() => problem.textContent()).toMatch(/[\u4e00-\u9fff]/);
    expect(app.misbehaviour).toEqual([]);
  });
});

describe('the points shop', () => {
  it('shows my balance and the goods, and redeems one', { timeout: 60_000 }, async () => {
    const points = pointsAt(server.url);
    await points.award('web-operator', { userId: 'erin', amount: 100 });
    await points.createGoods('web-operator', { title: '奶茶券', pointsCost: 30, stock: 5, perUserLimit: 1 });
    const paused = await points.createGoods('web-operator', { title: '电影票', pointsCost: 10, stock: 5 });
    await points.updateGoods('web-operator', paused.id, { onSale: false });
    const page = await app.signedIn('erin');
    await page.getByRole('link', { name: '积分商城' }).click();
    await expect.poll(() => page.getByTestId('points-balance').textContent()).toBe('100');
    // The item taken off sale says so, and cannot be tapped.
    await expect.poll(() => page.getByRole('button', { name: '暂停兑换' }).isDisabled()).toBe(true);
    // Each item's button is named for it: other tests' goods are on sale too.
    expect(await page.getByRole('button', { name: '兑换 奶茶券', exact: true }).count()).toBe(1);
    expect(await page.getByRole('heading', { name: '兑换商品' }).count()).toBe(1);
    const redeem = page.locator('li', { hasText: '奶茶券' }).getByRole('button');
    // While the redemption is on its way, its button says so, to assistive tools too.
    let answer!: () => void;
    const held = new Promise<void>((resolve) => {
      answer = resolve;
    });
    await page.route('**/graphql', async (route) => {
      if (route.request().postDataJSON()?.documentId === webDocumentId('WebRedeemPoints')) await held;
      await route.continue();
    });
    await redeem.click();
    await expect.poll(() => redeem.getAttribute('aria-busy')).toBe('true');
    expect(await redeem.textContent()).toContain('处理中…');
    expect(await redeem.isDisabled()).toBe(true);
    answer();
    // The result shows under the item it is for, and names it (visually hidden) for a screen reader.
    const outcome = page.locator('li', { hasText: '奶茶券' }).getByTestId('outcome');
    await expect.poll(() => outcome.textContent()).toMatch(/^奶茶券：兑换成功/);
    await page.unroute('**/graphql');
    await expect.poll(() => redeem.getAttribute('aria-busy')).toBeNull();
    // Disabled while the redemption was on its way, the button has focus back.
    await expect.poll(() => focused(page)).toBe('BUTTON 兑换 奶茶券');
    // Live from redemptionUpdated: the default notifier delivers at once.
    await expect.poll(() => page.getByTestId('delivery').textContent()).toBe('已发放');
    await expect.poll(() => page.getByTestId('points-balance').textContent()).toBe('70');
    await app.screenshot(page, 'points-shop');
    // A refusal of the next attempt stands alone: the last redemption's delivery line is gone with it.
    await redeem.click();
    await expect.poll(() => outcome.textContent()).toBe('奶茶券：你兑换该商品的次数已达上限（1 次）');
    expect(await page.getByTestId('delivery').count()).toBe(0);
    // An outage answer (here as the server words it, in English) reads in the app's language.
    await page.route('**/graphql', (route) =>
      route.fulfill({ status: 503, json: { errors: [{ message: 'the service is briefly unavailable; try again', extensions: { code: 'SERVICE_UNAVAILABLE', retryAfterMs: 1000 } }] } }),
    );
    await redeem.click();
    await expect.poll(() => outcome.textContent()).toBe('奶茶券：服务繁忙，请稍后重试');
    await page.unroute('**/graphql');
    // The browser logs the 503 itself (dropped, for the tests after this one); nothing else may be logged.
    expect(app.misbehaviour.filter((line) => !line.includes('503'))).toEqual([]);
    app.misbehaviour.splice(0, app.misbehaviour.length);
  });

  it('counts down to a flash sale on the server clock, opens it then, and says when a sale has ended', { timeout: 60_000 }, async () => {
    const points = pointsAt(server.url);
    await points.award('web-operator', { userId: 'frank', amount: 100 });
    const ended = await points.createGoods('web-operator', { title: '往期活动', pointsCost: 10, stock: 1 });
    await points.updateGoods('web-operator', ended.id, { saleEndsAt: new Date(Date.now() - 1_000).toISOString() });
    // Paused as well: the end is final and outranks a pause, as the server's refusal does.
    await points.updateGoods('web-operator', ended.id, { onSale: false });
    const page = await app.signedIn('frank');
    // Put on the shelf last, signed in already: the sale opens soon after the shop shows its countdown.
    const startsAt = new Date(Date.now() + 2_500).toISOString();
    await points.createGoods('web-operator', { title: '限时秒杀', pointsCost: 10, stock: 1, saleStartsAt: startsAt });
    await page.getByRole('link', { name: '积分商城' }).click();
    const flash = page.locator('li', { hasText: '限时秒杀' }).getByRole('button');
    await expect.poll(() => flash.textContent()).toMatch(/^0:0\d 后开兑 限时秒杀$/);
    expect(await flash.isDisabled()).toBe(true);
    expect(await page.locator('li', { hasText: '往期活动' }).getByRole('button').textContent()).toBe('已结束 往期活动');
    expect(await page.locator('li', { hasText: '往期活动' }).getByRole('button').isDisabled()).toBe(true);
    await expect.poll(() => flash.textContent(), { timeout: 10_000 }).toBe('兑换 限时秒杀');
    await flash.click();
    await expect.poll(() => page.getByTestId('outcome').textContent()).toContain('兑换成功');
    expect(app.misbehaviour).toEqual([]);
  });
});

describe('the lottery', () => {
  it('spins the wheel to the prize the mutation returned, and stops at the daily limit', { timeout: 90_000 }, async () => {
    const now = Date.now();
    await lotteryAt(server.url).create('web-operator', {
      title: '幸运大转盘',
      startsAt: new Date(now - 60_000).toISOString(),
      endsAt: new Date(now + 3_600_000).toISOString(),
      noPrizeWeight: 1,
      dailyDrawLimit: 2,
      prizes: [
        { title: '一等奖', weight: 1, totalStock: 100 },
        { title: '二等奖', weight: 1, totalStock: 100 },
      ],
    });
    const page = await app.signedIn('frank');
    await page.clock.install();
    await page.setViewportSize({ width: 360, height: 740 });
    // The nav leads to the lotteries on now, and each to its wheel.
    await page.getByRole('navigation').getByRole('link', { name: '抽奖' }).click();
    await page.getByTestId('lottery-activities').getByRole('link', { name: '幸运大转盘' }).click();
    // The app sends its documents' ids, not their text (GRAPHQL_TRUSTED_DOCUMENTS).
    const drawId = webDocumentId('WebDrawLottery');
    for (let draw = 1; draw <= 2; draw++) {
      const answered = page.waitForResponse((response) => response.url().endsWith('/graphql') && response.request().postDataJSON()?.documentId === drawId);
      await page.getByRole('button', { name: '抽奖' }).click();
      // No second draw while this one is on its way or spinning.
      await expect.poll(() => page.getByRole('button', { name: '处理中…' }).isDisabled()).toBe(true);
      const { data } = (await (await answered).json()) as { data: { drawLottery: { __typename: string; prize?: { id: string } } } };
      const expected = data.drawLottery.__typename === 'LotteryWin' ? data.drawLottery.prize!.id : 'none';
      // The turning wheel stays inside the 360px screen: the page does not pan sideways.
      if (draw === 1) expect(await widestDuringSpin(page)).toBeLessThanOrEqual(360);
      await endSpin(page);
      await expect.poll(() => page.getByTestId('wheel').getAttribute('data-landed'), { timeout: STEP_MS }).toBe(expected);
      // The pointer is over the landed sector: the wheel's angle puts that sector's middle at the top.
      await app.screenshot(page, `lottery-draw-${draw}`);
    }
    await page.getByRole('button', { name: '抽奖' }).click();
    await expect.poll(() => page.getByTestId('draw-problem').textContent()).toContain('2');
    expect(app.misbehaviour).toEqual([]);
  });

  it('fits a 320px phone with a long name and a long prize, and keeps a result across a reload mid-spin', { timeout: 90_000 }, async () => {
    const now = Date.now();
    // 64 characters, the longest a prize title may be, and no space to break at.
    const prize = 'Supercalifragilisticexpialidocious一等奖iPhone16ProMax沙漠色钛金属1TBGold';
    const activity = await lotteryAt(server.url).create('web-operator', {
      title: '窄屏大转盘',
      startsAt: new Date(now - 60_000).toISOString(),
      endsAt: new Date(now + 3_600_000).toISOString(),
      noPrizeWeight: 0,
      dailyDrawLimit: 0,
      prizes: [{ title: prize, weight: 1, totalStock: 100 }],
    });
    const name = `kate${'K'.repeat(60)}`;
    const page = await app.signedIn(name);
    await page.clock.install();
    await page.setViewportSize({ width: 320, height: 640 });
    await page.goto(`${appUrl}#/lottery/${activity.id}`);
    // Every prize in full beside the wheel, which cuts long titles short.
    await expect.poll(() => page.getByTestId('prizes').locator('li').allTextContents()).toEqual([prize]);
    await page.getByRole('button', { name: '抽奖' }).click();
    await endSpin(page);
    await expect.poll(() => page.getByTestId('wheel').getAttribute('data-landed'), { timeout: STEP_MS }).not.toBe('');
    await expect.poll(() => page.getByTestId('winners').locator('li').count()).toBe(1);
    const fits = await page.evaluate(() => {
      const card = document.querySelector('.card')!.getBoundingClientRect();
      const wheel = document.querySelector('.wheel-frame')!.getBoundingClientRect();
      return { scrollWidth: document.documentElement.scrollWidth, wheel: wheel.width, card: card.width - 32 };
    });
    expect(fits.scrollWidth).toBeLessThanOrEqual(320);
    expect(fits.wheel).toBeLessThanOrEqual(fits.card);
    await app.screenshot(page, 'lottery-320');

    // The draw is committed when the mutation answers: a reload during the spin still shows it.
    const drawId = webDocumentId('WebDrawLottery');
    const answered = page.waitForResponse((response) => response.url().endsWith('/graphql') && response.request().postDataJSON()?.documentId === drawId);
    await page.getByRole('button', { name: '抽奖' }).click();
    await answered;
    await page.reload();
    await expect.poll(() => page.getByTestId('last-draw').textContent()).toBe(`上次抽奖：抽中 ${prize}`);
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(320);

    // Asked for less motion, the wheel rests on the result at once: it spins for 3 s otherwise.
    await page.emulateMedia({ reducedMotion: 'reduce' });
    const answeredStill = page.waitForResponse((response) => response.url().endsWith('/graphql') && response.request().postDataJSON()?.documentId === drawId);
    await page.getByRole('button', { name: '抽奖' }).click();
    await answeredStill;
    const answeredAt = Date.now();
    await expect.poll(() => page.getByTestId('wheel').getAttribute('data-landed')).not.toBe('');
    expect(Date.now() - answeredAt).toBeLessThan(2_500);
    expect(app.misbehaviour).toEqual([]);
  });
});

describe('the pages', () => {
  it('carry a policy that allows scripts, styles and requests from the app itself only, and no <base> or form target elsewhere', async () => {
    const response = await fetch(appUrl);
    expect(response.status).toBe(200);
    const policy = response.headers
      .get('content-security-policy')!
      .split(';')
      .map((directive) => directive.trim());
    expect(policy).toEqual(expect.arrayContaining(["default-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"]));
    expect(response.headers.get('x-content-type-options')).toBe('nosniff');
  });
});

describe('the development sign-in', () => {
  it('refuses a malformed name with 400 and mints nothing', async () => {
    for (const body of ['{}', '{"name":""}', '{"name":"a b"}', 'not json', JSON.stringify({ name: 'x'.repeat(65) })]) {
      const response = await fetch(new URL('/app/dev-token', server.url), { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      expect(response.status, body).toBe(400);
    }
  });
});
