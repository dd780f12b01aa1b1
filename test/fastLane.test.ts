import { once } from 'node:events';
import { connect } from 'node:net';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { regularMediaType } from '../src/fastLane.ts';
import { testEnv } from './support/env.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

// Both servers are instances of one deployment (same schema and key prefix); only the lane differs.
const env = testEnv('fast_lane', { RATE_LIMIT_MUTATIONS: '4', RATE_LIMIT_WINDOW_MS: '60000', CORS_ORIGINS: 'https://shop.example' });
let fastLane: ServerProcess;
let yogaOnly: ServerProcess;
let stores: Stores;

beforeAll(async () => {
  stores = openStores(env);
  fastLane = await startServerProcess(env.vars);
  yogaOnly = await startServerProcess({ ...env.vars, GRAPHQL_FAST_LANE: '0' });
});

afterAll(async () => {
  await Promise.all([fastLane?.stop(), yogaOnly?.stop()]);
  await stores?.cleanup();
});

interface RawRequest {
  method?: string;
  /** Appended to the GraphQL endpoint's URL. */
  search?: string;
  headers?: Record<string, string>;
  body?: string;
}

/**
 * What a client can see of a response; header names are case-insensitive and Date/Keep-Alive
 * vary. Both lanes are sent one X-Request-Id, so the one they echo compares too.
 */
async function answer(server: ServerProcess, request: RawRequest) {
  const method = request.method ?? 'POST';
  const headers = { 'x-request-id': 'fast-lane-comparison', ...request.headers };
  const response = await fetch(`${server.url}${request.search ?? ''}`, {
    method,
    headers: method === 'POST' ? { 'content-type': 'application/json', ...headers } : headers,
    body: request.body,
  });
  const seen = Object.fromEntries([...response.headers].filter(([name]) => !['date', 'connection', 'keep-alive'].includes(name.toLowerCase())));
  return { status: response.status, headers: seen, body: await response.text() };
}

async function expectSameAnswer(request: RawRequest) {
  const [fast, yoga] = [await answer(fastLane, request), await answer(yogaOnly, request)];
  expect(fast).toEqual(yoga);
  return fast;
}

const json = (value: unknown) => JSON.stringify(value);
const typename = json({ query: '{ __typename }' });
const unknownGrab = json({ query: 'mutation { grabRedPacket(packetId: "no-such-packet") { __typename } }' });

describe('the fast lane answers exactly as Yoga does', () => {
  it.each([
    ['no Accept header', undefined],
    ['*/*', '*/*'],
    ['application/json', 'application/json'],
    ['application/graphql-response+json', 'application/graphql-response+json'],
    ['the GraphQL-over-HTTP recommendation', 'application/graphql-response+json, application/json;q=0.9'],
    ['axios', 'application/json, text/plain, */*'],
    ['event stream first', 'text/event-stream, application/json'],
    ['only an event stream', 'text/event-stream'],
    ['a charset Yoga does not serve', 'application/json; charset=latin1'],
    ['a parameter that only looks like a charset', 'application/json;xcharset=latin1'],
  ])('for a query, Accept: %s', async (_name, accept) => {
    await expectSameAnswer({ headers: accept ? { accept } : {}, body: typename });
  });

  it.each([
    'application/json; charset=utf-8',
    'application/json;charset=latin1',
    'application/json, text/plain',
    'Application/JSON',
    'application/json ;charset=utf-8',
    'application/graphql+json',
    'text/plain',
  ])('for a query sent as Content-Type: %s', async (contentType) => {
    await expectSameAnswer({ headers: { 'content-type': contentType }, body: typename });
  });

  it('with CORS headers for an origin in CORS_ORIGINS', async () => {
    const { headers } = await expectSameAnswer({ headers: { origin: 'https://shop.example' }, body: typename });
    expect(headers['access-control-allow-origin']).toBe('https://shop.example');
    expect(headers['access-control-allow-credentials']).toBe('true');
    expect(headers['access-control-expose-headers']).toBe('Retry-After, X-Request-Id');
    expect(headers.vary).toBe('Origin');
  });

  it.each(['https://evil.example', 'http://localhost:5173', 'null'])('without CORS headers for an origin not listed: %s', async (origin) => {
    const { headers } = await expectSameAnswer({ headers: { origin }, body: typename });
    expect(Object.keys(headers).filter((name) => name.startsWith('access-control-'))).toEqual([]);
  });

  it.each(['https://shop.example', 'https://evil.example'])('to a CORS preflight from %s', async (origin) => {
    const preflight = { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } };
    const { status, headers } = await expectSameAnswer(preflight);
    expect(status).toBe(204);
    expect(headers['access-control-allow-origin'] ?? null).toBe(origin === 'https://shop.example' ? origin : null);
  });

  it.each([
    ['a syntax error', json({ query: '{' })],
    ['an empty query', json({ query: '' })],
    ['an unknown field', json({ query: '{ nope }' })],
    ['an unknown operationName', json({ query: 'query A { __typename }', operationName: 'B' })],
    ['two operations and no operationName', json({ query: 'query A { __typename } query B { __typename }' })],
    ['a subscription over a plain POST', json({ query: 'subscription { redPacketUpdated(packetId: "x") { id } }' })],
    ['an unexpected parameter', json({ query: '{ __typename }', extra: 1 })],
    ['variables that are not an object', json({ query: '{ __typename }', variables: [1] })],
    ['a batch', json([{ query: '{ __typename }' }])],
    ['JSON null', 'null'],
    ['malformed JSON', '{"query": '],
    ['an empty body', ''],
    ['a document over the token limit', json({ query: `{ ${'__typename '.repeat(3000)}}` })],
  ])('for %s', async (_name, body) => {
    for (const accept of ['application/json', 'application/graphql-response+json']) {
      await expectSameAnswer({ headers: { accept }, body });
    }
  });

  // A well-formed request the operation cannot run: 200 under application/json, 400 under
  // application/graphql-response+json, as the GraphQL over HTTP spec wants.
  it.each([
    ['application/json', 200],
    ['application/graphql-response+json', 400],
  ] as const)('for variables of the wrong type, missing, or an operation it cannot pick, Accept: %s', async (accept, status) => {
    const redPacket = 'query ($id: ID!) { redPacket(id: $id) { id } }';
    for (const request of [
      { query: redPacket, variables: { id: { not: 'an id' } } },
      { query: redPacket, variables: { id: null } },
      { query: redPacket },
      { query: '{ __typename }', operationName: 'NoSuchOperation' },
      { query: 'query A { __typename } query B { __typename }' },
    ]) {
      const search = `?${new URLSearchParams(Object.entries(request).map(([name, value]) => [name, typeof value === 'string' ? value : json(value)]))}`;
      for (const sent of <RawRequest[]>[
        { headers: { accept }, body: json(request) },
        { method: 'GET', search, headers: { accept, 'x-graphql-yoga-csrf': '1' } },
      ]) {
        const answer = await expectSameAnswer(sent);
        expect(answer.status, `${sent.method ?? 'POST'} ${JSON.stringify(request)}`).toBe(status);
        expect(JSON.parse(answer.body).errors[0].extensions.code).toBe('BAD_USER_INPUT');
      }
    }
  });

  it.each([
    ['application/json', 200],
    ['application/graphql-response+json', 400],
  ] as const)('for a variable a custom scalar refuses with its own code, Accept: %s', async (accept, status) => {
    const input = { title: 'kite', pointsCost: 1, stock: 1, saleStartsAt: 'tomorrow at ten' };
    const body = json({ query: 'mutation ($input: CreateGoodsInput!) { createGoods(input: $input) { id } }', variables: { input } });
    const answer = await expectSameAnswer({ headers: { accept, authorization: `Bearer ${await tokenOf('fast-lane-operator', { admin: true })}` }, body });
    expect(answer.status).toBe(status);
    expect(JSON.parse(answer.body).errors[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  it('for a mutation without a token, and for a non-admin calling an operator mutation', async () => {
    const unauthenticated = await expectSameAnswer({ body: unknownGrab });
    expect(JSON.parse(unauthenticated.body).errors[0].extensions.code).toBe('UNAUTHENTICATED');
    const award = json({ query: 'mutation { awardPoints(userId: "u", amount: 5, reason: "r", requestId: "fast-lane-award") }' });
    const forbidden = await expectSameAnswer({ headers: { authorization: `Bearer ${await tokenOf('fast-lane-shopper')}` }, body: award });
    expect(JSON.parse(forbidden.body).errors[0].extensions.code).toBe('FORBIDDEN');
  });

  it('for a signed-in mutation with a typed problem, and for an invalid token', async () => {
    const granted = await expectSameAnswer({ headers: { authorization: `Bearer ${await tokenOf('fast-lane-grabber')}` }, body: unknownGrab });
    expect(JSON.parse(granted.body).data.grabRedPacket.__typename).toBe('NotFound');
    const invalid = await expectSameAnswer({ headers: { authorization: 'Bearer not.a.token' }, body: unknownGrab });
    expect(JSON.parse(invalid.body).errors[0].extensions).toEqual({ code: 'UNAUTHENTICATED', reason: 'MALFORMED' });
    // A refused token refuses a public query too, whatever media type is asked for: with no
    // data, 401 under application/graphql-response+json (the spec wants 4xx), 200 under application/json.
    for (const [accept, status] of [
      ['application/json', 200],
      ['application/graphql-response+json', 401],
    ] as const) {
      const refused = await expectSameAnswer({ headers: { accept, authorization: 'Basic Zm9vOmJhcg==' }, body: typename });
      expect(refused.status, accept).toBe(status);
      expect(JSON.parse(refused.body).errors[0].extensions).toEqual({ code: 'UNAUTHENTICATED', reason: 'MALFORMED' });
    }
  });

  it.each([
    ['a form', { 'content-type': 'application/x-www-form-urlencoded' }, 'query=%7B__typename%7D'],
    ['a form with the CSRF header', { 'content-type': 'application/x-www-form-urlencoded', 'x-graphql-yoga-csrf': '1' }, 'query=%7B__typename%7D'],
    ['a multipart body', { 'content-type': 'multipart/form-data; boundary=x' }, '--x\r\nContent-Disposition: form-data; name="operations"\r\n\r\n{"query":"{ __typename }"}\r\n--x--\r\n'],
  ])('by refusing %s with 415', async (_name, headers, body) => {
    const { status, body: text } = await expectSameAnswer({ headers, body });
    expect(status).toBe(415);
    expect(JSON.parse(text).errors[0]).toMatchObject({ message: expect.stringMatching(/application\/json/), extensions: { code: 'BAD_REQUEST' } });
  });

  it('by refusing a text/plain POST without the CSRF header (CSRF prevention)', async () => {
    const { status, body } = await expectSameAnswer({ headers: { 'content-type': 'text/plain' }, body: typename });
    expect(status).toBe(403);
    expect(body).toMatch(/CSRF/);
    expect((await expectSameAnswer({ headers: { 'content-type': 'text/plain', 'x-graphql-yoga-csrf': '1' }, body: typename })).status).not.toBe(403);
  });

  it('to GETs: refused without the CSRF header, served with it, and to EventSource (Accept: text/event-stream) without it', async () => {
    const search = `?query=${encodeURIComponent('{ __typename }')}`;
    expect((await expectSameAnswer({ method: 'GET', search })).status).toBe(403);
    const withHeader = await expectSameAnswer({ method: 'GET', search, headers: { 'x-graphql-yoga-csrf': '1' } });
    expect(JSON.parse(withHeader.body)).toEqual({ data: { __typename: 'Query' } });
    const eventSource = await expectSameAnswer({ method: 'GET', search, headers: { accept: 'text/event-stream', origin: 'https://shop.example' } });
    expect(eventSource.status).toBe(200);
    expect(eventSource.body).toContain('"__typename":"Query"');
    // The GraphiQL page itself is a plain browser GET.
    expect((await expectSameAnswer({ method: 'GET', headers: { accept: 'text/html' } })).status).toBe(200);
  });

  it('for a rate-limited caller, whichever instance counted the earlier requests', async () => {
    const authorization = `Bearer ${await tokenOf('fast-lane-hasty')}`;
    for (let i = 0; i < 4; i++) await answer(i % 2 ? yogaOnly : fastLane, { headers: { authorization }, body: unknownGrab });
    // Only the time left in the window may differ between the two answers.
    const withoutRetryAfter = ({ headers: { 'retry-after': retryAfter, ...headers }, ...reply }: Awaited<ReturnType<typeof answer>>) => {
      expect(Number(retryAfter)).toBeGreaterThan(0);
      return { ...reply, headers, body: reply.body.replace(/"retryAfterMs":\d+/, '') };
    };
    const [fast, yoga] = [await answer(fastLane, { headers: { authorization }, body: unknownGrab }), await answer(yogaOnly, { headers: { authorization }, body: unknownGrab })];
    expect(withoutRetryAfter(fast)).toEqual(withoutRetryAfter(yoga));
    expect(JSON.parse(fast.body).errors[0].extensions.code).toBe('RATE_LIMITED');
    expect(fast.status).toBe(200);
    // 429 for a client asking for application/graphql-response+json.
    const accept = 'application/graphql-response+json';
    const [fast429, yoga429] = [
      await answer(fastLane, { headers: { authorization, accept }, body: unknownGrab }),
      await answer(yogaOnly, { headers: { authorization, accept }, body: unknownGrab }),
    ];
    expect(withoutRetryAfter(fast429)).toEqual(withoutRetryAfter(yoga429));
    expect(fast429.status).toBe(429);
  });
});

describe('a client that hangs up halfway through its request', () => {
  it('is not logged as an error, and the server goes on serving', async () => {
    const socket = connect(fastLane.port, '127.0.0.1');
    await once(socket, 'connect');
    socket.write(`POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"query":`);
    await new Promise((resolve) => setTimeout(resolve, 100));
    socket.destroy();
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await answer(fastLane, { body: typename })).status).toBe(200);
    expect(fastLane.output()).not.toMatch(/"level":50/);
  });
});

describe('the media type the fast lane answers with', () => {
  it.each([
    [undefined, 'application/json'],
    ['*/*', 'application/json'],
    ['application/*', 'application/json'],
    ['application/graphql-response+json, application/json', 'application/graphql-response+json'],
    ['application/json, application/graphql-response+json', 'application/json'],
    ['text/event-stream', null],
    ['multipart/mixed', null],
    ['application/json; charset=latin1', null],
  ])('Accept: %s gives %s', (accept, expected) => {
    expect(regularMediaType(accept)).toBe(expected);
  });
});
