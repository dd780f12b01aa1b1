import { type DocumentNode, parse, print } from 'graphql';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedPacketUpdatedDocument } from './gql/generated.ts';
import { subscribeSse, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

// One deployment (schema, key prefix) served in three NODE_ENVs, and with errors exposed on purpose.
// One live subscription per user: a subscription refused must give its place back.
const env = testEnv('http_hygiene', { SUBSCRIPTIONS_PER_USER: '1' });
const servers = {} as Record<'test' | 'development' | 'exposed' | 'production' | 'listed', ServerProcess>;
let stores: Stores;

beforeAll(async () => {
  stores = openStores(env);
  servers.test = await startServerProcess(env.vars);
  const [development, exposed, production, listed] = await Promise.all([
    startServerProcess({ ...env.vars, NODE_ENV: 'development' }),
    startServerProcess({ ...env.vars, NODE_ENV: 'development', GRAPHQL_EXPOSE_ERRORS: '1' }),
    startServerProcess({ ...env.vars, NODE_ENV: 'production' }),
    startServerProcess({ ...env.vars, NODE_ENV: 'production', CORS_ORIGINS: 'https://shop.example, https://admin.shop.example' }),
  ]);
  Object.assign(servers, { development, exposed, production, listed });
}, 90_000);

afterAll(async () => {
  await Promise.all(Object.values(servers).map((server) => server.stop()));
  await stores?.cleanup();
});

interface Answer {
  status: number;
  headers: Headers;
  body: { data?: unknown; errors?: { message: string; extensions?: Record<string, unknown> }[] };
}

/** The first answer to an operation sent over graphql-ws. */
async function overWs(server: ServerProcess, { query, variables }: { query: string; variables?: Record<string, unknown> }) {
  const operation = subscribeWs(server.url, parse(query) as DocumentNode & { __apiType?: never }, variables ?? {});
  try {
    return (await operation.until((events) => events.length > 0))[0]!;
  } finally {
    operation.close();
  }
}

async function post(server: ServerProcess, body: unknown, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: response.status, headers: response.headers as unknown as Headers, body: (await response.json()) as Answer['body'] };
}

describe('a body that is not JSON', () => {
  it('is BAD_REQUEST without the message of the JSON parser, which echoes the body, unless GRAPHQL_EXPOSE_ERRORS=1', async () => {
    const send = (server: ServerProcess) => fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query": "{ secret-body' });
    const masked = await send(servers.development);
    expect(masked.status).toBe(400);
    expect(await masked.json()).toEqual({ errors: [{ message: 'POST body sent invalid JSON.', extensions: { code: 'BAD_REQUEST' } }] });
    const exposed = (await (await send(servers.exposed)).json()) as Answer['body'];
    expect(exposed.errors![0]!.extensions).toMatchObject({ originalError: { message: expect.stringContaining('secret-body') } });
  });
});

describe('a GET whose variables or extensions are not a JSON object', () => {
  it('is BAD_REQUEST naming the parameter, not an unexpected error', async () => {
    const token = await tokenOf('hygiene-getter');
    for (const [name, value] of [
      ['variables', '{x'],
      ['variables', '[1]'],
      ['variables', '"text"'],
      ['extensions', '{"persistedQuery":'],
    ]) {
      const url = `${servers.test.url}?query=${encodeURIComponent('{ __typename }')}&${name}=${encodeURIComponent(value!)}`;
      const response = await fetch(url, { headers: { accept: 'application/json', authorization: `Bearer ${token}` } });
      expect(response.status, `${name}=${value}`).toBe(400);
      expect(await response.json()).toEqual({ errors: [{ message: `the ${name} parameter must be a JSON object`, extensions: { code: 'BAD_REQUEST' } }] });
    }
    // Well-formed, or null, they are served.
    for (const query of ['variables=%7B%7D', 'variables=null', 'variables=', 'extensions=%7B%7D']) {
      const response = await fetch(`${servers.test.url}?query=${encodeURIComponent('{ __typename }')}&${query}`, {
        headers: { accept: 'application/json', authorization: `Bearer ${token}` },
      });
      expect(response.status, query).toBe(200);
    }
  });
});

describe('requests the endpoint cannot serve', () => {
  const awards = async (requestId: string) => (await stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM points_ledger WHERE request_id = $1', [requestId])).rows[0]!.n;
  const award = (requestId: string, extra: Record<string, unknown> = {}) =>
    JSON.stringify({ query: `mutation { awardPoints(userId: "hygiene-awardee", amount: 5, reason: "r", requestId: "${requestId}") }`, ...extra });

  /** The refusal's status, and its body: one BAD_REQUEST error saying what to send. */
  async function refusedWith(response: Awaited<ReturnType<typeof fetch>>, status: number, what: RegExp) {
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toMatch(/^application\/json/);
    const { errors } = (await response.json()) as Answer['body'];
    expect(errors).toEqual([{ message: expect.stringMatching(what), extensions: { code: 'BAD_REQUEST' } }]);
  }

  it('refuses a body it has no parser for with 415, a code and what to send, running nothing', async () => {
    const authorization = `Bearer ${await tokenOf('hygiene-awarder', { admin: true })}`;
    for (const contentType of ['text/plain', 'application/xml', undefined]) {
      const requestId = `hygiene-415-${contentType ?? 'none'}`;
      const headers = { authorization, ...(contentType ? { 'content-type': contentType } : {}) };
      // Sent as a string, undici would add text/plain itself.
      const body = contentType ? award(requestId) : new TextEncoder().encode(award(requestId));
      await refusedWith(await fetch(servers.test.url, { method: 'POST', headers, body }), 415, /POST the GraphQL request as application\/json/);
      expect(await awards(requestId)).toBe(0);
    }
  });

  it('refuses an Accept it answers nothing in with 406 before the operation runs, on either lane', async () => {
    const authorization = `Bearer ${await tokenOf('hygiene-awarder', { admin: true })}`;
    for (const accept of ['application/xml', 'text/html', 'application/json; charset=latin1']) {
      // A plain JSON POST comes to the fast lane; with `extensions` it goes to Yoga's.
      for (const extra of [{}, { extensions: {} }]) {
        const requestId = `hygiene-406-${accept}-${Object.keys(extra).length}`;
        const response = await fetch(servers.test.url, { method: 'POST', headers: { authorization, accept, 'content-type': 'application/json' }, body: award(requestId, extra) });
        await refusedWith(response, 406, /accept application\/json/);
        expect(await awards(requestId)).toBe(0);
      }
    }
    const get = await fetch(`${servers.production.url}?query=${encodeURIComponent('{ __typename }')}`, { headers: { authorization, accept: 'text/html' } });
    await refusedWith(get, 406, /accept application\/json/);
    // Served as before under an Accept it answers.
    const served = await fetch(servers.test.url, { method: 'POST', headers: { authorization, 'content-type': 'application/json' }, body: award('hygiene-406-served') });
    expect(await served.json()).toEqual({ data: { awardPoints: expect.any(Number) } });
    expect(await awards('hygiene-406-served')).toBe(1);
  });

  it('refuses a subscription under an Accept without an event stream with 406, and gives its place back', async () => {
    const packet = await redPacketsAt(servers.test.url).create('hygiene-packet-sender', { totalAmount: 10, count: 2 });
    const token = await tokenOf('hygiene-subscriber');
    const subscription = JSON.stringify({ query: print(RedPacketUpdatedDocument), variables: { packetId: packet.id } });
    for (const accept of ['application/json', 'multipart/mixed']) {
      const response = await fetch(servers.test.url, { method: 'POST', headers: { authorization: `Bearer ${token}`, accept, 'content-type': 'application/json' }, body: subscription });
      await refusedWith(response, 406, /Accept: text\/event-stream/);
    }
    // The user's one place is free: an event stream is served.
    const stream = subscribeSse(servers.test.url, RedPacketUpdatedDocument, { packetId: packet.id }, token);
    try {
      const [first] = await stream.until((events) => events.length > 0);
      expect(first).toEqual({ data: { redPacketUpdated: expect.objectContaining({ id: packet.id }) } });
    } finally {
      stream.close();
    }
  });

  it("has graphql-sse's refusals carry a code and what to send, keeping their statuses", async () => {
    const stream = new URL('/graphql/stream', servers.test.url).toString();
    const packet = await redPacketsAt(servers.test.url).create('hygiene-packet-sender', { totalAmount: 10, count: 2 });
    const owner = { authorization: `Bearer ${await tokenOf('hygiene-streamer')}` };
    await refusedWith(await fetch(stream, { method: 'PUT', headers: { ...owner, accept: 'application/json' } }), 406, /Accept: text\/plain/);
    const token = await (await fetch(stream, { method: 'PUT', headers: owner })).text();
    const onStream = { ...owner, 'x-graphql-event-stream-token': token };
    const operate = (headers: Record<string, string>, extensions: Record<string, unknown> = { operationId: 'watch' }) =>
      fetch(stream, {
        method: 'POST',
        headers: { ...onStream, 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ query: print(RedPacketUpdatedDocument), variables: { packetId: packet.id }, extensions }),
      });
    await refusedWith(await fetch(stream, { method: 'PATCH', headers: onStream }), 405, /PUT reserves a stream/);
    await refusedWith(await operate({ accept: 'text/plain' }), 406, /application\/json \(or none\) with an operation/);
    await refusedWith(await operate({ 'content-type': 'text/plain' }), 415, /POST the GraphQL request as application\/json/);
    await refusedWith(await operate({}, {}), 400, /Operation ID is missing/);
    const connecting = new AbortController();
    try {
      const connected = await fetch(stream, { headers: { ...onStream, accept: 'text/event-stream' }, signal: connecting.signal });
      expect(connected.status).toBe(200);
      await refusedWith(await fetch(stream, { headers: { ...onStream, accept: 'text/event-stream' } }), 409, /reserve another \(PUT\)/);
      expect((await operate({})).status).toBe(202);
      await refusedWith(await operate({}), 409, /give each operation its own id/);
      // The refusals changed nothing: the operation runs on, and is stopped as usual.
      expect((await fetch(`${stream}?operationId=watch`, { method: 'DELETE', headers: onStream })).status).toBe(200);
    } finally {
      connecting.abort();
    }
  });
});

describe('unexpected errors', () => {
  const query = { query: '{ goods(id: "hygiene-no-such-goods") { id } }' };

  it('are masked in development too, and exposed only with GRAPHQL_EXPOSE_ERRORS=1', async () => {
    // A database error the service does not expect: the table is gone.
    const headers = { authorization: `Bearer ${await tokenOf('hygiene-shopper')}` };
    await stores.sql.query('ALTER TABLE goods RENAME TO goods_away');
    try {
      const masked = await post(servers.development, query, headers);
      expect(masked.body.errors).toHaveLength(1);
      expect(masked.body.errors![0]!.message).toBe('Unexpected error.');
      expect(masked.body.errors![0]!.extensions).toEqual({ code: 'INTERNAL_SERVER_ERROR' });
      expect(JSON.stringify(masked.body)).not.toMatch(/originalError|prisma|\.ts|stack/i);

      const exposed = await post(servers.exposed, query, headers);
      const original = exposed.body.errors![0]!.extensions?.originalError as { message: string; stack: string };
      expect(original.message).toMatch(/goods/);
      expect(original.stack).toMatch(/\.(ts|js|mjs):\d+/);
    } finally {
      await stores.sql.query('ALTER TABLE goods_away RENAME TO goods');
    }
  });
});

describe('suggestions', () => {
  const mistakes: [string, unknown][] = [
    ['a misspelt field', { query: '{ redPackt(id: "x") { id } }' }],
    ['a misspelt argument', { query: '{ teams(activityId: "a", statuss: OPEN) { id } }' }],
    ['a misspelt enum literal', { query: '{ teams(activityId: "a", status: OPN) { id } }' }],
    ['a misspelt type', { query: 'query ($s: TeamStatu) { teams(activityId: "a", status: $s) { id } }' }],
    ['a misspelt input field literal', { query: 'mutation { createRedPacket(input: { totalAmount: 100, cont: 2 }) { __typename } }' }],
    ['a misspelt enum value in variables', { query: 'query ($s: TeamStatus) { teams(activityId: "a", status: $s) { id } }', variables: { s: 'OPN' } }],
    [
      'a misspelt input field in variables',
      { query: 'mutation ($input: CreateRedPacketInput!) { createRedPacket(input: $input) { __typename } }', variables: { input: { totalAmount: 100, cont: 2 } } },
    ],
  ];

  it.each(['test', 'development', 'production'] as const)('are never given, NODE_ENV=%s', async (name) => {
    for (const [mistake, body] of mistakes) {
      const { body: answer } = await post(servers[name], body);
      expect(answer.errors?.length, mistake).toBeGreaterThan(0);
      for (const error of answer.errors!) {
        expect(error.message, mistake).not.toMatch(/did you mean/i);
        expect(error.extensions?.code, mistake).toBe('BAD_USER_INPUT');
      }
    }
  });

  it('are never given over graphql-ws', async () => {
    for (const [mistake, body] of mistakes) {
      const answer = await overWs(servers.production, body as { query: string });
      expect(answer.errors?.length, mistake).toBeGreaterThan(0);
      expect(JSON.stringify(answer.errors), mistake).not.toMatch(/did you mean/i);
    }
  });
});

describe('introspection in production', () => {
  const schemaQuery = { query: '{ __schema { queryType { name } } }' };
  const typeInFragment = { query: '{ ...Look } fragment Look on Query { __type(name: "RedPacket") { name } }' };

  it('is refused to anonymous callers and to users without the admin role', async () => {
    const user = await tokenOf('hygiene-user');
    for (const body of [schemaQuery, typeInFragment]) {
      for (const headers of [{}, { authorization: `Bearer ${user}` }] as Record<string, string>[]) {
        const { body: answer } = await post(servers.production, body, headers);
        expect(answer.data).toBeUndefined();
        expect(answer.errors?.map((error) => error.extensions?.code)).toEqual(['FORBIDDEN']);
      }
    }
    expect((await post(servers.production, { query: '{ __typename }' })).body).toEqual({ data: { __typename: 'Query' } });
    const overWebSocket = await overWs(servers.production, typeInFragment);
    expect(overWebSocket.data ?? undefined).toBeUndefined();
    expect(overWebSocket.errors?.map((error) => (error as { extensions?: Record<string, unknown> }).extensions?.code)).toEqual(['FORBIDDEN']);
  });

  it('is allowed to operators, and to anyone outside production', async () => {
    const operator = await tokenOf('hygiene-operator', { admin: true });
    expect((await post(servers.production, schemaQuery, { authorization: `Bearer ${operator}` })).body).toEqual({ data: { __schema: { queryType: { name: 'Query' } } } });
    for (const server of [servers.test, servers.development]) {
      expect((await post(server, typeInFragment)).body).toEqual({ data: { __type: { name: 'RedPacket' } } });
    }
  });
});

describe('request bodies', () => {
  /** A query padded by a variable to `bytes` bytes of JSON in all. */
  const padded = (bytes: number) => {
    const body = { query: '{ __typename }', variables: { pad: '' } };
    body.variables.pad = 'x'.repeat(bytes - JSON.stringify(body).length);
    return body;
  };
  const redPackets = async () => (await stores.sql.query<{ n: number }>('SELECT count(*)::int AS n FROM red_packet')).rows[0]!.n;

  it("are refused over the caller's limit before they are read, in the caller's language; an operator may send more", async () => {
    const user = await tokenOf('hygiene-body-user');
    const operator = await tokenOf('hygiene-body-operator', { admin: true });
    expect((await post(servers.test, padded(64 * 1024), { authorization: `Bearer ${user}` })).body).toEqual({ data: { __typename: 'Query' } });
    for (const headers of [{}, { authorization: `Bearer ${user}` }, { authorization: 'Bearer forged.admin.token' }] as Record<string, string>[]) {
      const refused = await post(servers.test, padded(64 * 1024 + 1), headers);
      expect(refused.status).toBe(413);
      expect(refused.body.errors).toEqual([{ message: 'the request body is larger than the 65536 bytes this caller may send', extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' } }]);
    }
    const inChinese = await post(servers.test, padded(100_000), { 'accept-language': 'zh-CN' });
    expect(inChinese.body.errors?.[0]?.message).toBe('请求体超过了该调用方允许的 65536 字节');
    // A pool of 10,000 voucher codes of 128 characters.
    expect((await post(servers.test, padded(1_400_000), { authorization: `Bearer ${operator}` })).body).toEqual({ data: { __typename: 'Query' } });
    expect((await post(servers.test, padded(2 * 1024 * 1024 + 1), { authorization: `Bearer ${operator}` })).status).toBe(413);
  });

  it('refuses a chunked body, and a large mutation changes nothing', async () => {
    const before = await redPackets();
    const user = await tokenOf('hygiene-body-sender');
    const mutation = {
      query: 'mutation($input: CreateRedPacketInput!) { createRedPacket(input: $input) { __typename } }',
      variables: { input: { totalAmount: 100, count: 1, greeting: 'hi', pad: 'x'.repeat(70_000) } },
    };
    const refused = await post(servers.test, mutation, { authorization: `Bearer ${user}` });
    expect(refused.status).toBe(413);
    // Sent in chunks: a body of unknown length.
    const chunks = (async function* () {
      yield new TextEncoder().encode(JSON.stringify({ query: '{ __typename }' }));
    })();
    const chunked = await fetch(servers.test.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chunks, duplex: 'half' });
    expect(chunked.status).toBe(411);
    expect(((await chunked.json()) as Answer['body']).errors?.[0]?.extensions).toEqual({ code: 'BAD_REQUEST' });
    expect(await redPackets()).toBe(before);
  });

  it("are capped on graphql-sse's stream too", async () => {
    const response = await fetch(new URL('/graphql/stream', servers.test.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify(padded(200_000)),
    });
    expect(response.status).toBe(413);
  });
});

describe('a GET without the CSRF header', () => {
  const get = (headers: Record<string, string>) => fetch(`${servers.test.url}?query=${encodeURIComponent('{ __typename }')}`, { headers: { accept: 'application/json', ...headers } });

  it('is refused with a code, and a message naming what to send', async () => {
    const response = await get({});
    expect(response.status).toBe(403);
    const [error] = ((await response.json()) as Answer['body']).errors ?? [];
    expect(error?.extensions?.code).toBe('BAD_REQUEST');
    expect(error?.message).toMatch(/x-graphql-yoga-csrf/);
  });

  it("is served with a header no page can send cross-site unpreflighted: a token, or Apollo's own", async () => {
    const token = await tokenOf('hygiene-getter');
    const sets: Record<string, string>[] = [{ authorization: `Bearer ${token}` }, { 'apollo-require-preflight': 'true' }, { 'x-apollo-operation-name': 'Typename' }];
    for (const headers of sets) {
      const response = await get(headers);
      expect(response.status, JSON.stringify(headers)).toBe(200);
      // Never kept by a shared cache for the next caller of the same URL.
      expect(response.headers.get('vary')).toMatch(/Authorization/);
      if (headers.authorization) expect(response.headers.get('cache-control')).toBe('private, no-store');
      expect(await response.json()).toEqual({ data: { __typename: 'Query' } });
    }
  });
});

describe("GraphiQL's page", () => {
  it('may not be framed by another site', async () => {
    const response = await fetch(servers.development.url, { headers: { accept: 'text/html' } });
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('graphiql');
    expect(response.headers.get('content-security-policy')).toBe("frame-ancestors 'none'");
    expect(response.headers.get('x-frame-options')).toBe('DENY');
  });
});

describe('CORS', () => {
  const typename = { query: '{ __typename }' };
  const allowedOrigin = async (server: ServerProcess, origin: string) => (await post(server, typename, { origin })).headers.get('access-control-allow-origin');

  it('allows the own origin and localhost on any port by default outside production', async () => {
    const own = new URL(servers.development.url).origin;
    for (const origin of [own, 'http://localhost:5173', 'http://127.0.0.1:3000', 'https://localhost']) {
      expect(await allowedOrigin(servers.development, origin), origin).toBe(origin);
      const { headers } = await post(servers.development, typename, { origin });
      expect(headers.get('access-control-allow-credentials')).toBe('true');
      expect(headers.get('vary')).toMatch(/Origin/);
    }
    for (const origin of ['https://evil.example', 'http://localhost.evil.example', 'null']) {
      expect(await allowedOrigin(servers.development, origin), origin).toBeNull();
    }
  });

  it('allows no other origin in production unless CORS_ORIGINS lists it', async () => {
    for (const origin of ['http://localhost:5173', 'https://shop.example']) expect(await allowedOrigin(servers.production, origin), origin).toBeNull();
    expect(await allowedOrigin(servers.listed, 'https://shop.example')).toBe('https://shop.example');
    expect(await allowedOrigin(servers.listed, 'https://admin.shop.example')).toBe('https://admin.shop.example');
    for (const origin of ['https://evil.example', 'http://localhost:5173', 'https://shop.example.evil']) {
      expect(await allowedOrigin(servers.listed, origin), origin).toBeNull();
    }
  });

  it('answers preflights for listed origins only', async () => {
    const preflight = (origin: string) =>
      fetch(servers.listed.url, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
      });
    const allowed = await preflight('https://shop.example');
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://shop.example');
    expect(allowed.headers.get('access-control-allow-headers')).toBe('authorization, content-type');
    // Kept by the browser for as long as it allows (2 h in Chromium), not 5 s.
    expect(allowed.headers.get('access-control-max-age')).toBe('7200');
    const refused = await preflight('https://evil.example');
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    expect(refused.headers.get('access-control-allow-headers')).toBeNull();
  });
});
