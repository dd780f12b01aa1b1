import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { type IncomingMessage, request as httpRequest } from 'node:http';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { getIntrospectionQuery, parse, print } from 'graphql';
import { type Client, createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { budgetOf, clientAddress } from '../src/guards/clientAddress.ts';
import { MAX_SAME_NAME_FIELDS, repeatedFields } from '../src/guards/repeatedFields.ts';
import { RedPacketUpdatedDocument } from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql, subscribeSse } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { webManifest } from './support/persistedDocuments.ts';
import { waitFor } from './support/poll.ts';
import { readmeOperations } from './support/readme.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores, snapshotStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

// Every limit small and the window long, so nothing refills during the test. Each test
// calls from its own loopback address (127.0.0.x), so the per-address budgets are its own.
const env = testEnv('limits', {
  RATE_LIMIT_MUTATIONS: '20',
  RATE_LIMIT_WINDOW_MS: '60000',
  RATE_LIMIT_ANONYMOUS: '5',
  RATE_LIMIT_WS_CONNECTIONS: '3',
  RATE_LIMIT_COST: '20000',
  SUBSCRIPTIONS_PER_USER: '3',
  SUBSCRIPTIONS_PER_SOCKET: '2',
});
let server: ServerProcess;
let stores: Stores;
/** A red packet to subscribe to and grab. */
let packetId: string;

beforeAll(async () => {
  [server, stores] = await Promise.all([startServerProcess(env.vars), openStores(env)]);
  packetId = (await redPacketsAt(server.url).create('limits-sender', { totalAmount: 1000, count: 10 })).id;
});

afterAll(async () => {
  await stopAll(server);
  await stores?.cleanup();
});

/** A POST from the loopback address `from`, with extra headers. */
async function post(from: string, body: { query: string; variables?: Record<string, unknown> }, headers: Record<string, string> = {}): Promise<GraphqlResponse<Record<string, unknown>>> {
  const payload = JSON.stringify(body);
  const request = httpRequest(server.url, {
    method: 'POST',
    localAddress: from,
    headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...headers },
  });
  request.end(payload);
  const [response] = (await once(request, 'response')) as [IncomingMessage];
  let text = '';
  for await (const chunk of response) text += String(chunk);
  return { status: response.statusCode!, body: JSON.parse(text) as GraphqlResponse<Record<string, unknown>>['body'] };
}

function expectRateLimited(response: GraphqlResponse<unknown>, windowMs = 60_000) {
  expect(errorCodes(response), JSON.stringify(response.body)).toEqual(['RATE_LIMITED']);
  expect(response.body.data ?? null).toBeNull();
  const retryAfterMs = response.body.errors![0]!.extensions!.retryAfterMs as number;
  expect(retryAfterMs).toBeGreaterThan(0);
  expect(retryAfterMs).toBeLessThanOrEqual(windowMs);
}

/** graphql-ws over one socket from the loopback address `from`. */
function wsClientFrom(from: string, token?: string): Client {
  class LocalWebSocket extends WebSocket {
    constructor(url: string, protocols?: string | string[]) {
      super(url, protocols, { localAddress: from });
    }
  }
  return createClient({
    url: server.url.replace(/^http/, 'ws'),
    webSocketImpl: LocalWebSocket,
    connectionParams: token ? { authorization: `Bearer ${token}` } : {},
    retryAttempts: 0,
  });
}

/** Subscribes to the packet on `client`; resolves with the first event or the error, and the way to close it. */
function subscribeOn(client: Client): Promise<{ first: unknown; close: () => void }> {
  return new Promise((resolve) => {
    const close = client.subscribe(
      { query: print(RedPacketUpdatedDocument), variables: { packetId } },
      {
        next: (event) => resolve({ first: event, close }),
        error: (error) => resolve({ first: { errors: error }, close }),
        complete: () => undefined,
      },
    );
  });
}

const codesOf = (event: unknown) => ((event as { errors?: { extensions?: { code?: string } }[] }).errors ?? []).map((error) => error.extensions?.code);

describe('the mutation rate limit', () => {
  const grabs = (n: number, id: (i: number) => string) => `mutation { ${Array.from({ length: n }, (_, i) => `g${i}: grabRedPacket(packetId: "${id(i)}") { __typename }`).join(' ')} }`;

  it('counts root mutation fields, not operations: an operation that does not fit is refused whole and changes nothing', async () => {
    const alice = await tokenOf('limits-alice');
    // 15 aliased grabs of packets that do not exist: allowed, and 15 of the 20 units are gone.
    const first = await gql(
      server.url,
      grabs(15, (i) => `no-such-packet-${i}`),
      {},
      alice,
    );
    expect(Object.values(first.body.data ?? {})).toHaveLength(15);

    // 15 more (of a real packet) do not fit: refused, and nothing is granted.
    const before = await snapshotStores(stores, env);
    expectRateLimited(
      await gql(
        server.url,
        grabs(15, () => packetId),
        {},
        alice,
      ),
    );
    // Fragments are counted too: 2 + 4 = 6 do not fit in the 5 left.
    const spread = `mutation { ...Two ... on Mutation { c: grabRedPacket(packetId: "${packetId}") { __typename } d: grabRedPacket(packetId: "x") { __typename } e: grabRedPacket(packetId: "y") { __typename } f: grabRedPacket(packetId: "z") { __typename } } }
      fragment Two on Mutation { a: grabRedPacket(packetId: "${packetId}") { __typename } b: grabRedPacket(packetId: "w") { __typename } }`;
    expectRateLimited(await gql(server.url, spread, {}, alice));
    expect(await snapshotStores(stores, env)).toEqual(before);

    // What is left (5) is spent one mutation at a time, the refusals having taken nothing.
    expect(
      (
        await gql(
          server.url,
          grabs(1, () => packetId),
          {},
          alice,
        )
      ).body.data,
    ).toEqual({ g0: { __typename: 'GrabbedShare' } });
    expect(
      Object.values(
        (
          await gql(
            server.url,
            grabs(4, (i) => `again-${i}`),
            {},
            alice,
          )
        ).body.data ?? {},
      ),
    ).toHaveLength(4);
    expectRateLimited(
      await gql(
        server.url,
        grabs(1, () => 'one-more'),
        {},
        alice,
      ),
    );

    // An operator is not counted: 25 credits in a row, past the 20 of a window.
    const operator = await tokenOf('limits-operator-credits', { admin: true });
    for (let i = 0; i < 25; i += 1) {
      const credit = await gql(
        server.url,
        'mutation ($r: String!) { creditWallet(userId: "limits-credited", amountCents: 1, reason: "limits", requestId: $r) }',
        { r: `limits-credit-${i}` },
        operator,
      );
      expect(credit.body.errors, JSON.stringify(credit.body)).toBeUndefined();
    }

    // Another user has a budget of their own.
    expect(
      (
        await gql(
          server.url,
          grabs(15, (i) => `bob-${i}`),
          {},
          await tokenOf('limits-bob'),
        )
      ).body.errors,
    ).toBeUndefined();
  });
});

describe('per client address', () => {
  it('limits operations without a valid token, and never trusts X-Forwarded-For by default', async () => {
    const from = '127.0.0.2';
    for (let i = 0; i < 5; i++) expect((await post(from, { query: '{ __typename }' })).body.data).toEqual({ __typename: 'Query' });
    expectRateLimited(await post(from, { query: '{ __typename }' }));
    // An invalid token is no token; a forged X-Forwarded-For changes nothing without TRUST_PROXY.
    expectRateLimited(await post(from, { query: '{ __typename }' }, { authorization: 'Bearer not.a.token' }));
    expectRateLimited(await post(from, { query: '{ __typename }' }, { 'x-forwarded-for': '203.0.113.9' }));
    // Signed-in users are not counted by address, and another address has its own budget.
    const signedIn = await post(from, { query: '{ me { userId } }' }, { authorization: `Bearer ${await tokenOf('limits-reader')}` });
    expect(signedIn.body.data).toEqual({ me: { userId: 'limits-reader' } });
    expect((await post('127.0.0.6', { query: '{ __typename }' })).body.data).toEqual({ __typename: 'Query' });
  });

  it('limits new WebSocket connections: HTTP 429 with Retry-After and a RATE_LIMITED body', async () => {
    const from = '127.0.0.3';
    const connect = () =>
      new Promise<WebSocket | IncomingMessage>((resolve, reject) => {
        const socket = new WebSocket(server.url.replace(/^http/, 'ws'), 'graphql-transport-ws', { localAddress: from });
        socket.once('open', () => resolve(socket));
        socket.once('unexpected-response', (_request, response) => resolve(response));
        socket.once('error', reject);
      });
    const open: WebSocket[] = [];
    try {
      for (let i = 0; i < 3; i++) {
        const socket = await connect();
        expect(socket).toBeInstanceOf(WebSocket);
        open.push(socket as WebSocket);
      }
      const refused = (await connect()) as IncomingMessage;
      expect(refused.statusCode).toBe(429);
      expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      let body = '';
      for await (const chunk of refused) body += String(chunk);
      const error = JSON.parse(body).errors[0];
      expect(error.extensions.code).toBe('RATE_LIMITED');
      expect(error.extensions.retryAfterMs).toBeGreaterThan(0);
    } finally {
      for (const socket of open) socket.close();
    }
  });

  it('is the socket peer, or behind TRUST_PROXY proxies the entry the outermost one wrote', () => {
    const req = (remoteAddress: string, forwarded?: string) => ({ socket: { remoteAddress }, headers: forwarded ? { 'x-forwarded-for': forwarded } : {} }) as never;
    expect(clientAddress(req('::ffff:10.0.0.5'), 0)).toBe('10.0.0.5');
    expect(clientAddress(req('10.0.0.5', '1.1.1.1, 2.2.2.2'), 0)).toBe('10.0.0.5');
    expect(clientAddress(req('10.0.0.5', '1.1.1.1, 2.2.2.2'), 1)).toBe('2.2.2.2');
    expect(clientAddress(req('10.0.0.5', '1.1.1.1, 2.2.2.2'), 2)).toBe('1.1.1.1');
    expect(clientAddress(req('10.0.0.5', '1.1.1.1'), 5)).toBe('1.1.1.1');
    expect(clientAddress(req('10.0.0.5'), 1)).toBe('10.0.0.5');
    // An entry that is no address is no proxy's: the peer it came from counts.
    expect(clientAddress(req('10.0.0.5', 'x'.repeat(8000)), 1)).toBe('10.0.0.5');
    expect(clientAddress(req('10.0.0.5', '1.1.1.1, not-an-address'), 1)).toBe('10.0.0.5');
    expect(clientAddress(req('::ffff:10.0.0.5', '2001:db8::1'), 1)).toBe('2001:db8::1');
  });

  it('is counted alone for IPv4, and by the /64 it lies in for IPv6, from which a client may send from any address', () => {
    expect(budgetOf('10.0.0.5')).toBe('10.0.0.5');
    expect(budgetOf('2001:db8:1:2:3:4:5:6')).toBe('2001:db8:1:2::/64');
    expect(budgetOf('2001:db8:1:2::9')).toBe('2001:db8:1:2::/64');
    expect(budgetOf('2001:0db8:0001:0003::1')).toBe('2001:db8:1:3::/64');
    expect(budgetOf('::1')).toBe('0:0:0:0::/64');
  });
});

describe('graphql-ws frames', () => {
  /** The close code the server answers `frame` with, or 0 when it acknowledges the connection. */
  function closeCodeFor(from: string, frame: string): Promise<number> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(server.url.replace(/^http/, 'ws'), 'graphql-transport-ws', { localAddress: from });
      socket.once('open', () => socket.send(frame));
      socket.on('message', (data) => {
        if (JSON.parse(String(data)).type === 'connection_ack') {
          socket.close();
          resolve(0);
        }
      });
      socket.once('close', (code) => resolve(code));
      socket.once('error', reject);
    });
  }

  it('closes a socket whose frame is larger than 64 KiB (1009) before graphql-ws keeps any of it', async () => {
    const init = (bytes: number) => JSON.stringify({ type: 'connection_init', payload: { padding: 'x'.repeat(bytes) } });
    expect(await closeCodeFor('127.0.0.7', init(1024 * 1024))).toBe(1009);
    expect(await closeCodeFor('127.0.0.7', init(60 * 1024))).toBe(0);
  });
});

describe('live subscriptions', () => {
  it('at most SUBSCRIPTIONS_PER_SOCKET on one graphql-ws connection; a completed one frees its slot', async () => {
    const client = wsClientFrom('127.0.0.4', await tokenOf('limits-socket-user'));
    try {
      const [a, b] = await Promise.all([subscribeOn(client), subscribeOn(client)]);
      expect(codesOf(a.first)).toEqual([]);
      expect(codesOf(b.first)).toEqual([]);
      const third = await subscribeOn(client);
      expect(codesOf(third.first)).toEqual(['RATE_LIMITED']);
      a.close();
      // The slot is free at once: no event on the packet is needed for the close to count.
      const again = await waitFor(
        'a free slot',
        async () => {
          const attempt = await subscribeOn(client);
          return codesOf(attempt.first).length === 0 && attempt;
        },
        { timeoutMs: 5000 },
      );
      again.close();
      b.close();
    } finally {
      await client.dispose();
    }
  });

  it('at most SUBSCRIPTIONS_PER_USER over SSE and graphql-ws together; a closed one frees its slot', async () => {
    const token = await tokenOf('limits-watcher');
    const sse = Array.from({ length: 3 }, () => subscribeSse(server.url, RedPacketUpdatedDocument, { packetId }, token));
    const clients: Client[] = [];
    try {
      for (const subscription of sse) expect((await subscription.until((events) => events.length > 0))[0]!.errors).toBeUndefined();
      clients.push(wsClientFrom('127.0.0.5', token));
      expect(codesOf((await subscribeOn(clients[0]!)).first)).toEqual(['RATE_LIMITED']);
      const fourth = subscribeSse(server.url, RedPacketUpdatedDocument, { packetId }, token);
      expect(codesOf((await fourth.until((events) => events.length > 0))[0])).toEqual(['RATE_LIMITED']);
      fourth.close();
      // Another user is not affected.
      clients.push(wsClientFrom('127.0.0.5', await tokenOf('limits-other-watcher')));
      expect(codesOf((await subscribeOn(clients[1]!)).first)).toEqual([]);

      sse[0]!.close();
      await waitFor('a free slot after an SSE disconnect', async () => codesOf((await subscribeOn(clients[0]!)).first).length === 0, { timeoutMs: 5000 });
    } finally {
      for (const subscription of sse) subscription.close();
      await Promise.all(clients.map((client) => client.dispose()));
    }
  });
});

describe('repeated fields', () => {
  // graphql-js compares every pair of fields of one response name while validating: 440 `me`s
  // took 130 ms of CPU each. The check refuses them before validation, as armor refuses too many aliases.
  // The comment at the end makes each document new to the parse and validation caches.
  const repeated = (n: number, selection: string) => `{ ${Array.from({ length: n }, () => selection).join(' ')} } #${randomUUID()}`;

  it('refuses a field selected over MAX_SAME_NAME_FIELDS times, however it is spread, as armor refuses too many aliases', async () => {
    const from = '127.0.0.40';
    const strict = { accept: 'application/graphql-response+json' };
    const tooManyAliases = { query: `{ ${Array.from({ length: 16 }, (_, i) => `a${i}: me { userId }`).join(' ')} }` };
    const [aliases, strictAliases] = [await post(from, tooManyAliases), await post(from, tooManyAliases, strict)];
    expect(aliases.body.errors![0]!.message).toMatch(/Aliases limit/);
    const fragments = Array.from({ length: 12 }, (_, i) => `fragment F${i} on Query { me { userId } }`).join(' ');
    const documents = {
      me: repeated(440, 'me { userId }'),
      inline: repeated(200, '... on Query { me { userId } }'),
      named: `${fragments} ${repeated(1, Array.from({ length: 12 }, (_, i) => `...F${i}`).join(' '))}`,
      // The sub-selections of fields of one name are compared pairwise too: 20 × 20 `me.userId`.
      nested: repeated(20, `me { ${'userId '.repeat(20)}}`),
    };
    for (const [kind, query] of Object.entries(documents)) {
      const refused = await post(from, { query });
      expect(refused.status, kind).toBe(aliases.status);
      expect((await post(from, { query }, strict)).status, kind).toBe(strictAliases.status);
      expect(refused.body.data ?? null, kind).toBeNull();
      expect(errorCodes(refused), kind).toEqual(['BAD_USER_INPUT']);
      expect(refused.body.errors![0]!.message, kind).toMatch(
        new RegExp(`^Field "me(\\.userId)?" is selected \\d+ times in one selection set, at most ${MAX_SAME_NAME_FIELDS}.*select it once`),
      );
    }
    // At the limit, and a named fragment spread many times (counted once), the operation runs.
    const token = await tokenOf('limits-repeater');
    const atLimit = await gql(server.url, repeated(MAX_SAME_NAME_FIELDS, 'me { userId }'), {}, token);
    expect(atLimit.body).toEqual({ data: { me: { userId: 'limits-repeater' } } });
    const spreads = await gql(server.url, `fragment Me on Query { me { userId } } ${repeated(30, '...Me')}`, {}, token);
    expect(spreads.body).toEqual({ data: { me: { userId: 'limits-repeater' } } });
  });

  it("lets GraphiQL's introspection, the web app's documents and the README's operations through", async () => {
    const introspection = await gql(
      server.url,
      getIntrospectionQuery({ descriptions: true, specifiedByUrl: true, directiveIsRepeatable: true, schemaDescription: true, inputValueDeprecation: true }),
      {},
      await tokenOf('limits-graphiql'),
    );
    expect(introspection.body.errors).toBeUndefined();
    expect(introspection.body.data).toHaveProperty('__schema');
    const documents = [...Object.values(webManifest()), ...readmeOperations().map((operation) => operation.text)];
    expect(documents.length).toBeGreaterThan(10);
    for (const document of documents) expect(repeatedFields(parse(document)), document).toBeUndefined();
  });
});

describe('the cost limit', () => {
  const teamsPage = (limit: string) => `teams(activityId: "limits", limit: ${limit}) { id status members { userId joinedAt } locks { userId expiresAt } freeSeats version }`;

  it('multiplies the selection under a limit argument, given inline, as a variable or by default', async () => {
    const token = await tokenOf('limits-browser');
    const pages = (limit: string) => Array.from({ length: 5 }, (_, i) => `p${i}: ${teamsPage(limit)}`).join(' ');
    // 5 × (1 + 200 × 10) is just over 10,000; 5 × (1 + 20 × 10) is far below.
    const inline = await gql(server.url, `{ ${pages('200')} }`, {}, token);
    expect(errorCodes(inline), JSON.stringify(inline.body)).toEqual(['BAD_USER_INPUT']);
    expect(inline.body.errors![0]!.extensions).toMatchObject({ cost: 10_005, maxCost: 10_000 });
    const viaVariables = `query ($n: Int) { ${pages('$n')} }`;
    expect(errorCodes(await gql(server.url, viaVariables, { n: 200 }, token))).toEqual(['BAD_USER_INPUT']);
    expect((await gql(server.url, viaVariables, { n: 20 }, token)).body).toEqual({ data: { p0: [], p1: [], p2: [], p3: [], p4: [] } });
    // Left out, the limit is its default (50): 12 × (1 + 50 × 18) = 10,812.
    const wide = `{ ${Array.from({ length: 12 }, (_, i) => `t${i}: teams(activityId: "limits") { id status capacity leaderId activityId deadline serverTime version freeSeats lockSeconds nextUnlockAt members { userId joinedAt } locks { userId lockedAt expiresAt } }`).join(' ')} }`;
    expect(errorCodes(await gql(server.url, wide, {}, token))).toEqual(['BAD_USER_INPUT']);
    expect((await gql(server.url, wide.replace(/t1[01]: teams\(activityId: "limits"\) \{[\s\S]*?locks \{[^}]*\} \}/g, ''), {}, token)).body.errors).toBeUndefined();
  });

  it('counts a connection page by first or last alike, and by the default page size when neither is given', async () => {
    const token = await tokenOf('limits-pager');
    const nested = (bounds: string) => `{ me { redPacketsSent${bounds} { nodes { sharesConnection${bounds} { nodes { userId amount grabbedAt packetId } } } } } }`;
    // 1 + (1 + 100 × (1 + (1 + 100 × (1 + 4)))): me, the outer page, its nodes, the inner page.
    for (const bound of ['first', 'last']) {
      const refused = await gql(server.url, nested(`(${bound}: 100)`), {}, token);
      expect(errorCodes(refused), bound).toEqual(['BAD_USER_INPUT']);
      expect(refused.body.errors![0]!.extensions).toMatchObject({ cost: 50_202, maxCost: 10_000 });
    }
    // Pages of the default 20: 1 + (1 + 20 × (1 + (1 + 20 × 5))) = 2,042, let through.
    expect((await gql(server.url, nested(''), {}, token)).body).toEqual({ data: { me: { redPacketsSent: { nodes: [] } } } });
  });

  it('counts a whole share list as 1,000 shares of every field: two fit, in a query or a subscription; three, or a page of them, do not', async () => {
    const token = await tokenOf('limits-shares');
    const shares = (alias: string) => `${alias}: redPacket(id: "${packetId}") { id shares { userId amount grabbedAt packetId } }`;
    // 1 + 1 + (1 + 1,000 × 4) = 4,003 each, and as much with one field picked.
    expect((await gql(server.url, `{ ${shares('a')} ${shares('b')} }`, {}, token)).body.errors).toBeUndefined();
    const three = await gql(server.url, `{ ${shares('a')} ${shares('b')} ${shares('c')} }`, {}, token);
    expect(errorCodes(three)).toEqual(['BAD_USER_INPUT']);
    expect(three.body.errors![0]!.extensions).toMatchObject({ cost: 12_009, maxCost: 10_000 });
    const narrow = (alias: string) => `${alias}: redPacket(id: "${packetId}") { id shares { amount } }`;
    expect(errorCodes(await gql(server.url, `{ ${narrow('a')} ${narrow('b')} ${narrow('c')} }`, {}, token))).toEqual(['BAD_USER_INPUT']);
    const everyPacket = await gql(server.url, '{ me { redPacketsSent { nodes { shares { amount } } } } }', {}, token);
    expect(errorCodes(everyPacket)).toEqual(['BAD_USER_INPUT']);
    const document = parse(`subscription { redPacketUpdated(packetId: "${packetId}") { remainingCount shares { userId amount } } }`) as TypedDocumentNode<unknown, Record<string, never>>;
    const live = subscribeSse(server.url, document, {}, token);
    const [first] = await live.until((events) => events.length > 0);
    live.close();
    expect(first?.errors).toBeUndefined();
  });

  it("takes a costly operation's cost from its caller's budget, a user's or an anonymous address's; cheap ones and operators' are not counted", async () => {
    const shares = (alias: string) => `${alias}: redPacket(id: "${packetId}") { id shares { userId amount grabbedAt packetId } }`;
    const twoLists = `{ ${shares('a')} ${shares('b')} }`; // 8,006 of the budget's 20,000
    const [user, neighbour, operator] = await Promise.all([tokenOf('limits-costly'), tokenOf('limits-costly-neighbour'), tokenOf('limits-costly-operator', { admin: true })]);
    for (let i = 0; i < 2; i += 1) expect((await gql(server.url, twoLists, {}, user)).body.errors).toBeUndefined();
    const refused = await gql(server.url, twoLists, {}, user);
    expectRateLimited(refused);
    expect(refused.body.errors![0]!.message).toMatch(/costs 8006/);
    // A cheap read of the same user, and the same costly read of another user or of an operator, go through.
    expect((await gql(server.url, `{ redPacket(id: "${packetId}") { id remainingCount } }`, {}, user)).body.errors).toBeUndefined();
    expect((await gql(server.url, twoLists, {}, neighbour)).body.errors).toBeUndefined();
    for (let i = 0; i < 4; i += 1) expect((await gql(server.url, twoLists, {}, operator)).body.errors).toBeUndefined();
    // Without a token, the address's budget (the third read is also within RATE_LIMIT_ANONYMOUS): counted before the fields refuse it.
    for (let i = 0; i < 2; i += 1) expect(errorCodes(await post('127.0.0.31', { query: twoLists }))).toEqual(['UNAUTHENTICATED', 'UNAUTHENTICATED']);
    expectRateLimited(await post('127.0.0.31', { query: twoLists }));
  });

  it('lets the largest legitimate page through', async () => {
    const admin = await tokenOf('limits-operator', { admin: true });
    const page = await gql(
      server.url,
      '{ goodsRedemptions(goodsId: "none", limit: 500) { id goodsId userId requestId status pointsSpent voucherCode createdAt deliveredAt deliveryAttempts } }',
      {},
      admin,
    );
    expect(page.body).toEqual({ data: { goodsRedemptions: [] } });
  });
});
