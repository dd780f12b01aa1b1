/**
 * The GraphQL-over-HTTP floor: what one request costs before any campaign work.
 * The same requests against two servers started alike, one with the fast lane
 * (plain JSON POSTs served next to Yoga, src/fastLane.ts) and one where Yoga serves all:
 *  - `{ __typename }` with a signed-in token (parse, validate, auth, execute, serialize);
 *  - a grab of a packet that does not exist (adds the mutation rate-limit hook and one
 *    Redis round trip, writes nothing).
 * Each user's token is verified once before the timed runs, as a page load would.
 * Options: --requests N (default 50000), --connections N (default 200).
 */

import { testEnv } from '../../test/support/env.ts';
import { startServerProcess } from '../../test/support/server.ts';
import { openStores } from '../../test/support/stores.ts';
import { tokenFor } from '../../test/support/tokens.ts';
import { type Measurement, machine, option, perSecond, printTable, signedInPosts } from '../support.ts';

const USERS = 2_000;

export async function run(args: string[]): Promise<void> {
  const requests = option(args, 'requests', 50_000);
  const connections = option(args, 'connections', 200);
  console.log(`GraphQL over HTTP: ${requests} requests per run, ${connections} connections, ${USERS} users; ${machine()}`);
  const env = testEnv('bench_http', { RATE_LIMIT_MUTATIONS: '1000000' });
  const stores = openStores(env);
  const tokens = await Promise.all(Array.from({ length: USERS }, (_, i) => tokenFor(`bench-http-${i}`)));
  const measurements: Measurement[] = [];
  try {
    for (const lane of ['1', '0']) {
      const server = await startServerProcess({ ...env.vars, GRAPHQL_FAST_LANE: lane });
      const name = lane === '1' ? 'fast lane' : 'Yoga';
      try {
        await Promise.all(tokens.map((token) => post(server.url, token, '{ __typename }')));
        for (const [what, query] of [
          ['{ __typename }', '{ __typename }'],
          ['grab of an unknown packet', 'mutation { grabRedPacket(packetId: "no-such-packet") { __typename } }'],
        ] as const) {
          measurements.push(await measure(`${name}: ${what}`, server.url, query, tokens, requests, connections));
        }
      } finally {
        await server.stop();
      }
    }
  } finally {
    await stores.cleanup();
  }
  console.log();
  printTable(measurements);
  console.log();
  const [fastTypename, fastGrab, yogaTypename, yogaGrab] = measurements.map(perSecond) as [number, number, number, number];
  console.log(`fast lane / Yoga, { __typename }: ${(fastTypename / yogaTypename).toFixed(2)}`);
  console.log(`fast lane / Yoga, unknown grab:   ${(fastGrab / yogaGrab).toFixed(2)}`);
}

async function post(url: string, token: string, query: string): Promise<void> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query }),
  });
  if (!response.ok) throw new Error(`warm-up answered ${response.status}`);
  await response.arrayBuffer();
}

async function measure(label: string, url: string, query: string, tokens: string[], amount: number, connections: number): Promise<Measurement> {
  const body = JSON.stringify({ query });
  let failed = 0;
  const { measurement, result } = await signedInPosts(label, {
    url,
    connections,
    amount,
    request: (i) => ({ body, token: tokens[i % tokens.length]! }),
    onResponse: (status, responseBody) => {
      if (status !== 200 || responseBody.includes('"errors"')) failed++;
    },
  });
  if (failed > 0 || result.errors > 0) throw new Error(`${label}: ${failed} failed responses, ${result.errors} connection errors`);
  return measurement;
}
