import { pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { projectFile } from '../src/projectFiles.ts';
import { gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { sleep } from './support/poll.ts';
import { type RedPacketsClient, redPacketsAt } from './support/redPackets.ts';
import { tokenOf } from './support/tokens.ts';

// The server's own clock lags Redis's by 10 s (test/support/laggingClock.mjs): grabs are
// judged by Redis time, so everything it says about time must be too.
const LAG_MS = 10_000;
const env = testEnv('rp_clock', {
  NODE_OPTIONS: `--import=${pathToFileURL(projectFile('test/support/laggingClock.mjs')).href}`,
  CLOCK_LAG_MS: String(LAG_MS),
});
const started = startedServer(env);
let redPackets: RedPacketsClient;

beforeAll(() => {
  redPackets = redPacketsAt(started.server.url);
});

interface Read {
  redPacket: { status: string; expiresAt: string; serverTime: string };
  me: { redPacketsSent: { nodes: { id: string; status: string }[] } };
}

describe('an instance whose clock lags Redis', () => {
  it('reports a packet EXPIRED as soon as grabs through it are refused, alone and in a list', async () => {
    const packet = await redPackets.create('clock-sender', { totalAmount: 500, count: 5, expiresInSeconds: 1 });
    expect(packet.status).toBe('ACTIVE');
    // This process's clock is the machine's, which Redis's is too.
    await sleep(Date.parse(packet.expiresAt) + 100 - Date.now());
    expect((await redPackets.grab('clock-late', packet.id)).__typename).toBe('RedPacketExpired');

    const { body } = await gql<Read, { id: string }>(
      started.server.url,
      'query ($id: ID!) { redPacket(id: $id) { status expiresAt serverTime } me { redPacketsSent(first: 1) { nodes { id status } } } }',
      { id: packet.id },
      await tokenOf('clock-sender', { admin: true }),
    );
    expect(body.errors).toBeUndefined();
    const { redPacket, me } = body.data!;
    // Well within the lag: the instance's own clock is still before the expiry.
    expect(Date.parse(redPacket.serverTime) - Date.parse(redPacket.expiresAt)).toBeLessThan(LAG_MS / 2);
    expect(redPacket.status).toBe('EXPIRED');
    expect(me.redPacketsSent.nodes).toEqual([{ id: packet.id, status: 'EXPIRED' }]);
  });
});
