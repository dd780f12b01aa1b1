import { createClient } from 'graphql-ws';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { wxWebSocket } from '../clients/miniprogram/wxWebSocket.js';
import { gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { runReadmeOperations } from './support/readme.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { freePort } from './support/server.ts';
import { tokenOf } from './support/tokens.ts';

const env = testEnv('miniprogram');
const started = startedServer(env);

/**
 * `wx.connectSocket` as the WeChat docs define it (a SocketTask with onOpen, onMessage,
 * onError, onClose, send({ data }) and close({ code, reason })), over a real socket.
 */
function emulatedWx(opened: string[][]) {
  return {
    connectSocket({ url, protocols = [] }: { url: string; protocols?: string[] }) {
      opened.push(protocols);
      const socket = new WebSocket(url, protocols);
      return {
        onOpen: (listener: (result: { header: Record<string, string> }) => void) => socket.on('open', () => listener({ header: { 'sec-websocket-protocol': socket.protocol } })),
        onMessage: (listener: (message: { data: string }) => void) => socket.on('message', (data) => listener({ data: String(data) })),
        onError: (listener: (error: { errMsg: string }) => void) => socket.on('error', (error) => listener({ errMsg: error.message })),
        onClose: (listener: (event: { code: number; reason: string }) => void) => socket.on('close', (code, reason) => listener({ code, reason: String(reason) })),
        send: ({ data }: { data: string }) => socket.send(data),
        close: ({ code, reason }: { code?: number; reason?: string }) => socket.close(code, reason),
      };
    },
  };
}

describe('the mini-program adapter', () => {
  it('carries graphql-ws over a SocketTask: subscribe, receive live states, complete', async () => {
    const packet = await redPacketsAt(started.server.url).create('mp-sender', { totalAmount: 200, count: 2 });
    const opened: string[][] = [];
    const token = await tokenOf('mp-user');
    const client = createClient({
      url: started.server.url.replace(/^http/, 'ws'),
      webSocketImpl: wxWebSocket(emulatedWx(opened)),
      connectionParams: { authorization: `Bearer ${token}` },
      retryAttempts: 0,
    });
    const states: number[] = [];
    const completed = new Promise<void>((resolve, reject) =>
      client.subscribe<{ redPacketUpdated: { remainingCount: number } }>(
        { query: 'subscription ($id: ID!) { redPacketUpdated(packetId: $id) { remainingCount } }', variables: { id: packet.id } },
        { next: ({ data }) => states.push(data!.redPacketUpdated.remainingCount), error: reject, complete: resolve },
      ),
    );
    await expect.poll(() => states).toContain(2);
    const packets = redPacketsAt(started.server.url);
    await packets.grab('mp-a', packet.id);
    await packets.grab('mp-b', packet.id);
    // The stream completes once the packet is EMPTY, with the final state last.
    await completed;
    expect(states.at(-1)).toBe(0);
    expect(opened).toEqual([['graphql-transport-ws']]);
    await client.dispose();
  });

  it('passes a failed connect on as a lost connection, which graphql-ws retries', async () => {
    const opened: string[][] = [];
    const client = createClient({
      // Nothing listens there: each SocketTask reports an error.
      url: `ws://127.0.0.1:${await freePort()}/graphql`,
      webSocketImpl: wxWebSocket(emulatedWx(opened)),
      retryAttempts: 2,
      retryWait: () => Promise.resolve(),
    });
    const outcome = await new Promise<unknown>((resolve) => client.subscribe({ query: '{ serverTime }' }, { next: resolve, error: resolve, complete: () => resolve('complete') }));
    expect(outcome).toMatchObject({ type: 'close', code: 1006 });
    expect(opened, 'a connect and two retries').toHaveLength(3);
    await client.dispose();
  });

  it('reports a refused sign-in as the subscription’s error', async () => {
    const client = createClient({
      url: started.server.url.replace(/^http/, 'ws'),
      webSocketImpl: wxWebSocket(emulatedWx([])),
      connectionParams: { authorization: 'Bearer not-a-token' },
      retryAttempts: 0,
    });
    const outcome = await new Promise<unknown>((resolve) =>
      client.subscribe({ query: 'subscription { redPacketUpdated(packetId: "x") { remainingCount } }' }, { next: resolve, error: resolve, complete: () => resolve('complete') }),
    );
    expect(JSON.stringify(outcome)).toContain('UNAUTHENTICATED');
    await client.dispose();
  });
});

// On this file's server, as a server start of their own would cost more than they do: the
// campaigns they make touch nothing the mini-program tests read. test/readme.test.ts
// checks the blocks against the schema without a server.
describe("the README's first campaigns", () => {
  it('run as written, in order, on a fresh server', async () => {
    const ids = await runReadmeOperations(started.server.url);
    // bob's sandbox payment seated him beside alice, the team's leader.
    const { body } = await gql<{ team: { members: { userId: string }[] } }, { id: string }>(
      started.server.url,
      'query ($id: ID!) { team(id: $id) { members { userId } } }',
      { id: ids.teamId! },
      await tokenOf('ops', { admin: true }),
    );
    expect(body.data?.team.members.map((member) => member.userId)).toEqual(['alice', 'bob']);
  });
});
