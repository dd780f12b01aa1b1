import { randomUUID } from 'node:crypto';
import { type ExecutionResult, print } from 'graphql';
import { createClient as createSseClient } from 'graphql-sse';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signToken } from '../src/infra/auth/tokens.ts';
import { RedPacketUpdatedDocument, type RedPacketUpdatedSubscription } from './gql/generated.ts';
import { type Subscription, collector, openWs, subscribeSse } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { sleep, waitFor } from './support/poll.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

// What real clients send: GraphiQL's per-operation headers, Apollo's connectionParams.headers,
// several operations on one socket, and graphql-sse's single connection mode.
// A reserved graphql-sse stream not connected within 2 s is dropped.
const env = testEnv('transports', { SSE_RESERVATION_TIMEOUT_MS: '2000' });
let server: ServerProcess;
let stores: Stores;
const cleanups: (() => void)[] = [];

beforeAll(async () => {
  server = await startServerProcess(env.vars);
  stores = openStores(env);
});

afterAll(async () => {
  for (const cleanup of cleanups) cleanup();
  try {
    await stopAll(server);
  } finally {
    await stores?.cleanup();
  }
});

type Event = ExecutionResult<RedPacketUpdatedSubscription>;
const SUBSCRIPTION = print(RedPacketUpdatedDocument);
const ME = '{ me { userId } }';
const remaining = (events: Event[]) => events.flatMap((event) => (event.data ? [event.data.redPacketUpdated.remainingCount] : []));
const failures = (events: ExecutionResult<unknown>[]) => events.flatMap((event) => (event.errors ?? []).map((error) => [error.extensions?.code, error.extensions?.reason]));

async function createPacket(count = 3) {
  const redPackets = redPacketsAt(server.url);
  const { id } = await redPackets.create(`sender-${randomUUID()}`, { totalAmount: count * 10, count });
  return { id, grab: () => redPackets.grab(`grabber-${randomUUID()}`, id) };
}

/** The subscription shows the packet, then the grab made after its first event. */
async function expectLive(subscription: Subscription<RedPacketUpdatedSubscription>, packet: { grab(): Promise<unknown> }, count = 3) {
  await subscription.until((events) => remaining(events).includes(count) || failures(events).length > 0);
  expect(failures(subscription.events)).toEqual([]);
  await packet.grab();
  await subscription.until((events) => remaining(events).includes(count - 1));
}

function ws(connectionParams: Record<string, unknown> = {}) {
  const connection = openWs(server.url, connectionParams);
  cleanups.push(connection.dispose);
  return connection;
}

/** A graphql-sse client in single connection mode, sending `headers` with every request. */
function sse(headers: Record<string, string>) {
  // Headers as a function: the client writes its stream token into a headers object given
  // as such, and would send that stale token with its next reservation (409 Conflict).
  const client = createSseClient({ url: `${server.url}/stream`, singleConnection: true, headers: () => ({ ...headers }), retryAttempts: 0 });
  cleanups.push(() => client.dispose());
  return {
    subscribe<T>(query: string, variables: Record<string, unknown> = {}): Subscription<T> {
      const { push, complete, ...received } = collector<T>();
      const close = client.subscribe<T>(
        { query, variables },
        {
          next: (event) => push(event as ExecutionResult<T>),
          error: (error) => push({ errors: [{ message: String((error as Error).message ?? error) }] } as unknown as ExecutionResult<T>),
          complete,
        },
      );
      return { ...received, close };
    },
  };
}

describe('signing in over graphql-ws', () => {
  it.each([
    ['connectionParams.authorization', (bearer: string) => [{ authorization: bearer }, undefined]],
    ['connectionParams.Authorization', (bearer: string) => [{ Authorization: bearer }, undefined]],
    ['connectionParams.AUTHORIZATION', (bearer: string) => [{ AUTHORIZATION: bearer }, undefined]],
    ["Apollo's connectionParams.headers.Authorization", (bearer: string) => [{ headers: { Authorization: bearer } }, undefined]],
    ["GraphiQL's extensions.headers, with an empty connection_init", (bearer: string) => [{}, { headers: { Authorization: bearer } }]],
  ] as const)('takes %s', async (_name, place) => {
    const packet = await createPacket();
    const [connectionParams, extensions] = place(`Bearer ${await tokenOf('ws-user')}`);
    const connection = ws(connectionParams);
    const me = connection.subscribe({ query: ME, extensions });
    expect(await me.until((events) => events.length > 0)).toEqual([{ data: { me: { userId: 'ws-user' } } }]);
    await expectLive(connection.subscribe({ query: SUBSCRIPTION, variables: { packetId: packet.id }, extensions }), packet);
  });

  it("the operation's own header wins over the socket's, for that operation only", async () => {
    const connection = ws({ authorization: `Bearer ${await tokenOf('socket-user')}` });
    const own = connection.subscribe({ query: ME, extensions: { headers: { authorization: `Bearer ${await tokenOf('operation-user')}` } } });
    const plain = connection.subscribe({ query: ME });
    const stale = connection.subscribe({ query: ME, extensions: { headers: { Authorization: 'Bearer not-a-jwt' } } });
    // A headers tab with other headers, or an empty Authorization, leaves the socket's token.
    const blank = connection.subscribe({ query: ME, extensions: { headers: { 'X-Trace': 'on', Authorization: ' ' } } });
    expect(await own.until((events) => events.length > 0)).toEqual([{ data: { me: { userId: 'operation-user' } } }]);
    expect(await plain.until((events) => events.length > 0)).toEqual([{ data: { me: { userId: 'socket-user' } } }]);
    expect(await blank.until((events) => events.length > 0)).toEqual([{ data: { me: { userId: 'socket-user' } } }]);
    expect(failures(await stale.until((events) => events.length > 0))).toEqual([['UNAUTHENTICATED', 'MALFORMED']]);
    expect(connection.closeCodes).toEqual([]);
  });

  it('says why a subscription is refused: MISSING without a token, EXPIRED with an expired one', async () => {
    const packet = await createPacket();
    const expired = await signToken('test-secret-that-is-at-least-32-characters-long', { userId: 'late', roles: [] }, { expiresInSeconds: -60 });
    const anonymous = ws().subscribe({ query: SUBSCRIPTION, variables: { packetId: packet.id } });
    const late = ws({ authorization: `Bearer ${expired}` }).subscribe({ query: SUBSCRIPTION, variables: { packetId: packet.id } });
    expect(failures(await anonymous.until((events) => events.length > 0))).toEqual([['UNAUTHENTICATED', 'MISSING']]);
    expect(failures(await late.until((events) => events.length > 0))).toEqual([['UNAUTHENTICATED', 'EXPIRED']]);
  });
});

describe('one bad operation stays one', () => {
  it('answers a syntax error, a validation error and a bad token on their own, and the other subscription on the socket lives on', async () => {
    const packet = await createPacket();
    const connection = ws({ authorization: `Bearer ${await tokenOf('steady')}` });
    const live = connection.subscribe<RedPacketUpdatedSubscription>({ query: SUBSCRIPTION, variables: { packetId: packet.id } });
    await live.until((events) => remaining(events).includes(3));
    const bad = [
      connection.subscribe({ query: 'subscription { redPacketUpdated(packetId: ' }),
      connection.subscribe({ query: 'subscription { noSuchField }' }),
      connection.subscribe({ query: SUBSCRIPTION, variables: { packetId: packet.id }, extensions: { headers: { authorization: 'Bearer x.y.z' } } }),
      connection.subscribe({ query: SUBSCRIPTION, variables: { packetId: { not: 'an id' } } }),
    ];
    const answers = await Promise.all(bad.map((subscription) => subscription.until((events) => events.length > 0)));
    expect(answers.map((events) => failures(events)[0]?.[0])).toEqual(['BAD_USER_INPUT', 'BAD_USER_INPUT', 'UNAUTHENTICATED', 'BAD_USER_INPUT']);
    // Yoga's HTTP status for them is for its HTTP answers; a socket's client gets none.
    for (const [first] of answers) expect(first!.errors?.[0]?.extensions).not.toHaveProperty('http');
    await packet.grab();
    await live.until((events) => remaining(events).includes(2));
    expect(failures(live.events)).toEqual([]);
    expect(connection.closeCodes).toEqual([]);
  });
});

describe('graphql-sse single connection mode', () => {
  it('streams several operations on one connection, signed in with the Authorization header', async () => {
    const [first, second] = [await createPacket(), await createPacket()];
    const client = sse({ authorization: `Bearer ${await tokenOf('sse-user')}` });
    const me = client.subscribe(ME);
    expect(await me.until((events) => events.length > 0)).toEqual([{ data: { me: { userId: 'sse-user' } } }]);
    // A variable of the wrong type: its error as a stream's client gets it, without Yoga's HTTP status.
    const [mistyped] = await client.subscribe(SUBSCRIPTION, { packetId: { not: 'an id' } }).until((events) => events.length > 0);
    expect(mistyped?.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT' });
    const subscriptions = [first, second].map((packet) => client.subscribe<RedPacketUpdatedSubscription>(SUBSCRIPTION, { packetId: packet.id }));
    await Promise.all(subscriptions.map((subscription, index) => expectLive(subscription, [first, second][index]!)));
  });

  it('refuses a mutation sent by GET, which any page could trigger, and changes nothing', async () => {
    const packet = await createPacket();
    const search = new URLSearchParams({ query: `mutation { grabRedPacket(packetId: "${packet.id}") { __typename } }` });
    const response = await fetch(`${server.url}/stream?${search}`, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${await tokenOf('sse-get-mutation')}` },
    });
    // Yoga's own rule, run by the envelop this lane shares: a mutation needs a POST.
    expect(response.status).toBe(400);
    expect(await response.text()).toContain('Can only perform a mutation operation from a POST request');
    expect(await stores.redis.hget(`{rp:${packet.id}}:meta`, 'remainingCount')).toBe('3');
    const { rows } = await stores.sql.query('SELECT id FROM red_packet_grab WHERE packet_id = $1', [packet.id]);
    expect(rows).toHaveLength(0);
  });

  it('answers a bad document with 400 and its errors, and the client streams on', async () => {
    const packet = await createPacket();
    const client = sse({ authorization: `Bearer ${await tokenOf('sse-typist')}` });
    const live = client.subscribe<RedPacketUpdatedSubscription>(SUBSCRIPTION, { packetId: packet.id });
    await live.until((events) => remaining(events).includes(3));
    for (const query of ['subscription { redPacketUpdated(packetId: ', 'subscription { noSuchField }']) {
      const [refusal] = await client.subscribe(query).until((events) => events.length > 0);
      expect(refusal?.errors?.[0]?.message).toMatch(/responded with 400/);
      // What the client was told, read raw: a reservation, then the operation on it.
      const token = await (await fetch(`${server.url}/stream`, { method: 'PUT', headers: { authorization: `Bearer ${await tokenOf('sse-typist')}` } })).text();
      const response = await fetch(`${server.url}/stream`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-graphql-event-stream-token': token, authorization: `Bearer ${await tokenOf('sse-typist')}` },
        body: JSON.stringify({ query, extensions: { operationId: 'bad' } }),
      });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('BAD_USER_INPUT');
    }
    // An operationName the document lacks is bad input too, as over /graphql.
    const unnamed = await fetch(`${server.url}/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${await tokenOf('sse-typist')}` },
      body: JSON.stringify({ query: SUBSCRIPTION, variables: { packetId: packet.id }, operationName: 'NoSuchOperation' }),
    });
    expect(unnamed.status).toBe(400);
    expect(failures([(await unnamed.json()) as ExecutionResult])).toEqual([['BAD_USER_INPUT', undefined]]);
    await packet.grab();
    await live.until((events) => remaining(events).includes(2));
  });

  it('reserves no stream without a valid token, and says why: MISSING without one, MALFORMED with a bad one', async () => {
    const packet = await createPacket();
    for (const [headers, reason] of [
      [{}, 'MISSING'],
      [{ authorization: 'Bearer not-a-jwt' }, 'MALFORMED'],
    ] as const) {
      const [refusal] = await sse(headers)
        .subscribe(SUBSCRIPTION, { packetId: packet.id })
        .until((events) => events.length > 0);
      expect(refusal?.errors?.[0]?.message).toMatch(/responded with 401/);
      const reservation = await fetch(`${server.url}/stream`, { method: 'PUT', headers });
      expect(reservation.status).toBe(401);
      expect(failures([(await reservation.json()) as ExecutionResult])).toEqual([['UNAUTHENTICATED', reason]]);
    }
  });

  it("answers a reserved stream's requests only from the user who reserved it", async () => {
    const packet = await createPacket();
    const owner = { authorization: `Bearer ${await tokenOf('sse-owner')}` };
    const token = await (await fetch(`${server.url}/stream`, { method: 'PUT', headers: owner })).text();
    const [id] = token.split('.');
    const connect = (headers: Record<string, string>, streamToken = token) =>
      fetch(`${server.url}/stream`, { headers: { ...headers, accept: 'text/event-stream', 'x-graphql-event-stream-token': streamToken } });
    const operate = (headers: Record<string, string>) =>
      fetch(`${server.url}/stream`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json', 'x-graphql-event-stream-token': token },
        body: JSON.stringify({ query: SUBSCRIPTION, variables: { packetId: packet.id }, extensions: { operationId: 'theirs' } }),
      });
    const other = { authorization: `Bearer ${await tokenOf('sse-other')}` };
    for (const [response, status, code] of [
      [await connect({}), 401, 'UNAUTHENTICATED'],
      [await connect(other), 403, 'FORBIDDEN'],
      [await connect(owner, `${id}.${'A'.repeat(43)}`), 403, 'FORBIDDEN'],
      [await connect(owner, id!), 403, 'FORBIDDEN'],
      [await operate(other), 403, 'FORBIDDEN'],
      [await fetch(`${server.url}/stream?${new URLSearchParams({ token, operationId: 'x' })}`, { method: 'DELETE', headers: other }), 403, 'FORBIDDEN'],
    ] as const) {
      expect(response.status).toBe(status);
      expect(((await response.json()) as ExecutionResult).errors?.[0]?.extensions?.code).toBe(code);
    }
    // Refused requests took nothing: the owner connects, and runs an operation on the stream.
    const connecting = new AbortController();
    const stream = await fetch(`${server.url}/stream`, { headers: { ...owner, accept: 'text/event-stream', 'x-graphql-event-stream-token': token }, signal: connecting.signal });
    expect(stream.status).toBe(200);
    expect((await operate(owner)).status).toBe(202);
    connecting.abort();
  });

  it('mints the stream token itself, reserves at most 4 per user, and drops one not connected in time', async () => {
    const headers = { authorization: `Bearer ${await tokenOf('sse-reserver')}` };
    const reserve = () => fetch(`${server.url}/stream`, { method: 'PUT', headers: { ...headers, 'x-graphql-event-stream-token': 'chosen-by-the-caller' } });
    const tokens: string[] = [];
    for (let i = 0; i < 4; i++) {
      const reservation = await reserve();
      expect(reservation.status).toBe(201);
      tokens.push(await reservation.text());
    }
    expect(new Set(tokens).size).toBe(4);
    for (const token of tokens) expect(token).toMatch(/^[0-9a-f-]{36}\.[\w-]{43}$/);
    const refused = await reserve();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as ExecutionResult).errors?.[0]?.extensions?.code).toBe('RATE_LIMITED');

    // None was connected: after the timeout they are gone, and so are their places.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    // Told so, with a code, whether it connects or sends an operation.
    const late = await fetch(`${server.url}/stream`, { headers: { ...headers, accept: 'text/event-stream', 'x-graphql-event-stream-token': tokens[1]! } });
    const lateOperation = await fetch(`${server.url}/stream`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', 'x-graphql-event-stream-token': tokens[2]! },
      body: JSON.stringify({ query: '{ serverTime }', extensions: { operationId: 'late' } }),
    });
    for (const response of [late, lateOperation]) {
      expect(response.status).toBe(404);
      const { errors } = (await response.json()) as ExecutionResult;
      expect(errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
      expect(errors?.[0]?.message).toMatch(/reserve a new one with PUT/);
    }
    for (let i = 0; i < 4; i++) expect((await reserve()).status).toBe(201);
    // An operation naming no stream at all is told how to name one.
    const unnamed = await fetch(`${server.url}/stream`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ serverTime }' }) });
    expect(unnamed.status).toBe(404);
    const { errors } = (await unnamed.json()) as ExecutionResult;
    expect(errors?.[0]).toMatchObject({ extensions: { code: 'NOT_FOUND' }, message: expect.stringMatching(/names no stream/) });
  });
});

describe('graphql-sse limits per user', () => {
  const stream = (headers: Record<string, string>, token: string, init: RequestInit = {}) =>
    fetch(`${server.url}/stream`, { ...init, headers: { ...headers, ...init.headers, 'x-graphql-event-stream-token': token } });
  const connect = (headers: Record<string, string>, token: string, signal: AbortSignal) => stream(headers, token, { headers: { accept: 'text/event-stream' }, signal });
  const reserve = (headers: Record<string, string>) => fetch(`${server.url}/stream`, { method: 'PUT', headers });
  const code = async (response: Response) => ((await response.json()) as ExecutionResult).errors?.[0]?.extensions?.code;

  it('holds at most 4 streams per user, connected ones too and past the reservation timeout, and frees a place when one closes', async () => {
    const headers = { authorization: `Bearer ${await tokenOf('sse-holder')}` };
    const connections = Array.from({ length: 4 }, () => new AbortController());
    cleanups.push(() => {
      for (const connection of connections) connection.abort();
    });
    for (const connection of connections) {
      const reservation = await reserve(headers);
      expect(reservation.status).toBe(201);
      expect((await connect(headers, await reservation.text(), connection.signal)).status).toBe(200);
    }
    // Connected streams are not dropped at the reservation timeout (2 s), and still count.
    await sleep(2_500);
    const refused = await reserve(headers);
    expect(refused.status).toBe(429);
    expect(await code(refused)).toBe('RATE_LIMITED');
    // Another user is not held back by this one.
    expect((await reserve({ authorization: `Bearer ${await tokenOf('sse-holder-neighbour')}` })).status).toBe(201);

    connections[0]!.abort();
    await waitFor('a place freed by the closed stream', async () => (await reserve(headers)).status === 201);
    expect((await reserve(headers)).status).toBe(429);
  });

  it('takes at most 16 operations on a stream before it is connected, and any number once connected', async () => {
    const headers = { authorization: `Bearer ${await tokenOf('sse-early-poster')}` };
    const token = await (await reserve(headers)).text();
    const operate = (operationId: string) =>
      stream(headers, token, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: ME, extensions: { operationId } }) });
    for (let i = 0; i < 16; i++) expect((await operate(`early-${i}`)).status).toBe(202);
    const refused = await operate('early-16');
    expect(refused.status).toBe(429);
    const { errors } = (await refused.json()) as ExecutionResult;
    expect(errors?.[0]).toMatchObject({ extensions: { code: 'RATE_LIMITED' }, message: expect.stringMatching(/connect it first/) });
    // An operation sent by GET queues the same way.
    const byGet = await fetch(`${server.url}/stream?${new URLSearchParams({ token, query: ME, extensions: JSON.stringify({ operationId: 'early-get' }) })}`, { headers });
    expect(byGet.status).toBe(429);

    const connection = new AbortController();
    cleanups.push(() => connection.abort());
    expect((await connect(headers, token, connection.signal)).status).toBe(200);
    for (let i = 16; i < 20; i++) expect((await operate(`early-${i}`)).status).toBe(202);
  });
});

describe('a token that expires during a subscription', () => {
  const liveSubscribers = async () => {
    const metrics = await (await fetch(new URL('/metrics', server.url))).text();
    return Number(/^live_event_subscribers (\d+)$/m.exec(metrics)?.[1]);
  };

  it('ends the subscription at exp with UNAUTHENTICATED EXPIRED on every transport; the socket and streams of other tokens live on', async () => {
    const packet = await createPacket();
    const variables = { packetId: packet.id };
    const shortLived = await signToken('test-secret-that-is-at-least-32-characters-long', { userId: 'expiring', roles: [] }, { expiresInSeconds: 3 });
    const expiresAtMs = decodeJwt(shortLived).exp! * 1000;
    const connection = ws({ authorization: `Bearer ${await tokenOf('expiring')}` });
    const steady = connection.subscribe<RedPacketUpdatedSubscription>({ query: SUBSCRIPTION, variables });
    const ending = [
      connection.subscribe<RedPacketUpdatedSubscription>({ query: SUBSCRIPTION, variables, extensions: { headers: { authorization: `Bearer ${shortLived}` } } }),
      subscribeSse(server.url, RedPacketUpdatedDocument, variables, shortLived),
      sse({ authorization: `Bearer ${shortLived}` }).subscribe<RedPacketUpdatedSubscription>(SUBSCRIPTION, variables),
    ];
    cleanups.push(...ending.map((subscription) => () => subscription.close()));
    for (const subscription of [steady, ...ending]) await subscription.until((events) => remaining(events).includes(3));
    const listening = await liveSubscribers();

    for (const subscription of ending) {
      await subscription.until((events) => failures(events).length > 0 && subscription.completed(), 8_000);
      expect(failures(subscription.events)).toEqual([['UNAUTHENTICATED', 'EXPIRED']]);
    }
    expect(Date.now()).toBeGreaterThanOrEqual(expiresAtMs);
    expect(Date.now()).toBeLessThan(expiresAtMs + 3_000);
    // Ended on the server too: their listeners (and their slots under SUBSCRIPTIONS_PER_USER) are let go.
    await waitFor('the ended listeners to leave', async () => (await liveSubscribers()) === listening - ending.length);

    // A grab after the end reaches the stream whose token is still good, and no ended one.
    await packet.grab();
    await steady.until((events) => remaining(events).includes(2));
    expect(failures(steady.events)).toEqual([]);
    for (const subscription of ending) expect(remaining(subscription.events)).toEqual([3]);
    expect(connection.closeCodes).toEqual([]);
  });
});
