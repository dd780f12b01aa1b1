import type { IncomingMessage } from 'node:http';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { WS_BACKLOG_GRACE_MS, WS_MAX_BURST_BYTES, cutIfBacklogged } from '../src/guards/connectionLimit.ts';
import { RedPacketUpdatedDocument } from './gql/generated.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { waitFor } from './support/poll.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

// Each test calls from its own loopback address (127.0.0.x), so the per-address counts are its own.
const env = testEnv('web_sockets', { WS_CONNECTIONS_PER_ADDRESS: '2', WS_IDLE_TIMEOUT_MS: '2000' });
let server: ServerProcess;
let stores: Stores;
/** A red packet to subscribe to. */
let packetId: string;

beforeAll(async () => {
  [server, stores] = await Promise.all([startServerProcess(env.vars), openStores(env)]);
  packetId = (await redPacketsAt(server.url).create('sockets-sender', { totalAmount: 1000, count: 10 })).id;
});

afterAll(async () => {
  await stopAll(server);
  await stores?.cleanup();
});

describe('graphql-ws sockets', () => {
  /** A graphql-transport-ws socket from `from`, acknowledged (signed in as `user` if given); or the refused upgrade. */
  function open(from: string, user?: string): Promise<WebSocket | IncomingMessage> {
    return new Promise((resolve, reject) => {
      const socket = new WebSocket(server.url.replace(/^http/, 'ws'), 'graphql-transport-ws', { localAddress: from });
      socket.once('open', async () => {
        socket.send(JSON.stringify({ type: 'connection_init', payload: user ? { authorization: `Bearer ${await tokenOf(user)}` } : {} }));
      });
      socket.on('message', (data) => JSON.parse(String(data)).type === 'connection_ack' && resolve(socket));
      socket.once('unexpected-response', (_request, response) => resolve(response));
      socket.once('error', reject);
    });
  }
  const closed = (socket: WebSocket) => new Promise<number>((resolve) => socket.once('close', (code) => resolve(code)));

  it('keeps at most WS_CONNECTIONS_PER_ADDRESS open per address; a closed one frees its place', async () => {
    const from = '127.0.0.8';
    const [first, second] = (await Promise.all([open(from), open(from)])) as WebSocket[];
    const refused = (await open(from)) as IncomingMessage;
    expect(refused.statusCode).toBe(429);
    let body = '';
    for await (const chunk of refused) body += String(chunk);
    expect(JSON.parse(body).errors[0].extensions.code).toBe('RATE_LIMITED');
    const gone = closed(first!);
    first!.close();
    await gone;
    await waitFor('the server to count the close', async () => {
      const third = await open(from);
      if (third instanceof WebSocket) third.close();
      return third instanceof WebSocket;
    });
    second!.close();
  });

  it('closes a socket without a live operation after WS_IDLE_TIMEOUT_MS (1000), and keeps one with a subscription', async () => {
    const idle = (await open('127.0.0.9')) as WebSocket;
    const busy = (await open('127.0.0.9', 'limits-idle-watcher')) as WebSocket;
    busy.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: print(RedPacketUpdatedDocument), variables: { packetId } } }));
    const started = Date.now();
    expect(await closed(idle)).toBe(1000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    expect(busy.readyState).toBe(WebSocket.OPEN);
    busy.close();
  });

  it('keeps a socket that sends queries and mutations alone, each live for a moment only', async () => {
    const socket = (await open('127.0.0.11', 'limits-asker')) as WebSocket;
    const ended = closed(socket);
    let answers = 0;
    socket.on('message', (data) => JSON.parse(String(data)).type === 'next' && answers++);
    for (let i = 0; i < 10; i++) {
      socket.send(JSON.stringify({ id: `q${i}`, type: 'subscribe', payload: { query: '{ serverTime }' } }));
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    expect(socket.readyState, 'closed as idle while it asked every 500 ms').toBe(WebSocket.OPEN);
    expect(answers).toBe(10);
    // Once it stops asking, it is idle.
    expect(await ended).toBe(1000);
  });

  it('cuts a socket whose client asks and never reads, once its backlog passes 8 MiB', async () => {
    const socket = (await open('127.0.0.10')) as WebSocket;
    const ended = closed(socket);
    // The client stops reading; each answer names the 30,000-character field it refuses.
    (socket as unknown as { _socket: { pause(): void } })._socket.pause();
    const field = 'x'.repeat(30_000);
    for (let i = 0; i < 1_000; i++) socket.send(JSON.stringify({ id: String(i), type: 'subscribe', payload: { query: `{ ${field} }` } }));
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    (socket as unknown as { _socket: { resume(): void } })._socket.resume();
    expect(await ended).toBe(1006);
  });
});

describe('a client that falls behind', () => {
  /** A socket as the rule sees it: its queue, and whether it was cut. */
  const socketQueuing = (bytes: number) => ({
    bufferedAmount: bytes,
    cut: false,
    terminate() {
      this.cut = true;
    },
  });

  it(`is cut once more than 1 MiB stays queued for ${WS_BACKLOG_GRACE_MS} ms, or ${WS_MAX_BURST_BYTES / 1024 / 1024} MiB at all`, () => {
    // A phone on a slow network, 3 MB behind (two states of a 10,000-share packet).
    const slow = socketQueuing(3_000_000);
    const held = { context: null, busyAtMs: 0 };
    expect(cutIfBacklogged(slow as never, held, 10_000)).toBe(false);
    expect(cutIfBacklogged(slow as never, held, 10_000 + WS_BACKLOG_GRACE_MS - 1)).toBe(false);
    // It caught up: the grace starts again the next time.
    slow.bufferedAmount = 200_000;
    expect(cutIfBacklogged(slow as never, held, 14_000)).toBe(false);
    slow.bufferedAmount = 3_000_000;
    expect(cutIfBacklogged(slow as never, held, 16_000)).toBe(false);
    expect(cutIfBacklogged(slow as never, held, 16_000 + WS_BACKLOG_GRACE_MS)).toBe(true);
    expect(slow.cut).toBe(true);

    const flooded = socketQueuing(WS_MAX_BURST_BYTES + 1);
    expect(cutIfBacklogged(flooded as never, { context: null, busyAtMs: 0 }, 10_000)).toBe(true);
  });
});
