import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrabRedPacketDocument } from './gql/generated.ts';
import { gql } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopWithin } from './support/lifecycle.ts';
import { waitFor } from './support/poll.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { signAhead } from './support/tokens.ts';

const workersOf = async (pid: number) => (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')).trim().split(/\s+/).filter(Boolean).map(Number);

describe('WEB_CONCURRENCY=2', () => {
  const env = testEnv('web_concurrency', { WEB_CONCURRENCY: '2' });
  let server: ServerProcess;
  let stores: Stores;

  beforeAll(async () => {
    stores = openStores(env);
    server = await startServerProcess(env.vars);
  });

  afterAll(async () => {
    await server?.kill();
    await stores?.cleanup();
  });

  it('serves a storm from two workers on one port, replaces a killed worker, and stops with every acknowledged grab durable', async () => {
    const primary = server.child.pid!;
    await waitFor('two workers', async () => (await workersOf(primary)).length === 2, { timeoutMs: 20_000 });
    const [killed] = await workersOf(primary);

    const redPackets = redPacketsAt(server.url);
    const packet = await redPackets.create('workers-sender', { totalAmount: 10_000, count: 200 });
    const users = Array.from({ length: 300 }, (_, i) => `workers-user-${i}`);
    await signAhead(users);
    const won = new Map<string, number>();
    await Promise.all(
      users.map(async (user) => {
        const result = (await redPackets.raw(GrabRedPacketDocument, { packetId: packet.id }, user)).body.data?.grabRedPacket;
        if (result?.__typename === 'GrabbedShare') won.set(user, result.amount);
      }),
    );
    expect(won.size).toBe(200);

    // A worker that dies is replaced, and the port keeps answering meanwhile.
    process.kill(killed!, 'SIGKILL');
    await waitFor(
      'a replacement worker',
      async () => {
        const workers = await workersOf(primary);
        return workers.length === 2 && !workers.includes(killed!);
      },
      { timeoutMs: 20_000 },
    );
    const answers = await Promise.all(Array.from({ length: 50 }, () => gql(server.url, '{ __typename }')));
    expect(answers.map((answer) => answer.body.data)).toEqual(Array(50).fill({ __typename: 'Query' }));
    // Repeats, whichever worker answers them: no share twice, and no one served twice.
    const repeats = await Promise.all(users.map(async (user) => (await redPackets.raw(GrabRedPacketDocument, { packetId: packet.id }, user)).body.data?.grabRedPacket?.__typename));
    expect(repeats.filter((typename) => typename === 'AlreadyGrabbed')).toHaveLength(200);
    expect(repeats.filter((typename) => typename === 'RedPacketEmpty')).toHaveLength(100);

    expect(await stopWithin(server, 20_000)).toBe(0);
    expect(server.output()).toContain('worker died; starting another');
    expect(server.output()).not.toContain('shutdown failed');
    const durable = new Map((await expectRedPacketInvariants(stores, packet.id)).map((row) => [row.user_id, row.amount]));
    expect(durable).toEqual(won);
  });
});
