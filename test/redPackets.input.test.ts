import fc from 'fast-check';
import { SignJWT } from 'jose';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signToken } from '../src/infra/auth/tokens.ts';
import { CloseRedPacketDocument, CreateRedPacketDocument, type CreateRedPacketInput, GrabRedPacketDocument, RedPacketDocument } from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql } from './support/client.ts';
import { TEST_JWT_SECRET, testEnv } from './support/env.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { type RedPacketsClient, redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores, stateKeys } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('rp_input');
let server: ServerProcess;
let stores: Stores;
let redPackets: RedPacketsClient;
const SENDER = 'input-sender';
/** The sender's token, for raw requests. */
let senderToken: string;
/** A live packet that the refused requests must leave alone. */
let packetId: string;

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
  redPackets = redPacketsAt(server.url);
  senderToken = await tokenOf(SENDER);
  packetId = (await redPackets.create(SENDER, { totalAmount: 1_000, count: 10 })).id;
  expect((await redPackets.grab('input-grabber', packetId)).__typename).toBe('GrabbedShare');
});

afterAll(async () => {
  await server?.stop();
  await stores?.cleanup();
});

interface State {
  packets: number;
  grabs: number;
  ledger: number;
  refunds: number;
  keys: string[];
  meta: Record<string, string>;
}

/** Everything a request could change: rows in both tables, every Redis key under the prefix, the live packet's meta. */
async function state(): Promise<State> {
  const [{ rows: packets }, { rows: grabs }, { rows: ledger }, { rows: refunds }] = await Promise.all([
    stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM red_packet'),
    stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM red_packet_grab'),
    stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM wallet_ledger'),
    stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM refund'),
  ]);
  const keys = await stateKeys(stores.redis, env.keyPrefix);
  return { packets: packets[0]!.n, grabs: grabs[0]!.n, ledger: ledger[0]!.n, refunds: refunds[0]!.n, keys, meta: await stores.redis.hgetall(`{rp:${packetId}}:meta`) };
}

/** Runs the request and checks that it changed nothing. */
async function unchanged<T>(request: () => Promise<T>): Promise<T> {
  const before = await state();
  const result = await request();
  expect(await state()).toEqual(before);
  return result;
}

/** A raw POST: any body, any headers. */
async function post(body: string, headers: Record<string, string> = { 'content-type': 'application/json' }) {
  const response = await fetch(server.url, { method: 'POST', headers, body });
  const text = await response.text();
  let json: GraphqlResponse<unknown>['body'] | undefined;
  try {
    json = JSON.parse(text) as GraphqlResponse<unknown>['body'];
  } catch {
    json = undefined;
  }
  return { status: response.status, json, text };
}

const codesOf = (body: GraphqlResponse<unknown>['body'] | undefined) => (body?.errors ?? []).map((error) => error.extensions?.code);

describe('malformed input is BAD_USER_INPUT and changes nothing', () => {
  const badInputs: [string, Record<string, unknown>][] = [
    ['count × minAmount above totalAmount', { totalAmount: 10, count: 5, minAmount: 3 }],
    ['count × maxAmount below totalAmount', { totalAmount: 1_000, count: 5, maxAmount: 100 }],
    ['a negative totalAmount', { totalAmount: -100, count: 1 }],
    ['a zero totalAmount', { totalAmount: 0, count: 1 }],
    ['count 0', { totalAmount: 100, count: 0 }],
    ['a negative count', { totalAmount: 100, count: -3 }],
    ['count 10,001', { totalAmount: 100_000_000, count: 10_001 }],
    ['totalAmount 100,000,001', { totalAmount: 100_000_001, count: 1 }],
    ['maxAmount below minAmount', { totalAmount: 1_000, count: 10, minAmount: 50, maxAmount: 20 }],
    ['minAmount 0', { totalAmount: 100, count: 2, minAmount: 0 }],
    ['a negative maxAmount', { totalAmount: 100, count: 2, maxAmount: -1 }],
    ['expiresInSeconds 0', { totalAmount: 100, count: 2, expiresInSeconds: 0 }],
    ['expiresInSeconds beyond a week', { totalAmount: 100, count: 2, expiresInSeconds: 8 * 24 * 3600 }],
    ['a greeting of 65 characters', { totalAmount: 100, count: 2, greeting: 'x'.repeat(65) }],
    ['a string for an Int', { totalAmount: 'x', count: 1 }],
    ['a float for an Int', { totalAmount: 100.5, count: 1 }],
    ['an Int beyond 32 bits', { totalAmount: 2 ** 31, count: 1 }],
    ['a missing totalAmount', { count: 1 }],
    ['an unknown field', { totalAmount: 100, count: 1, bonus: 5 }],
    ['an unknown SplitMode', { totalAmount: 100, count: 1, mode: 'LUCKY' }],
    ['a lowercase SplitMode', { totalAmount: 100, count: 1, mode: 'random' }],
    ['an unknown fundedBy', { totalAmount: 100, count: 1, fundedBy: 'BANK' }],
    ['a lowercase fundedBy', { totalAmount: 100, count: 1, fundedBy: 'shop' }],
    ['a null fundedBy', { totalAmount: 100, count: 1, fundedBy: null }],
    ['an empty requestId', { totalAmount: 100, count: 1, requestId: '' }],
    ['a requestId of 129 characters', { totalAmount: 100, count: 1, requestId: 'r'.repeat(129) }],
  ];

  it.each(badInputs)('createRedPacket with %s, as variables', async (_name, input) => {
    const response = await unchanged(() => redPackets.raw(CreateRedPacketDocument, { input: input as unknown as CreateRedPacketInput }, SENDER));
    expect(response.body.data?.createRedPacket ?? null).toBeNull();
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
  });

  const inlineDocuments: [string, string][] = [
    ['count × minAmount above totalAmount', '{ totalAmount: 10, count: 5, minAmount: 3 }'],
    ['a negative totalAmount', '{ totalAmount: -1, count: 1 }'],
    ['count 0', '{ totalAmount: 100, count: 0 }'],
    ['count 10,001', '{ totalAmount: 100000000, count: 10001 }'],
    ['totalAmount 100,000,001', '{ totalAmount: 100000001, count: 1 }'],
    ['maxAmount below minAmount', '{ totalAmount: 1000, count: 10, minAmount: 50, maxAmount: 20 }'],
    ['a string for an Int', '{ totalAmount: "x", count: 1 }'],
    ['an unknown SplitMode', '{ totalAmount: 100, count: 1, mode: LUCKY }'],
    ['a SplitMode as a string', '{ totalAmount: 100, count: 1, mode: "RANDOM" }'],
    ['an unknown fundedBy', '{ totalAmount: 100, count: 1, fundedBy: BANK }'],
    ['a fundedBy as a string', '{ totalAmount: 100, count: 1, fundedBy: "SHOP" }'],
  ];

  it.each(inlineDocuments)('createRedPacket with %s, inline', async (_name, input) => {
    const response = await unchanged(() => redPackets.raw<{ createRedPacket?: { id: string } }, object>(`mutation { createRedPacket(input: ${input}) { __typename } }`, {}, SENDER));
    expect(response.body.data?.createRedPacket ?? null).toBeNull();
    expect(errorCodes(response), JSON.stringify(response.body.errors)).toEqual(['BAD_USER_INPUT']);
  });

  it('rejects an unknown enum value given through an enum-typed variable', async () => {
    const response = await unchanged(() =>
      redPackets.raw('mutation ($mode: SplitMode!) { createRedPacket(input: { totalAmount: 100, count: 1, mode: $mode }) { __typename } }', { mode: 'LUCKY' }, SENDER),
    );
    expect(errorCodes(response)).toEqual(['BAD_USER_INPUT']);
  });

  it('rejects a grab without its packetId, or with a packetId of the wrong type', async () => {
    for (const variables of [{}, { packetId: null }, { packetId: { id: 1 } }, { packetId: [packetId] }]) {
      const response = await unchanged(() => redPackets.raw(GrabRedPacketDocument, variables as unknown as { packetId: string }, 'input-grabber-2'));
      expect(errorCodes(response), JSON.stringify(variables)).toEqual(['BAD_USER_INPUT']);
    }
  });

  it('rejects an empty query and a syntax error (GraphQL over HTTP answers those with a body of errors)', async () => {
    for (const query of ['', '   ', '# only a comment', 'mutation { createRedPacket(', '{ redPackets { id } }', 'mutation { createRedPacket(input: { totalAmount: 100, count: 1 }) }']) {
      const response = await unchanged(() => post(JSON.stringify({ query }), { 'content-type': 'application/json', authorization: `Bearer ${senderToken}` }));
      expect(response.json?.data ?? null, query).toBeNull();
      expect(codesOf(response.json), `${JSON.stringify(query)} -> ${response.text}`).toEqual(['BAD_USER_INPUT']);
    }
  });

  it('rejects a request without a query string', async () => {
    for (const body of [{}, { query: 42 }, { query: null, variables: { id: 1 } }, { query: ['{ __typename }'] }]) {
      const response = await unchanged(() => post(JSON.stringify(body), { 'content-type': 'application/json', authorization: `Bearer ${senderToken}` }));
      expect(response.json?.data ?? null).toBeNull();
      // Yoga's own request checks: BAD_REQUEST, not a GraphQL document at all.
      expect(codesOf(response.json), `${JSON.stringify(body)} -> ${response.text}`).toEqual([expect.stringMatching(/^(BAD_REQUEST|BAD_USER_INPUT)$/)]);
    }
  });

  it('answers garbage that is not a GraphQL request with a 4xx', async () => {
    const garbage: [string, Record<string, string>][] = [
      ['{not json', { 'content-type': 'application/json' }],
      ['', { 'content-type': 'application/json' }],
      ['[1, 2, 3', { 'content-type': 'application/json' }],
      ['"just a string"', { 'content-type': 'application/json' }],
      ['\u0000\u0001\u0002', { 'content-type': 'application/octet-stream' }],
    ];
    for (const [body, headers] of garbage) {
      const response = await unchanged(() => post(body, { ...headers, authorization: `Bearer ${senderToken}` }));
      expect(response.status, `${JSON.stringify(body)} -> ${response.text}`).toBeGreaterThanOrEqual(400);
      expect(response.status, `${JSON.stringify(body)} -> ${response.text}`).toBeLessThan(500);
    }
  });
});

describe('callers without a valid token, or without the role', () => {
  const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const badTokens: [string, () => Promise<string>][] = [
    ['garbage', async () => 'not-a-jwt'],
    ['signed with another secret', () => signToken('another-secret-that-is-also-32-characters-long', { userId: 'mallory', roles: ['admin'] })],
    [
      'expired',
      () =>
        new SignJWT({ roles: ['admin'] })
          .setProtectedHeader({ alg: 'HS256' })
          .setSubject('mallory')
          .setIssuedAt(Math.floor(Date.now() / 1000) - 3600)
          .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
          .sign(new TextEncoder().encode(TEST_JWT_SECRET)),
    ],
    ['unsigned (alg none)', async () => `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url({ sub: 'mallory', roles: ['admin'], exp: 4_102_444_800 })}.`],
    ['with its signature cut off', async () => `${(await tokenOf('mallory', { admin: true })).split('.').slice(0, 2).join('.')}.`],
    [
      'with a tampered payload',
      async () => {
        const [header, , signature] = (await tokenOf('mallory')).split('.');
        return `${header}.${base64url({ sub: 'mallory', roles: ['admin'], exp: 4_102_444_800 })}.${signature}`;
      },
    ],
    ['without a subject', () => new SignJWT({ roles: [] }).setProtectedHeader({ alg: 'HS256' }).setExpirationTime('1h').sign(new TextEncoder().encode(TEST_JWT_SECRET))],
  ];

  type Operation = [name: string, run: (token?: string) => Promise<GraphqlResponse<Record<string, unknown>>>];
  const operations = (): Operation[] => [
    ['createRedPacket', (token) => gql(server.url, CreateRedPacketDocument, { input: { totalAmount: 100, count: 2 } }, token)],
    ['grabRedPacket', (token) => gql(server.url, GrabRedPacketDocument, { packetId }, token)],
    ['redPacket', (token) => gql(server.url, RedPacketDocument, { id: packetId }, token)],
    ['closeRedPacket', (token) => gql(server.url, CloseRedPacketDocument, { packetId }, token)],
  ];
  /** No data for the operation: null data, or null for the (nullable) field. */
  const noData = (response: GraphqlResponse<Record<string, unknown>>, name: string) => response.body.data?.[name] ?? null;

  it('UNAUTHENTICATED without a token', async () => {
    for (const [name, run] of operations()) {
      const response = await unchanged(() => run());
      expect(noData(response, name), name).toBeNull();
      expect(errorCodes(response), name).toEqual(['UNAUTHENTICATED']);
    }
  });

  it.each(badTokens)('UNAUTHENTICATED with a token that is %s', async (_name, makeToken) => {
    const token = await makeToken();
    for (const [name, run] of operations()) {
      const response = await unchanged(() => run(token));
      expect(noData(response, name), name).toBeNull();
      expect(errorCodes(response), name).toEqual(['UNAUTHENTICATED']);
    }
  });

  it('UNAUTHENTICATED with an Authorization header that is not a bearer token', async () => {
    const token = await tokenOf('input-grabber-3');
    for (const authorization of [`Basic ${Buffer.from('a:b').toString('base64')}`, token, `Bearer ${token} extra`, 'Bearer']) {
      const response = await unchanged(() =>
        post(JSON.stringify({ query: 'mutation ($id: ID!) { grabRedPacket(packetId: $id) { __typename } }', variables: { id: packetId } }), {
          'content-type': 'application/json',
          authorization,
        }),
      );
      expect(codesOf(response.json), authorization).toEqual(['UNAUTHENTICATED']);
    }
  });

  it('FORBIDDEN for a signed-in user who is not an operator asking for a shop-funded packet', async () => {
    const response = await unchanged(() => redPackets.raw(CreateRedPacketDocument, { input: { totalAmount: 100, count: 2, fundedBy: 'SHOP' } }, 'not-an-op'));
    expect(response.body.data?.createRedPacket ?? null).toBeNull();
    expect(errorCodes(response)).toEqual(['FORBIDDEN']);
  });

  it('UNAUTHENTICATED for an anonymous shop-funded packet', async () => {
    const response = await unchanged(() => redPackets.raw(CreateRedPacketDocument, { input: { totalAmount: 100, count: 2, fundedBy: 'SHOP' } }));
    expect(errorCodes(response)).toEqual(['UNAUTHENTICATED']);
  });

  it('InsufficientFunds, and no packet, for a sender whose wallet holds too little', async () => {
    for (const fundedBy of [undefined, 'WALLET' as const]) {
      const created = await unchanged(() => redPackets.send('input-pauper', { totalAmount: 100, count: 2, ...(fundedBy ? { fundedBy } : {}) }));
      expect(created).toMatchObject({ __typename: 'InsufficientFunds', balanceCents: 0, amountCents: 100 });
    }
  });

  it('FORBIDDEN for a signed-in user who is not an operator closing a packet', async () => {
    const response = await unchanged(() => redPackets.raw(CloseRedPacketDocument, { packetId }, 'not-an-op'));
    expect(errorCodes(response)).toEqual(['FORBIDDEN']);
    expect((await redPackets.packet(SENDER, packetId))?.status).toBe('ACTIVE');
  });

  it('NotFound for a grab on a packet that does not exist, leaving no key behind', async () => {
    for (const id of ['00000000-0000-0000-0000-000000000000', 'nope', '{rp:x}', '*']) {
      const grabRedPacket = await unchanged(() => redPackets.grab('input-grabber-4', id));
      expect(grabRedPacket.__typename, id).toBe('NotFound');
      expect(await unchanged(() => redPackets.packet('input-grabber-4', id))).toBeNull();
    }
  });
});

describe('valid input, at random', () => {
  it('always splits into exactly count shares within the bounds that sum to the total, and hands them all out', async () => {
    let run = 0;
    const spec = fc
      .record({
        count: fc.integer({ min: 1, max: 25 }),
        minAmount: fc.integer({ min: 1, max: 50 }),
        extra: fc.integer({ min: 0, max: 5_000 }),
        maxSlack: fc.option(fc.integer({ min: 0, max: 5_000 }), { nil: undefined }),
        mode: fc.constantFrom('RANDOM' as const, 'NORMAL' as const, 'EQUAL' as const),
        defaults: fc.boolean(),
      })
      .map(({ count, minAmount, extra, maxSlack, mode, defaults }) => {
        const totalAmount = count * minAmount + extra;
        const lowestMax = Math.max(minAmount, Math.ceil(totalAmount / count));
        const maxAmount = maxSlack === undefined ? undefined : Math.min(totalAmount, lowestMax + maxSlack);
        // With `defaults`, leave mode, minAmount and maxAmount to the schema (RANDOM, 1, the widest).
        if (defaults) return { input: { totalAmount: count + extra, count } as CreateRedPacketInput, minAmount: 1, mode: 'RANDOM' as const };
        const input: CreateRedPacketInput = { totalAmount, count, minAmount, mode, ...(maxAmount === undefined ? {} : { maxAmount }) };
        return { input, minAmount, mode };
      });

    await fc.assert(
      fc.asyncProperty(spec, async ({ input, minAmount, mode }) => {
        run++;
        const packet = await redPackets.create(SENDER, input);
        expect(packet).toMatchObject({ totalAmount: input.totalAmount, count: input.count, status: 'ACTIVE', remainingCount: input.count, remainingAmount: input.totalAmount });
        const maxAmount = input.maxAmount ?? input.totalAmount - (input.count - 1) * minAmount;

        const users = Array.from({ length: input.count + 2 }, (_, i) => `prop-${run}-${i}`);
        const results = await Promise.all(users.map((user) => redPackets.grab(user, packet.id)));
        const amounts = results.flatMap((result) => (result.__typename === 'GrabbedShare' ? [result.amount] : []));
        expect(amounts).toHaveLength(input.count);
        expect(results.filter((result) => result.__typename === 'RedPacketEmpty')).toHaveLength(2);
        expect(amounts.reduce((a, b) => a + b, 0)).toBe(input.totalAmount);
        for (const amount of amounts) {
          expect(amount).toBeGreaterThanOrEqual(minAmount);
          expect(amount).toBeLessThanOrEqual(maxAmount);
        }
        if (mode === 'EQUAL') expect(Math.max(...amounts) - Math.min(...amounts)).toBeLessThanOrEqual(1);

        const grabs = await expectRedPacketInvariants(stores, packet.id);
        expect(grabs.map((grab) => grab.amount).sort((a, b) => a - b)).toEqual([...amounts].sort((a, b) => a - b));
        const { rows } = await stores.sql.query<{ mode: string; min_amount: number; max_amount: number }>('SELECT mode, min_amount, max_amount FROM red_packet WHERE id = $1', [packet.id]);
        expect(rows[0]).toEqual({ mode, min_amount: minAmount, max_amount: maxAmount });
      }),
      { numRuns: 15 },
    );
  });
});
