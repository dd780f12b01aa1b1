import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { STEP_MS, saveScreenshot, startServerAndChromium, watchPage } from './support/browser.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { redPacketsAt } from './support/redPackets.ts';
import type { ServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

// The GraphiQL the server serves, in a real browser.

const env = testEnv('graphiql');
let server: ServerProcess;
let stores: Stores;
let browser: Browser;

beforeAll(async () => {
  [server, browser] = await startServerAndChromium(env);
  stores = openStores(env);
});

afterAll(async () => {
  try {
    await browser?.close();
    await stopAll(server);
  } finally {
    await stores?.cleanup();
  }
});

it('a subscription started in GraphiQL, signed in from its headers tab, shows live updates', { timeout: 60_000 }, async () => {
  const redPackets = redPacketsAt(server.url);
  const packet = await redPackets.create('graphiql-sender', { totalAmount: 30, count: 3 });

  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(STEP_MS);
  const misbehaviour: string[] = [];
  watchPage(page, new URL(server.url).origin, 'graphiql', misbehaviour);
  await page.goto(server.url);

  // The operation editor (Monaco): replace the welcome text with the subscription.
  const operation = page.locator('.graphiql-query-editor .monaco-editor').first();
  await operation.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(`subscription { redPacketUpdated(packetId: "${packet.id}") { remainingCount status } }`);

  // The headers tab, as a developer signs in there.
  await page.getByRole('button', { name: 'Headers' }).click();
  await page.locator('.graphiql-editor-tool .monaco-editor').last().click();
  await page.keyboard.press('Control+A');
  await page.keyboard.press('Delete');
  await page.keyboard.insertText(JSON.stringify({ Authorization: `Bearer ${await tokenOf('graphiql-user')}` }));

  await page
    .getByRole('button', { name: /Execute/ })
    .first()
    .click();
  const response = page.locator('.graphiql-response');
  await response
    .filter({ hasText: '"remainingCount": 3' })
    .waitFor()
    .catch(async (error: Error) => {
      // biome-ignore lint/performance/useDomNodeTextContent: Playwright's Locator, not the DOM property
      throw new Error(`${error.message}\nthe result pane shows: ${await response.innerText()}`);
    });

  // A change made over HTTP reaches the result pane.
  const grab = await redPackets.grab('graphiql-grabber', packet.id);
  expect(grab.__typename).toBe('GrabbedShare');
  await response.filter({ hasText: '"remainingCount": 2' }).waitFor();
  // biome-ignore lint/performance/useDomNodeTextContent: Playwright's Locator, not the DOM property
  expect(await response.innerText()).not.toContain('UNAUTHENTICATED');
  await saveScreenshot(page, 'graphiql-subscription');
  expect(misbehaviour).toEqual([]);
  await page.close();
});
