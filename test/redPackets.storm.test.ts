import { describe, expect, it } from 'vitest';
import { GrabRedPacketDocument } from './gql/generated.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { signAhead } from './support/tokens.ts';

const env = testEnv('rp_storm');
const started = startedServer(env);

describe('a storm of grabs', () => {
  it('hands out exactly 500 shares to 1,000 users firing 2,000 grabs at once', async () => {
    const TOTAL = 88_888;
    const redPackets = redPacketsAt(started.server.url);
    const packet = await redPackets.create('sender', { totalAmount: TOTAL, count: 500, mode: 'RANDOM' });

    const users = Array.from({ length: 1000 }, (_, i) => `storm-user-${i}`);
    await signAhead(users);
    const attempts = [...users, ...users].sort(() => Math.random() - 0.5);

    const results = await Promise.all(attempts.map(async (user) => ({ user, response: await redPackets.raw(GrabRedPacketDocument, { packetId: packet.id }, user) })));

    const byType = new Map<string, number>();
    const wonBy = new Map<string, number>();
    for (const { user, response } of results) {
      expect(response.body.errors, JSON.stringify(response.body.errors)).toBeUndefined();
      const result = response.body.data!.grabRedPacket;
      byType.set(result.__typename, (byType.get(result.__typename) ?? 0) + 1);
      if (result.__typename === 'GrabbedShare') {
        expect(wonBy.has(user), `${user} won twice`).toBe(false);
        wonBy.set(user, result.amount);
      }
    }
    expect(byType.get('GrabbedShare')).toBe(500);
    expect([...byType.keys()].sort()).toEqual(expect.arrayContaining(['GrabbedShare']));
    for (const type of byType.keys()) expect(['GrabbedShare', 'AlreadyGrabbed', 'RedPacketEmpty']).toContain(type);
    expect([...wonBy.values()].reduce((a, b) => a + b, 0)).toBe(TOTAL);

    // A user's second grab reports the share the first one won.
    for (const { user, response } of results) {
      const result = response.body.data!.grabRedPacket;
      if (result.__typename === 'AlreadyGrabbed') expect(result.share.amount).toBe(wonBy.get(user));
    }

    // Every acknowledged grab is already in PostgreSQL, and Redis agrees.
    const grabs = await expectRedPacketInvariants(started.stores, packet.id);
    expect(grabs).toHaveLength(500);
    expect(new Map(grabs.map((grab) => [grab.user_id, grab.amount]))).toEqual(wonBy);

    const redPacket = await redPackets.packet('sender', packet.id);
    expect(redPacket?.status).toBe('EMPTY');
    expect(redPacket?.remainingAmount).toBe(0);
    expect(redPacket?.shares).toHaveLength(500);
    expect(redPacket?.bestLuck?.amount).toBe(Math.max(...wonBy.values()));
  });
});
