import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { RedPacketStore, redPacketKeys } from '../src/domain/redPackets/store.ts';
import { Scripts } from '../src/infra/redis/scripts.ts';
import { GrabRedPacketDocument, type GrabRedPacketMutation } from './gql/generated.ts';
import type { GraphqlResponse } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { startedServer } from './support/lifecycle.ts';
import { sleep, waitFor } from './support/poll.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { type RedPacketsClient, redPacketsAt } from './support/redPackets.ts';
import { loseKeysAtOnce } from './support/stores.ts';
import { signAhead } from './support/tokens.ts';

// The sweeper takes the poisoned entries while the storm's grabs are being group-committed;
// a longer batch wait puts them in the same group commits on a slow shared machine too.
const env = testEnv('rp_poison', { JOURNAL_SWEEP_AFTER_MS: '300', SWEEP_INTERVAL_MS: '100', JOURNAL_BATCH_WAIT_MS: '100' });
const started = startedServer(env);
const POISONED = 5;
let redPackets: RedPacketsClient;

beforeAll(() => {
  redPackets = redPacketsAt(started.server.url);
});

type Answer = { user: string; response: GraphqlResponse<GrabRedPacketMutation> };

/** Grabs for `users`, `connections` at a time, until they run out or `stopAt.index` is reached. */
async function storm(packetId: string, users: string[], connections: number, answers: Answer[], stopAt: { index: number }): Promise<void> {
  await signAhead(users);
  let next = 0;
  const worker = async () => {
    while (next < Math.min(users.length, stopAt.index)) {
      const index = next++;
      answers.push({ user: users[index]!, response: await redPackets.raw(GrabRedPacketDocument, { packetId }, users[index]!) });
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
}

/** Every answer is a share, one per user; returns user -> amount. */
function expectShares(answers: Answer[]): Map<string, number> {
  const won = new Map<string, number>();
  for (const { user, response } of answers) {
    expect(response.body.errors, `${user}: ${JSON.stringify(response.body.errors)}`).toBeUndefined();
    const result = response.body.data!.grabRedPacket;
    expect(result.__typename).toBe('GrabbedShare');
    if (result.__typename === 'GrabbedShare') won.set(user, result.amount);
  }
  expect(won.size).toBe(answers.length);
  return won;
}

async function durableGrabs(packetId: string): Promise<Map<string, number>> {
  const { rows } = await started.stores.sql.query<{ user_id: string; amount: number }>('SELECT user_id, amount FROM red_packet_grab WHERE packet_id = $1', [packetId]);
  return new Map(rows.map((row) => [row.user_id, row.amount]));
}

describe('a journal entry poisoned by hand during a storm of grabs', () => {
  it('is dead-lettered while every healthy grab commits; Redis and PostgreSQL agree, and a Redis loss afterwards rebuilds cleanly', async () => {
    const COUNT = 3_000;
    const sender = 'poison-sender';
    const packet = await redPackets.create(sender, { totalAmount: COUNT * 50, count: COUNT, mode: 'RANDOM' });
    const keys = redPacketKeys(packet.id);

    const answers: Answer[] = [];
    const stopAt = { index: Number.POSITIVE_INFINITY };
    const users = Array.from({ length: 2_500 }, (_, i) => `poison-storm-${i}`);
    const storming = storm(packet.id, users, 100, answers, stopAt);
    await waitFor('the storm to be under way', () => answers.length >= 200, { intervalMs: 20 });

    // Grabs straight through Redis, bypassing GraphQL: the real script takes a share for a
    // user id PostgreSQL cannot store (22021), and journals it; no caller will commit it.
    // A few, spread out, so that the sweeper's group commits of them meet the storm's.
    const scripts = new Scripts(started.stores.redis);
    const poisoned = new Map<string, string>();
    for (let i = 0; i < POISONED; i++) {
      const user = `poison\u0000${randomUUID()}`;
      // After a dead letter the packet's keys are dropped until a grab of the storm rebuilds them.
      const reply = await waitFor(
        'the packet to be in Redis',
        async () => {
          const answer = await new RedPacketStore(started.stores.redis, scripts).grab(packet.id, user, randomUUID());
          return answer.kind !== 'missing' && answer;
        },
        { intervalMs: 10 },
      );
      expect(reply.kind).toBe('granted');
      poisoned.set(reply.kind === 'granted' ? reply.entry.id : '', user);
      await sleep(120);
    }

    // The storm goes on until the sweeper has dead-lettered them, and a while after.
    const letters = await waitFor(
      'the poisoned entries to be dead-lettered',
      async () => {
        const { rows } = await started.stores.sql.query<{ entry_id: string; fields: string; error_code: string }>(
          'SELECT entry_id, fields, error_code FROM journal_dead_letter WHERE stream = $1',
          [keys.journal],
        );
        return rows.length === POISONED && rows;
      },
      { timeoutMs: 20_000, intervalMs: 50 },
    ).finally(() => (stopAt.index = answers.length + 300));
    await storming;
    expect(answers.length).toBeGreaterThan(500);

    for (const letter of letters) {
      expect(letter.error_code).toBe('22021');
      expect(JSON.parse(letter.fields)).toMatchObject({ kind: 'redPacket.grab', user: poisoned.get(letter.entry_id), packet: packet.id });
    }

    // Every healthy grab was acknowledged, and exactly those are durable.
    const won = expectShares(answers);
    expect(await durableGrabs(packet.id)).toEqual(won);
    await waitFor('the journal to be empty', async () => (await started.stores.redis.xlen(keys.journal)) === 0);

    // The poisoned share went back to the packet: Redis, rebuilt from PostgreSQL, agrees with it.
    const redPacket = await redPackets.packet(sender, packet.id);
    expect(redPacket?.remainingCount).toBe(COUNT - won.size);
    await expectRedPacketInvariants(started.stores, packet.id);

    // One log line names each entry, and no group commit failed.
    const lines = started.server.output().split('\n');
    for (const entryId of poisoned.keys()) expect(lines.filter((line) => line.includes(entryId))).toHaveLength(1);
    expect(lines.filter((line) => line.includes('group commit failed'))).toEqual([]);

    // Redis then loses the packet: the next grabs rebuild it from PostgreSQL and go on.
    expect(await loseKeysAtOnce(started.stores.redis, env.keyPrefix, `{rp:${packet.id}}*`)).toBeGreaterThan(0);
    const later: Answer[] = [];
    await storm(
      packet.id,
      Array.from({ length: 200 }, (_, i) => `after-loss-${i}`),
      100,
      later,
      { index: Number.POSITIVE_INFINITY },
    );
    const wonLater = expectShares(later);
    expect(await durableGrabs(packet.id)).toEqual(new Map([...won, ...wonLater]));
    const after = await redPackets.packet(sender, packet.id);
    expect(after?.remainingCount).toBe(COUNT - won.size - wonLater.size);
    await expectRedPacketInvariants(started.stores, packet.id);
  });
});
