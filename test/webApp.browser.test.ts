import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STEP_MS, startWebApp } from './support/browser.ts';
import { testEnv } from './support/env.ts';
import { lotteryAt } from './support/lottery.ts';
import { webDocumentId } from './support/persistedDocuments.ts';
import { pointsAt } from './support/points.ts';
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

describe('red packets', () => {
  it('three people grab one packet: each sees their own share, all the same remaining count', { timeout: 120_000 }, async () => {
    await walletsAt(server.url).credit('web-operator', { userId: 'alice', amountCents: 600 });
    const sender = await app.signedIn('alice');
    await sender.getByLabel('总金额（元）').fill('6');
    await sender.getByLabel('红包个数').fill('3');
    await app.screenshot(sender, 'red-packet-send');
    await sender.getByRole('button', { name: '塞钱进红包' }).click();
    const link = await sender.getByTestId('share-link').textContent();
    expect(link).toMatch(/#\/packets\/[\w-]+$/);
    await app.screenshot(sender, 'red-packet-sent');

    const grabbers = await Promise.all(['bob', 'carol', 'dave'].map((name) => app.signedIn(name)));
    await Promise.all(grabbers.map((page) => page.goto(link!)));
    await Promise.all(grabbers.map((page) => page.getByRole('button', { name: '抢' }).click()));
    const shares = await Promise.all(grabbers.map(async (page) => Number(await page.getByTestId('my-share').textContent())));
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
  it('a double tap sends one packet; another packet opened in the same tab shows that packet', { timeout: 90_000 }, async () => {
    await walletsAt(server.url).credit('web-operator', { userId: 'frank', amountCents: 2_000 });
    const page = await app.signedIn('frank');
    await page.getByLabel('总金额（元）').fill('5');
    await page.getByLabel('红包个数').fill('1');
    await page.getByRole('button', { name: '塞钱进红包' }).dblclick();
    const first = await page.getByTestId('share-link').textContent();
    const sent = async () => (await web.stores.sql.query("SELECT id FROM red_packet WHERE sender_id = 'frank'")).rowCount;
    expect(await sent()).toBe(1);

    // frank grabs his own packet, then opens gina's link in the same tab: gina's, grabbable.
    await page.getByRole('button', { name: '抢' }).click();
    await expect.poll(() => page.getByTestId('my-share').textContent()).toBe('5.00');
    await walletsAt(server.url).credit('web-operator', { userId: 'gina', amountCents: 1_000 });
    const gina = await app.signedIn('gina');
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
    await expect.poll(() => page.getByRole('button', { name: '登录' }).count()).toBe(1);
    expect(new URL(page.url()).hash).toBe('#/shop');
  });
});

describe('the points shop', () => {
  it('shows my balance and the goods, and redeems one', { timeout: 60_000 }, async () => {
    const points = pointsAt(server.url);
    await points.award('web-operator', { userId: 'erin', amount: 100 });
    await points.createGoods('web-operator', { title: '奶茶券', pointsCost: 30, stock: 5 });
    const page = await app.signedIn('erin');
    await page.getByRole('link', { name: '积分商城' }).click();
    await expect.poll(() => page.getByTestId('points-balance').textContent()).toBe('100');
    await page.getByRole('button', { name: '兑换' }).click();
    await expect.poll(() => page.getByTestId('outcome').textContent()).toContain('兑换成功');
    // Live from redemptionUpdated: the default notifier delivers at once.
    await expect.poll(() => page.getByTestId('delivery').textContent()).toBe('已发放');
    await expect.poll(() => page.getByTestId('points-balance').textContent()).toBe('70');
    await app.screenshot(page, 'points-shop');
    expect(app.misbehaviour).toEqual([]);
  });
});

describe('the lottery', () => {
  it('spins the wheel to the prize the mutation returned, and stops at the daily limit', { timeout: 90_000 }, async () => {
    const now = Date.now();
    const activity = await lotteryAt(server.url).create('web-operator', {
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
    await page.goto(`${appUrl}#/lottery/${activity.id}`);
    // The app sends its documents' ids, not their text (GRAPHQL_TRUSTED_DOCUMENTS).
    const drawId = webDocumentId('WebDrawLottery');
    for (let draw = 1; draw <= 2; draw++) {
      const answered = page.waitForResponse((response) => response.url().endsWith('/graphql') && response.request().postDataJSON()?.documentId === drawId);
      await page.getByRole('button', { name: '抽奖' }).click();
      const { data } = (await (await answered).json()) as { data: { drawLottery: { __typename: string; prize?: { id: string } } } };
      const expected = data.drawLottery.__typename === 'LotteryWin' ? data.drawLottery.prize!.id : 'none';
      await expect.poll(() => page.getByTestId('wheel').getAttribute('data-landed'), { timeout: STEP_MS }).toBe(expected);
      // The pointer is over the landed sector: the wheel's angle puts that sector's middle at the top.
      await app.screenshot(page, `lottery-draw-${draw}`);
    }
    await page.getByRole('button', { name: '抽奖' }).click();
    await expect.poll(() => page.getByTestId('draw-problem').textContent()).toContain('2');
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
