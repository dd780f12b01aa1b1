import { createHash, randomUUID } from 'node:crypto';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.ts';
import { CSRF_HEADER } from '../src/httpHygiene.ts';
import { type Subscription, openWs } from './support/client.ts';
import { TEST_JWT_SECRET, type TestEnv, testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { TEST_PAYMENT_SECRET } from './support/payments.ts';
import { webDocumentId, webManifest } from './support/persistedDocuments.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

const manifest = webManifest();
const PACKET = webDocumentId('WebRedPacket');
const UPDATED = webDocumentId('WebRedPacketUpdated');
const GRAB = webDocumentId('WebGrabRedPacket');
const UNKNOWN = `sha256:${'0'.repeat(64)}`;
const PACKET_TEXT = 'query Packet($id: ID!) { redPacket(id: $id) { id remainingCount } }';
const GRAB_TEXT = 'mutation Grab($packetId: ID!) { grabRedPacket(packetId: $packetId) { __typename } }';
const UPDATED_TEXT = 'subscription Updated($packetId: ID!) { redPacketUpdated(packetId: $packetId) { remainingCount } }';

const modes = ['off', 'allow', 'only'] as const;
type Mode = (typeof modes)[number];
const envs = Object.fromEntries(modes.map((mode) => [mode, testEnv(`persisted-${mode}`, { GRAPHQL_TRUSTED_DOCUMENTS: mode })])) as Record<Mode, TestEnv>;
const servers = {} as Record<Mode, ServerProcess>;
const stores: Stores[] = [];
const cleanups: (() => void)[] = [];

beforeAll(async () => {
  await Promise.all(
    modes.map(async (mode) => {
      servers[mode] = await startServerProcess(envs[mode].vars);
      stores.push(openStores(envs[mode]));
    }),
  );
});

afterAll(async () => {
  for (const cleanup of cleanups) cleanup();
  try {
    await stopAll(...Object.values(servers));
  } finally {
    await Promise.all(stores.map((store) => store.cleanup()));
  }
});

type Body = { data?: Record<string, unknown> | null; errors?: { message: string; extensions?: { code?: string } }[] };

/** A POST of any body (the tests' gql() sends text only), as `user` or anonymous. */
async function post(mode: Mode, body: Record<string, unknown>, user?: string, as: { admin?: boolean } = {}): Promise<{ status: number; body: Body }> {
  const token = user === undefined ? undefined : await tokenOf(user, as);
  const response = await fetch(servers[mode].url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Body };
}

const codes = (body: Body) => (body.errors ?? []).map((error) => error.extensions?.code);

/** A shop-funded packet of 3 shares on `mode`'s server, made by an operator (who may send text in every mode). */
async function packetOn(mode: Mode): Promise<string> {
  return (await redPacketsAt(servers[mode].url).create(`sender-${randomUUID()}`, { totalAmount: 30, count: 3 })).id;
}

async function ws(mode: Mode, user: string, as: { admin?: boolean } = {}) {
  const connection = openWs(servers[mode].url, { authorization: `Bearer ${await tokenOf(user, as)}` });
  cleanups.push(connection.dispose);
  return connection;
}

const remaining = (subscription: Subscription<{ redPacketUpdated: { remainingCount: number } }>) =>
  subscription.events.flatMap((event) => (event.data ? [event.data.redPacketUpdated.remainingCount] : []));
const firstCode = async (subscription: Subscription<unknown>) => (await subscription.until((events) => events.length > 0))[0]?.errors?.map((error) => error.extensions?.code);

describe("the web app's manifest", () => {
  it('lists each document under the sha256 of its text, as codegen hashes it', () => {
    expect(Object.keys(manifest).length).toBeGreaterThan(0);
    for (const [id, text] of Object.entries(manifest)) expect(id).toBe(`sha256:${createHash('sha256').update(text).digest('hex')}`);
  });
});

describe('GRAPHQL_TRUSTED_DOCUMENTS', () => {
  it('is off, allow or only, allow when unset', () => {
    const base = { JWT_SECRET: TEST_JWT_SECRET, PAYMENT_WEBHOOK_SECRET: TEST_PAYMENT_SECRET };
    expect(loadConfig(base).GRAPHQL_TRUSTED_DOCUMENTS).toBe('allow');
    expect(loadConfig({ ...base, NODE_ENV: 'production' }).GRAPHQL_TRUSTED_DOCUMENTS).toBe('allow');
    expect(loadConfig({ ...base, GRAPHQL_TRUSTED_DOCUMENTS: 'only' }).GRAPHQL_TRUSTED_DOCUMENTS).toBe('only');
    expect(() => loadConfig({ ...base, GRAPHQL_TRUSTED_DOCUMENTS: 'yes' })).toThrow(ConfigError);
    expect(() => loadConfig({ ...base, GRAPHQL_TRUSTED_DOCUMENTS: 'yes' })).toThrow(/GRAPHQL_TRUSTED_DOCUMENTS/);
  });
});

describe.each(['allow', 'only'] as const)('%s: persisted documents', (mode) => {
  it('runs a query and a mutation by documentId over HTTP', async () => {
    const packetId = await packetOn(mode);
    const read = await post(mode, { documentId: PACKET, variables: { id: packetId } }, 'reader');
    expect(read.status).toBe(200);
    expect(read.body.data?.redPacket).toMatchObject({ id: packetId, remainingCount: 3 });
    const grab = await post(mode, { documentId: GRAB, variables: { packetId } }, 'grabber');
    expect(grab.body.data?.grabRedPacket).toMatchObject({ __typename: 'GrabbedShare' });
  });

  it('runs a query by documentId over GET, which caches can keep', async () => {
    const packetId = await packetOn(mode);
    const search = new URLSearchParams({ documentId: PACKET, variables: JSON.stringify({ id: packetId }) });
    const response = await fetch(`${servers[mode].url}?${search}`, { headers: { authorization: `Bearer ${await tokenOf('reader')}`, [CSRF_HEADER]: '1' } });
    expect(response.status).toBe(200);
    expect(((await response.json()) as Body).data?.redPacket).toMatchObject({ id: packetId, remainingCount: 3 });
  });

  it('refuses an unknown documentId with PERSISTED_QUERY_NOT_FOUND, over HTTP and graphql-ws', async () => {
    const refused = await post(mode, { documentId: UNKNOWN, variables: {} }, 'reader');
    expect(refused.status).toBe(400);
    expect(codes(refused.body)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    const connection = await ws(mode, 'reader');
    expect(await firstCode(connection.subscribe({ query: '', documentId: UNKNOWN }))).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    expect(connection.closeCodes).toEqual([]);
  });

  it('runs a subscription by documentId over graphql-ws', async () => {
    const packetId = await packetOn(mode);
    const connection = await ws(mode, 'watcher');
    const live = connection.subscribe<{ redPacketUpdated: { remainingCount: number } }>({ query: '', documentId: UPDATED, variables: { packetId } });
    await live.until((events) => remaining(live).includes(3) || events.some((event) => event.errors));
    expect(live.events.flatMap((event) => event.errors ?? [])).toEqual([]);
    await post(mode, { documentId: GRAB, variables: { packetId } }, 'grabber');
    await live.until(() => remaining(live).includes(2));
  });

  it('answers a body with neither query nor documentId with BAD_USER_INPUT', async () => {
    const refused = await post(mode, { variables: {} }, 'reader');
    expect(refused.status).toBe(400);
    expect(codes(refused.body)).toEqual(['BAD_USER_INPUT']);
  });
});

describe('allow: query text', () => {
  it('runs text from anyone, over HTTP and graphql-ws', async () => {
    const packetId = await packetOn('allow');
    expect((await post('allow', { query: PACKET_TEXT, variables: { id: packetId } }, 'reader')).body.data?.redPacket).toMatchObject({ remainingCount: 3 });
    const live = (await ws('allow', 'watcher')).subscribe<{ redPacketUpdated: { remainingCount: number } }>({ query: UPDATED_TEXT, variables: { packetId } });
    await live.until(() => remaining(live).includes(3));
  });

  it("answers Apollo's hash-only persisted query with PERSISTED_QUERY_NOT_SUPPORTED, so its link sends the text, which runs", async () => {
    const packetId = await packetOn('allow');
    const persistedQuery = { version: 1, sha256Hash: createHash('sha256').update(PACKET_TEXT).digest('hex') };
    const hashOnly = await post('allow', { variables: { id: packetId }, extensions: { persistedQuery } }, 'reader');
    expect(hashOnly.status).toBe(400);
    expect(codes(hashOnly.body)).toEqual(['PERSISTED_QUERY_NOT_SUPPORTED']);
    expect(hashOnly.body.errors?.[0]?.message).toMatch(/^PersistedQueryNotSupported/);
    const withText = await post('allow', { query: PACKET_TEXT, variables: { id: packetId }, extensions: { persistedQuery } }, 'reader');
    expect(withText.body.data?.redPacket).toMatchObject({ remainingCount: 3 });
    const connection = await ws('allow', 'reader');
    expect(await firstCode(connection.subscribe({ query: '', variables: { id: packetId }, extensions: { persistedQuery } }))).toEqual(['PERSISTED_QUERY_NOT_SUPPORTED']);
    // Neither an id nor a hash: what to send instead.
    expect(codes((await post('allow', { variables: {} }, 'reader')).body)).toEqual(['BAD_USER_INPUT']);
  });
});

describe('only: query text', () => {
  it('refuses text from a user, an anonymous caller and a refused token with 403 PERSISTED_QUERY_ONLY, running nothing', async () => {
    const packetId = await packetOn('only');
    const grabs = [
      await post('only', { query: GRAB_TEXT, variables: { packetId } }, 'grabber'),
      await post('only', { query: GRAB_TEXT, variables: { packetId } }),
      await (async () => {
        const response = await fetch(servers.only.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: 'Bearer not.a.token' },
          body: JSON.stringify({ query: GRAB_TEXT, variables: { packetId } }),
        });
        return { status: response.status, body: (await response.json()) as Body };
      })(),
    ];
    for (const grab of grabs) {
      expect(grab.status).toBe(403);
      expect(grab.body.data).toBeUndefined();
      expect(codes(grab.body)).toEqual(['PERSISTED_QUERY_ONLY']);
    }
    // Nothing ran: no share was taken.
    const read = await post('only', { documentId: PACKET, variables: { id: packetId } }, 'reader');
    expect(read.body.data?.redPacket).toMatchObject({ remainingCount: 3 });
  });

  it('refuses text over GET, graphql-ws and graphql-sse from a user', async () => {
    const token = await tokenOf('reader');
    const get = await fetch(`${servers.only.url}?query=${encodeURIComponent('{ serverTime }')}`, {
      headers: { authorization: `Bearer ${token}`, [CSRF_HEADER]: '1' },
    });
    expect(get.status).toBe(403);
    expect(codes((await get.json()) as Body)).toEqual(['PERSISTED_QUERY_ONLY']);
    const connection = await ws('only', 'watcher');
    expect(await firstCode(connection.subscribe({ query: UPDATED_TEXT, variables: { packetId: 'any' } }))).toEqual(['PERSISTED_QUERY_ONLY']);
    expect(connection.closeCodes).toEqual([]);
    const sse = await fetch(`${servers.only.url}/stream`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: UPDATED_TEXT, variables: { packetId: 'any' } }),
    });
    expect(sse.status).toBe(400);
    expect(codes((await sse.json()) as Body)).toEqual(['PERSISTED_QUERY_ONLY']);
  });

  it('runs any text from an operator, over HTTP and graphql-ws (GraphiQL, scripts)', async () => {
    const packetId = await packetOn('only');
    const read = await post('only', { query: PACKET_TEXT, variables: { id: packetId } }, 'operator', { admin: true });
    expect(read.body.data?.redPacket).toMatchObject({ remainingCount: 3 });
    const live = (await ws('only', 'operator', { admin: true })).subscribe<{ redPacketUpdated: { remainingCount: number } }>({
      query: UPDATED_TEXT,
      variables: { packetId },
    });
    await live.until(() => remaining(live).includes(3));
    // GraphiQL sends its headers tab with each operation, on a socket opened without a token.
    const socket = openWs(servers.only.url);
    cleanups.push(socket.dispose);
    const graphiql = socket.subscribe<{ redPacket: { remainingCount: number } }>({
      query: PACKET_TEXT,
      variables: { id: packetId },
      extensions: { headers: { Authorization: `Bearer ${await tokenOf('operator', { admin: true })}` } },
    });
    expect(await graphiql.until((events) => events.length > 0)).toEqual([{ data: { redPacket: { id: packetId, remainingCount: 3 } } }]);
  });
});

describe('off', () => {
  it('refuses every documentId with PERSISTED_QUERY_NOT_FOUND, over HTTP and graphql-ws, and runs text', async () => {
    const packetId = await packetOn('off');
    const refused = await post('off', { documentId: PACKET, variables: { id: packetId } }, 'reader');
    expect(refused.status).toBe(400);
    expect(codes(refused.body)).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    const connection = await ws('off', 'watcher');
    expect(await firstCode(connection.subscribe({ query: '', documentId: UPDATED, variables: { packetId } }))).toEqual(['PERSISTED_QUERY_NOT_FOUND']);
    expect((await post('off', { query: PACKET_TEXT, variables: { id: packetId } }, 'reader')).body.data?.redPacket).toMatchObject({ remainingCount: 3 });
  });
});
