import { randomUUID } from 'node:crypto';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { oweRefunds } from '../src/domain/money/refunds.ts';
import { type Database, openDatabase } from '../src/infra/db/database.ts';
import { createLogger } from '../src/infra/logger.ts';
import { CreditWalletDocument, type CreditWalletMutationVariables, MyRefundsDocument, MyWalletDocument, RefundsDocument } from './gql/generated.ts';
import { errorCodes, gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { cursorOf, everyPage, expectInvalidCursor } from './support/paging.ts';
import { sleep, waitFor } from './support/poll.ts';
import { snapshotStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';
import { expectWalletInvariants, walletsAt } from './support/wallets.ts';

// No delivery rounds: the refunds listed here stay as the test owes them.
const env = testEnv('wallets_api', { SWEEP_INTERVAL_MS: '600000' });
const started = startedServer(env);
let db: Database;
let wallets: ReturnType<typeof walletsAt>;
let admin: string;

beforeAll(async () => {
  wallets = walletsAt(started.server.url);
  admin = await tokenOf('operator', { admin: true });
  db = await openDatabase(loadConfig(env.vars));
  await wallets.credit('operator', { userId: 'holder', amountCents: 500, requestId: 'holder-1' });
});
afterAll(async () => {
  await db?.close();
});

/** Runs `request` and checks that no table and no key changed. */
async function unchanged<T>(request: () => Promise<T>): Promise<T> {
  const before = await snapshotStores(started.stores, env);
  const result = await request();
  expect(await snapshotStores(started.stores, env)).toEqual(before);
  return result;
}

const credit = (variables: CreditWalletMutationVariables, token?: string) => gql(started.server.url, CreditWalletDocument, variables, token);
const goodCredit = { userId: 'someone', amountCents: 100, reason: 'goodwill', requestId: 'goodwill-1' };

describe('who may call what', () => {
  const operations = [
    ['me.wallet', print(MyWalletDocument), {}],
    ['me.refunds', print(MyRefundsDocument), {}],
    ['refunds', print(RefundsDocument), {}],
    ['creditWallet', print(CreditWalletDocument), goodCredit],
  ] as const;

  it.each(operations)('%s: UNAUTHENTICATED anonymous; a user may read their own wallet and refunds only; an operator may do all', async (name, document, variables) => {
    const asUser = name === 'me.wallet' || name === 'me.refunds' ? 'ok' : 'FORBIDDEN';
    for (const [token, expected] of [
      [undefined, 'UNAUTHENTICATED'],
      ['not-a-jwt', 'UNAUTHENTICATED'],
      [await tokenOf('mallory'), asUser],
      [admin, 'ok'],
    ] as const) {
      const response = await (expected === 'ok' && name === 'creditWallet'
        ? gql(started.server.url, document, { ...variables, requestId: randomUUID() } as never, token)
        : unchanged(() => gql(started.server.url, document, variables as never, token)));
      expect(errorCodes(response), `${name} as ${String(token).slice(0, 10)}: ${JSON.stringify(response.body.errors)}`).toEqual(expected === 'ok' ? [] : [expected]);
    }
  });

  it('tells the user what each refund is owed for: a team, a red packet, or neither', async () => {
    const [teamId, packetId] = [randomUUID(), randomUUID()];
    await oweRefunds(db.prisma, [
      { sourceKey: `team:${teamId}:subject-owner`, userId: 'subject-owner', amountCents: 7, reason: 'TEAM_FAILED', paymentRef: 'pay-subject' },
      { sourceKey: `packet:${packetId}`, userId: 'subject-owner', amountCents: 8, reason: 'PACKET_EXPIRED', paymentRef: null },
      { sourceKey: `payment:${randomUUID()}`, userId: 'subject-owner', amountCents: 9, reason: 'WALLET_FULL', paymentRef: 'pay-of-no-team' },
    ]);
    const { nodes } = await wallets.myRefunds('subject-owner', { first: 10 });
    expect(nodes.map(({ amountCents, teamId, packetId }) => ({ amountCents, teamId, packetId })).sort((a, b) => a.amountCents - b.amountCents)).toEqual([
      { amountCents: 7, teamId, packetId: null },
      { amountCents: 8, teamId: null, packetId },
      { amountCents: 9, teamId: null, packetId: null },
    ]);
  });

  it("keeps a refund's payment reference and last error for operators", async () => {
    await oweRefunds(db.prisma, [{ sourceKey: `payment:${randomUUID()}`, userId: 'mallory', amountCents: 5, reason: 'LATE_PAYMENT', paymentRef: 'pay-1' }]);
    for (const field of ['paymentRef', 'lastError']) {
      const response = await gql(started.server.url, `{ me { refunds { nodes { id ${field} } } } }`, {}, await tokenOf('mallory'));
      expect(errorCodes(response), field).toEqual(['FORBIDDEN']);
    }
    const listed = await wallets.refunds('operator', { status: 'PENDING' });
    expect(listed.nodes).toContainEqual(expect.objectContaining({ userId: 'mallory', paymentRef: 'pay-1', lastError: null }));
  });
});

describe('creditWallet', () => {
  const badCredits: [string, Record<string, unknown>][] = [
    ['amountCents 0', { amountCents: 0 }],
    ['a negative amountCents', { amountCents: -100 }],
    ['amountCents above 100,000,000', { amountCents: 100_000_001 }],
    ['amountCents beyond 32 bits', { amountCents: 2 ** 31 }],
    ['a float amountCents', { amountCents: 1.5 }],
    ['a string amountCents', { amountCents: '100' }],
    ['a null amountCents', { amountCents: null }],
    ['an empty userId', { userId: '' }],
    ['a userId of 129 characters', { userId: 'u'.repeat(129) }],
    ['a userId with a control character', { userId: 'a\u0000b' }],
    ['an empty reason', { reason: '' }],
    ['a blank reason', { reason: '   ' }],
    ['a reason of 201 characters', { reason: 'x'.repeat(201) }],
    ['no reason', { reason: undefined }],
    ['an empty requestId', { requestId: '' }],
    ['a requestId of 129 characters', { requestId: 'r'.repeat(129) }],
    ['a numeric requestId', { requestId: 42 }],
    ['an object as requestId', { requestId: { id: 'r' } }],
    ['a requestId with a lone surrogate', { requestId: 'r\ud800' }],
  ];

  it.each(badCredits)('with %s is BAD_USER_INPUT and changes nothing', async (_name, change) => {
    const response = await unchanged(() => credit({ ...goodCredit, ...change } as CreditWalletMutationVariables, admin));
    expect(response.body.data?.creditWallet ?? null).toBeNull();
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
  });

  it('credits once under hundreds of concurrent identical calls, each answered with the balance after it', async () => {
    const user = `crowd-${randomUUID()}`;
    const answers = await Promise.all(Array.from({ length: 300 }, () => wallets.credit('operator', { userId: user, amountCents: 2500, reason: 'compensation', requestId: `crowd-${user}` })));
    expect(answers).toEqual(Array(300).fill(2500));
    const { rows } = await started.stores.sql.query('SELECT delta_cents, reason, note FROM wallet_ledger WHERE user_id = $1', [user]);
    expect(rows).toEqual([{ delta_cents: 2500, reason: 'OPERATOR_CREDIT', note: 'compensation' }]);
    expect((await wallets.wallet(user)).balanceCents).toBe(2500);
    await expectWalletInvariants(started.stores);
  });

  it('refuses a requestId reused for another user or amount, and a balance beyond 32 bits, changing nothing', async () => {
    expect(await wallets.credit('operator', { ...goodCredit, userId: 'reuser', requestId: 'reuse-1' })).toBe(100);
    for (const variables of [
      { ...goodCredit, userId: 'reuser', amountCents: 101, requestId: 'reuse-1' },
      { ...goodCredit, userId: 'other-user', requestId: 'reuse-1' },
      { ...goodCredit, userId: 'holder', amountCents: 100_000_000, requestId: 'holder-1' },
    ]) {
      const response = await unchanged(() => credit(variables, admin));
      expect(errorCodes(response), JSON.stringify(variables)).toEqual(['BAD_USER_INPUT']);
    }
    // Up to the limit of a 32-bit balance, and not a cent beyond.
    const rich = `rich-${randomUUID()}`;
    for (let i = 0; i < 21; i++) await wallets.credit('operator', { userId: rich, amountCents: 100_000_000 });
    const last = 2_147_483_647 - 2_100_000_000;
    expect(await wallets.credit('operator', { userId: rich, amountCents: last })).toBe(2_147_483_647);
    const beyond = await unchanged(() => credit({ ...goodCredit, userId: rich, amountCents: 1, requestId: 'beyond' }, admin));
    expect(errorCodes(beyond)).toEqual(['BAD_USER_INPUT']);
    await expectWalletInvariants(started.stores);
  });
});

describe('me.wallet', () => {
  it('pages through the ledger newest first, every entry once', async () => {
    const user = `pager-${randomUUID()}`;
    for (let i = 1; i <= 7; i++) await wallets.credit('operator', { userId: user, amountCents: i, reason: `credit ${i}` });
    const seen: number[] = [];
    let after: string | null = null;
    for (;;) {
      const wallet: Awaited<ReturnType<typeof wallets.wallet>> = await wallets.wallet(user, { first: 3, after });
      expect(wallet.balanceCents).toBe(28);
      seen.push(...wallet.entries.nodes.map((entry) => entry.deltaCents));
      for (const entry of wallet.entries.nodes) expect(entry).toMatchObject({ reason: 'OPERATOR_CREDIT', note: `credit ${entry.deltaCents}`, createdAt: expect.any(String) });
      if (!wallet.entries.pageInfo.hasNextPage) break;
      after = wallet.entries.pageInfo.endCursor;
    }
    expect(seen).toEqual([7, 6, 5, 4, 3, 2, 1]);
    const empty = await wallets.wallet(`nobody-${randomUUID()}`);
    expect(empty).toEqual({ balanceCents: 0, entries: { nodes: [], pageInfo: { hasNextPage: false, endCursor: null } } });
  });

  it("takes only a cursor of my own ledger: another user's entry, or none, is INVALID_CURSOR, changing nothing", async () => {
    const [bob, alice] = [`bob-${randomUUID()}`, `alice-${randomUUID()}`];
    // Credited in turn, so each of Alice's entries falls between two of Bob's.
    for (let i = 1; i <= 3; i++) {
      await wallets.credit('operator', { userId: bob, amountCents: i });
      await wallets.credit('operator', { userId: alice, amountCents: i });
    }
    const bobs = (await wallets.wallet(bob)).entries.nodes.map((entry) => entry.id);
    const alices = (await wallets.wallet(alice)).entries.nodes.map((entry) => entry.id);
    expect(bobs).toHaveLength(3);
    // Bob's own cursors page his ledger one entry at a time, none skipped or repeated.
    const paged = await everyPage(async (after) => (await wallets.wallet(bob, { first: 1, after })).entries);
    expect(paged.map((entry) => entry.id)).toEqual(bobs);
    const bobToken = await tokenOf(bob);
    for (const [what, id] of [
      ["Alice's entry", alices[1]!],
      ['no entry', '999999999'],
    ] as const) {
      expectInvalidCursor(await unchanged(() => gql(started.server.url, MyWalletDocument, { first: 5, after: cursorOf(id) }, bobToken)), what);
    }
  });

  it.each([
    ['a negative first', { first: -1 }],
    ['first 101', { first: 101 }],
    ['a garbage cursor', { after: 'garbage' }],
    ['cursor 0', { after: '0' }],
    ['a negative cursor', { after: '-5' }],
    ['a cursor of 19 digits', { after: '1'.repeat(19) }],
  ])('with %s is BAD_USER_INPUT', async (_name, page) => {
    const response = await unchanged(() => gql(started.server.url, MyWalletDocument, page, admin));
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
  });
});

describe('refunds', () => {
  it('shows a user their own refunds, newest first, and operators every refund, filtered by status', async () => {
    const user = `refunded-${randomUUID()}`;
    const owed = Array.from({ length: 5 }, (_, i) => ({ sourceKey: `packet:${user}:${i}`, userId: user, amountCents: 10 + i, reason: 'PACKET_EXPIRED' as const, paymentRef: null }));
    // Owed a few ms apart: created_at holds milliseconds, and refunds of the same one are in no set order.
    for (const refund of owed) {
      await oweRefunds(db.prisma, [refund]);
      await sleep(2);
    }
    await oweRefunds(db.prisma, [{ sourceKey: `team:${randomUUID()}`, userId: 'someone-else', amountCents: 99, reason: 'TEAM_FAILED', paymentRef: null }]);
    const first = await wallets.myRefunds(user, { first: 2 });
    const second = await wallets.myRefunds(user, { first: 2, after: first.pageInfo.endCursor });
    const third = await wallets.myRefunds(user, { first: 2, after: second.pageInfo.endCursor });
    expect([first, second, third].map((page) => page.pageInfo.hasNextPage)).toEqual([true, true, false]);
    const mine = [...first.nodes, ...second.nodes, ...third.nodes];
    expect(mine.map((refund) => refund.amountCents)).toEqual([14, 13, 12, 11, 10]);
    for (const refund of mine) expect(refund).toMatchObject({ reason: 'PACKET_EXPIRED', status: 'PENDING', paidTo: null, paidAt: null, attempts: 0 });

    // Paid by the delivery worker (run here: this server has no rounds), then listed by status.
    const app = await createApp(loadConfig({ ...env.vars, LOG_LEVEL: 'silent' }), createLogger('silent'));
    try {
      await app.refunds.deliverDue();
    } finally {
      await app.close();
    }
    await waitFor('the refunds to be paid', async () => (await wallets.myRefunds(user)).nodes.every((refund) => refund.status === 'PAID'));
    expect((await wallets.myRefunds(user)).nodes).toEqual(mine.map((refund) => ({ ...refund, status: 'PAID', paidTo: 'WALLET', paidAt: expect.any(String), attempts: 1 })));
    const wallet = await wallets.wallet(user);
    expect(wallet.balanceCents).toBe(60);
    // Each REFUND entry names the refund it paid in, and so what that was owed for.
    expect(wallet.entries.nodes.map((entry) => ({ reason: entry.reason, refund: entry.refund?.id })).sort((a, b) => a.refund!.localeCompare(b.refund!))).toEqual(
      mine.map((refund) => ({ reason: 'REFUND', refund: refund.id })).sort((a, b) => a.refund.localeCompare(b.refund)),
    );
    for (const entry of wallet.entries.nodes) expect(entry.refund).toMatchObject({ reason: 'PACKET_EXPIRED', teamId: null });
    const paid = await wallets.refunds('operator', { status: 'PAID', first: 100 });
    expect(paid.nodes.map((refund) => refund.status)).toEqual(Array(paid.nodes.length).fill('PAID'));
    expect(paid.nodes.filter((refund) => refund.userId === user)).toHaveLength(5);
    expect((await wallets.refunds('operator', { status: 'PENDING', first: 100 })).nodes).toEqual([]);
    await expectWalletInvariants(started.stores);
  });

  it("takes only a cursor of the caller's own refunds, and keeps an operator's place in a status the cursor's refund left", async () => {
    const [bob, alice] = [`bob-${randomUUID()}`, `alice-${randomUUID()}`];
    const owe = async (userId: string, amountCents: number) => {
      const sourceKey = `packet:${randomUUID()}`;
      await oweRefunds(db.prisma, [{ sourceKey, userId, amountCents, reason: 'PACKET_EXPIRED', paymentRef: null }]);
      await sleep(2);
      return (await db.prisma.refund.findFirstOrThrow({ where: { userId, amountCents }, select: { id: true } })).id;
    };
    // Owed in turn, so each of Alice's refunds falls between two of Bob's.
    const bobs: string[] = [];
    const alices: string[] = [];
    for (let i = 1; i <= 3; i++) {
      bobs.unshift(await owe(bob, i));
      alices.unshift(await owe(alice, i));
    }
    // Bob's own cursors page his refunds one at a time, none skipped or repeated.
    const paged = await everyPage((after) => wallets.myRefunds(bob, { first: 1, after }));
    expect(paged.map((refund) => refund.id)).toEqual(bobs);
    const bobToken = await tokenOf(bob);
    for (const [what, id] of [
      ["Alice's refund", alices[1]!],
      ['no refund', randomUUID()],
    ] as const) {
      expectInvalidCursor(await unchanged(() => gql(started.server.url, MyRefundsDocument, { first: 5, after: cursorOf(id) }, bobToken)), what);
    }
    expectInvalidCursor(await unchanged(() => gql(started.server.url, RefundsDocument, { first: 5, after: cursorOf(randomUUID()) }, admin)), 'no refund, for operators');

    // The refund an operator's page of PENDING ended on is paid before the next page: the next starts after it all the same.
    const pending = await wallets.refunds('operator', { status: 'PENDING', first: 1 });
    expect(pending.nodes.map((refund) => refund.id)).toEqual([alices[0]]);
    await db.prisma.refund.update({ where: { id: alices[0]! }, data: { status: 'PAID', paidTo: 'PROVIDER', paidAt: new Date(), attempts: 1 } });
    const next = await wallets.refunds('operator', { status: 'PENDING', first: 2, after: pending.pageInfo.endCursor });
    expect(next.nodes.map((refund) => refund.id)).toEqual([bobs[0], alices[1]]);
  });

  it.each([
    ['a negative first', { first: -1 }],
    ['first 101', { first: 101 }],
    ['a garbage cursor', { after: 'garbage' }],
    ['a cursor of another list', { after: '12345' }],
    ['a cursor of 201 characters', { after: 'A'.repeat(201) }],
  ])('with %s is BAD_USER_INPUT, for users and operators', async (_name, page) => {
    for (const [document, token] of [
      [print(MyRefundsDocument), await tokenOf('mallory')],
      [print(RefundsDocument), admin],
    ] as const) {
      const response = await unchanged(() => gql(started.server.url, document, page, token));
      expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
    }
  });

  it('refuses a status that is not one', async () => {
    const response = await unchanged(() => gql(started.server.url, RefundsDocument, { status: 'LOST' as never }, admin));
    expect(errorCodes(response)).not.toEqual([]);
    expect(response.body.data ?? null).toBeNull();
  });
});
