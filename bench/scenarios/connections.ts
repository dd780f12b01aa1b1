/**
 * Bursts of new connections, as a flash crowd opening its pages makes them: `--burst`
 * clients connect at once and each sends one signed-in grab of a packet that does not
 * exist (one Redis round trip, nothing written); the time to each one's answer, counted
 * from the start of the burst. Each server takes one burst idle, then one while
 * `--connections` keep-alive clients keep it busy with the same grab.
 *
 * Two servers started alike, alternating for `--rounds`: HTTP_ACCEPTORS=1 (Node's one
 * listening descriptor, which libuv accepts on once per event-loop turn) and the default
 * (src/acceptors.ts).
 * Options: --burst N (default 500), --connections N (default 200), --rounds N (default 2).
 */
import { connect } from 'node:net';
import { Agent, request } from 'undici';
import { testEnv } from '../../test/support/env.ts';
import { startServerProcess } from '../../test/support/server.ts';
import { openStores } from '../../test/support/stores.ts';
import { tokenFor } from '../../test/support/tokens.ts';
import { benchServerEnv, machine, option, percentile } from '../support.ts';

const USERS = 2_000;
const BUSY_BEFORE_BURST_MS = 3_000;
const GRAB = JSON.stringify({ query: 'mutation { grabRedPacket(packetId: "no-such-packet") { __typename } }' });

interface Burst {
  label: string;
  p50Ms: number;
  p90Ms: number;
  maxMs: number;
}

export async function run(args: string[]): Promise<void> {
  const burstSize = option(args, 'burst', 500);
  const connections = option(args, 'connections', 200);
  const rounds = option(args, 'rounds', 2);
  console.log(`connection bursts: ${burstSize} new connections at once, idle and beside ${connections} busy ones; ${machine()}`);
  const env = testEnv('bench_connections', { RATE_LIMIT_MUTATIONS: '1000000000' });
  const stores = openStores(env);
  const tokens = await Promise.all(Array.from({ length: USERS }, (_, i) => tokenFor(`bench-connections-${i}`)));
  const bursts: Burst[] = [];
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const acceptors of ['1', 'default']) {
        const server = await startServerProcess({ ...env.vars, ...benchServerEnv(), ...(acceptors === '1' ? { HTTP_ACCEPTORS: '1' } : {}) });
        try {
          // Every token verified once, as a page load would: the bursts time connections, not signatures.
          const warm = new Agent({ connections: 50 });
          await Promise.all(tokens.map((token) => grab(server.url, token, warm)));
          await warm.close();
          const name = `HTTP_ACCEPTORS=${acceptors}, round ${round}`;
          bursts.push(await burst(`${name}, idle`, server.port, tokens, burstSize));
          bursts.push(await busyBurst(`${name}, busy`, server, tokens, burstSize, connections));
        } finally {
          await server.stop();
        }
      }
    }
  } finally {
    await stores.cleanup();
  }
  console.log();
  printBursts(bursts);
  console.log();
  for (const state of ['idle', 'busy']) {
    const of = (acceptors: string) => bursts.filter((b) => b.label.startsWith(`HTTP_ACCEPTORS=${acceptors},`) && b.label.endsWith(state));
    const mean = (list: Burst[], key: 'p90Ms' | 'maxMs') => list.reduce((sum, b) => sum + b[key], 0) / list.length;
    const [one, many] = [of('1'), of('default')];
    console.log(`${state}: one descriptor / default, p90 ${(mean(one, 'p90Ms') / mean(many, 'p90Ms')).toFixed(2)}, max ${(mean(one, 'maxMs') / mean(many, 'maxMs')).toFixed(2)}`);
  }
}

async function grab(url: string, token: string, dispatcher: Agent): Promise<void> {
  const response = await request(url, {
    dispatcher,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: GRAB,
  });
  const text = await response.body.text();
  if (response.statusCode !== 200 || text.includes('"errors"')) throw new Error(`a grab was answered ${response.statusCode}: ${text}`);
}

/** `size` sockets opened at once, each sending one grab; resolves with the times to their answers. */
async function burst(label: string, port: number, tokens: string[], size: number): Promise<Burst> {
  const started = performance.now();
  const times = await Promise.all(
    Array.from(
      { length: size },
      (_, i) =>
        new Promise<number>((resolve, reject) => {
          const socket = connect(port, '127.0.0.1');
          const head = `POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAuthorization: Bearer ${tokens[i % tokens.length]}\r\nContent-Length: ${Buffer.byteLength(GRAB)}\r\n\r\n`;
          socket.once('connect', () => socket.write(head + GRAB));
          socket.once('data', (chunk) => {
            const answeredMs = performance.now() - started;
            socket.destroy();
            if (chunk.toString().startsWith('HTTP/1.1 200')) resolve(answeredMs);
            else reject(new Error(`${label}: answered ${chunk.toString().split('\r\n')[0]}`));
          });
          socket.once('error', reject);
        }),
    ),
  );
  times.sort((a, b) => a - b);
  return { label, p50Ms: percentile(times, 0.5), p90Ms: percentile(times, 0.9), maxMs: times.at(-1)! };
}

/** A burst while `connections` keep-alive clients grab as fast as they are answered. */
async function busyBurst(label: string, server: { url: string; port: number }, tokens: string[], size: number, connections: number): Promise<Burst> {
  const dispatcher = new Agent({ connections });
  let busy = true;
  const load = Promise.all(
    Array.from({ length: connections }, async (_, i) => {
      while (busy) await grab(server.url, tokens[i % tokens.length]!, dispatcher);
    }),
  );
  try {
    await new Promise((resolve) => setTimeout(resolve, BUSY_BEFORE_BURST_MS));
    return await burst(label, server.port, tokens, size);
  } finally {
    busy = false;
    await load;
    await dispatcher.close();
  }
}

function printBursts(bursts: Burst[]): void {
  const width = Math.max(...bursts.map((b) => b.label.length));
  console.log(`${'burst'.padEnd(width)}  p50 ms  p90 ms  max ms`);
  for (const b of bursts) {
    console.log(`${b.label.padEnd(width)}  ${b.p50Ms.toFixed(0).padStart(6)}  ${b.p90Ms.toFixed(0).padStart(6)}  ${b.maxMs.toFixed(0).padStart(6)}`);
  }
}
