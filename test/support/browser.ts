import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { inflateSync } from 'node:zlib';
import { type Browser, type BrowserContext, type Page, chromium } from 'playwright-core';
import { expect } from 'vitest';
import type { TestEnv } from './env.ts';
import { stopAll } from './lifecycle.ts';
import { type ServerProcess, startServerProcess } from './server.ts';
import { openStores } from './stores.ts';

// Debian's chromium (.ci/run installs it), driven by playwright-core, which downloads no browser of its own.
const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** How long one browser step may take. */
export const STEP_MS = 15_000;
/** How long chromium may take to start: past 15 s once, with the whole suite loading both cores. */
const LAUNCH_MS = 60_000;

/** Where screenshots go (gitignored): look at them when a browser test fails. */
export const ARTIFACTS = 'test-results/web-app';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium fonts-noto-cjk (.ci/run does)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS, timeout: LAUNCH_MS });
}

/**
 * The pixels of a PNG as Playwright writes them (8-bit RGB or RGBA, not interlaced), as
 * one luminance a pixel: enough to tell a drawn page from a blank one.
 */
export function pngLuminance(png: Buffer): { width: number; height: number; luminance: Float64Array } {
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  const [depth, colour, interlace] = [png[24], png[25], png[28]];
  if (depth !== 8 || (colour !== 2 && colour !== 6) || interlace !== 0) throw new Error(`unexpected PNG: depth ${depth}, colour type ${colour}, interlace ${interlace}`);
  const channels = colour === 6 ? 4 : 3;
  const idat: Buffer[] = [];
  for (let at = 8; at < png.length; ) {
    const length = png.readUInt32BE(at);
    if (png.toString('latin1', at + 4, at + 8) === 'IDAT') idat.push(png.subarray(at + 8, at + 8 + length));
    at += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const rows = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    for (let x = 0; x < stride; x++) {
      const value = raw[y * (stride + 1) + 1 + x]!;
      const left = x >= channels ? rows[y * stride + x - channels]! : 0;
      const up = y > 0 ? rows[(y - 1) * stride + x]! : 0;
      const upLeft = x >= channels && y > 0 ? rows[(y - 1) * stride + x - channels]! : 0;
      const paeth = () => {
        const p = left + up - upLeft;
        const [a, b, c] = [Math.abs(p - left), Math.abs(p - up), Math.abs(p - upLeft)];
        return a <= b && a <= c ? left : b <= c ? up : upLeft;
      };
      const predicted = [0, left, up, (left + up) >> 1, 0][filter!] ?? 0;
      rows[y * stride + x] = (value + (filter === 4 ? paeth() : predicted)) & 0xff;
    }
  }
  const luminance = new Float64Array(width * height);
  for (let i = 0; i < luminance.length; i++) luminance[i] = 0.299 * rows[i * channels]! + 0.587 * rows[i * channels + 1]! + 0.114 * rows[i * channels + 2]!;
  return { width, height, luminance };
}

/** The standard deviation of a screenshot's luminance: 0 for a page of one colour. */
export function pngContrast(png: Buffer): number {
  const { luminance } = pngLuminance(png);
  const mean = luminance.reduce((sum, value) => sum + value, 0) / luminance.length;
  return Math.sqrt(luminance.reduce((sum, value) => sum + (value - mean) ** 2, 0) / luminance.length);
}

/**
 * Records what a page must not do into `misbehaviour`: a request outside `origin` (a CDN,
 * a tracker: the pages need nothing but their server), a console error, an uncaught exception.
 * A test ends with `expect(misbehaviour).toEqual([])`.
 */
export function watchPage(page: Page, origin: string, who: string, misbehaviour: string[]): void {
  page.on('console', (message) => {
    if (message.type() === 'error') misbehaviour.push(`${who}: console error: ${message.text()}`);
  });
  page.on('pageerror', (error) => misbehaviour.push(`${who}: uncaught: ${error.message}`));
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.origin !== origin && url.protocol !== 'data:' && url.protocol !== 'blob:') misbehaviour.push(`${who}: request outside the server: ${request.url()}`);
  });
}

/** The element that has focus, as its tag and text ("BUTTON 兑换 奶茶券"): where a keyboard or screen reader user is. */
export function focused(page: Page): Promise<string> {
  return page.evaluate(() => `${document.activeElement?.tagName} ${document.activeElement?.textContent?.trim()}`);
}

/** Saves a screenshot of the whole page as a test artifact and checks the page drew something; the PNG. */
export async function saveScreenshot(page: Page, name: string): Promise<Buffer> {
  mkdirSync(ARTIFACTS, { recursive: true });
  const png = await page.screenshot({ fullPage: true });
  writeFileSync(join(ARTIFACTS, `${name}.png`), png);
  // A blank page is one colour (0); a page with a bar, a card and text is far from it (30 to 50).
  expect(pngContrast(png), `${name}.png is not blank`).toBeGreaterThan(10);
  // biome-ignore lint/performance/useDomNodeTextContent: what is rendered, not what the DOM holds
  expect(await page.evaluate(() => document.body.innerText.trim().length), `${name} shows text`).toBeGreaterThan(0);
  return png;
}

/** Phones on the web app the server serves at `appUrl`, each one browser context, each page watched (watchPage). */
export function webAppPhones(browser: Browser, appUrl: string) {
  const origin = new URL(appUrl).origin;
  const contexts: BrowserContext[] = [];
  const misbehaviour: string[] = [];

  /** A phone-sized page, watched; `clockAheadMs` skews its device clock from the server's. */
  async function phone(name: string, clockAheadMs = 0): Promise<Page> {
    const context = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'zh-CN' });
    contexts.push(context);
    // The clock runs as a real one does, only off by clockAheadMs.
    if (clockAheadMs) await context.clock.install({ time: Date.now() + clockAheadMs });
    const page = await context.newPage();
    page.setDefaultTimeout(STEP_MS);
    watchPage(page, origin, name, misbehaviour);
    return page;
  }

  return {
    misbehaviour,
    phone,
    /** A phone signed in as `name` through the sign-in screen. */
    async signedIn(name: string, options: { operator?: boolean; clockAheadMs?: number } = {}): Promise<Page> {
      const page = await phone(name, options.clockAheadMs);
      await page.goto(appUrl);
      await page.getByLabel('昵称 Name').fill(name);
      await saveScreenshot(page, 'sign-in');
      if (options.operator) await page.getByLabel('运营 Operator').check();
      await page.getByRole('button', { name: '登录' }).click();
      await page.getByText(name, { exact: true }).waitFor();
      return page;
    },
    screenshot: saveScreenshot,
    async close(): Promise<void> {
      for (const context of contexts) await context.close();
    },
  };
}

/**
 * A server of `env` (with `vars` on top) and chromium, started side by side. If either
 * fails, the other is stopped and the file's stores dropped: a server left running would
 * outlive the test run, as one did when chromium was slow to start.
 */
export async function startServerAndChromium(env: TestEnv, vars: Record<string, string> = {}): Promise<[ServerProcess, Browser]> {
  const [server, browser] = await Promise.allSettled([startServerProcess({ ...env.vars, ...vars }), launchChromium()]);
  if (server.status === 'fulfilled' && browser.status === 'fulfilled') return [server.value, browser.value];
  if (browser.status === 'fulfilled') await browser.value.close().catch(() => undefined);
  if (server.status === 'fulfilled') await stopAll(server.value);
  await openStores(env)
    .cleanup()
    .catch(() => undefined);
  throw server.status === 'rejected' ? server.reason : (browser as PromiseRejectedResult).reason;
}

/** A browser test file's web app: a started server of `env` (with `vars` on top), chromium, and phones on /app/ that sign in through its development sign-in. */
export async function startWebApp(env: TestEnv, vars: Record<string, string> = {}) {
  if (!existsSync('dist/web/index.html')) throw new Error('dist/web is missing: npm run build:web (npm test and npm start run it)');
  const [server, browser] = await startServerAndChromium(env, { DEV_TOKENS: '1', ...vars });
  const stores = openStores(env);
  const appUrl = new URL('/app/', server.url).toString();
  const app = webAppPhones(browser, appUrl);
  return {
    server,
    appUrl,
    app,
    stores,
    async close(): Promise<void> {
      try {
        await app.close();
        await browser.close();
        await stopAll(server);
      } finally {
        await stores.cleanup();
      }
    },
  };
}
