import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrabRedPacketDocument } from './gql/generated.ts';
import { gql } from './support/client.ts';
import { startCuttableProxy, throughProxy } from './support/cuttableProxy.ts';
import { TEST_DATABASE_URL, testEnv } from './support/env.ts';
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

describe('WEB_CONCURRENCY=2, PostgreSQL down when a worker dies', () => {
  const env = testEnv('web_concurrency_outage', { WEB_CONCURRENCY: '2' });
  let server: ServerProcess;
  let stores: Stores;
  let proxy: Awaited<ReturnType<typeof startCuttableProxy>>;

  beforeAll(async () => {
    stores = openStores(env);
    proxy = await startCuttableProxy(new URL(TEST_DATABASE_URL));
    server = await startServerProcess({ ...env.vars, DATABASE_URL: throughProxy(env.vars.DATABASE_URL!, proxy.port) });
  });

  afterAll(async () => {
    await server?.kill();
    await proxy?.close();
    await stores?.cleanup();
  });

  it('keeps the other worker serving, and starts the replacement once PostgreSQL is back', async () => {
    const primary = server.child.pid!;
    const listening = () =>
      server
        .output()
        .split('\n')
        .filter((line) => line.includes('"msg":"listening on')).length;
    await waitFor('two workers listening', async () => listening() === 2, { timeoutMs: 20_000 });
    const [killed, survivor] = await workersOf(primary);
    await proxy.cut();
    process.kill(killed!, 'SIGKILL');
    // The replacement cannot reach PostgreSQL, exits 75, and is tried again later; the survivor serves on.
    await waitFor('a replacement that could not reach PostgreSQL', async () => server.output().includes('a worker could not reach a store'), { timeoutMs: 20_000 });
    expect((await workersOf(primary)).includes(survivor!)).toBe(true);
    const answers = await Promise.all(Array.from({ length: 20 }, () => gql(server.url, '{ __typename }')));
    expect(answers.map((answer) => answer.body.data)).toEqual(Array(20).fill({ __typename: 'Query' }));

    await proxy.restore();
    // A third start: the replacement, listening beside the survivor.
    await waitFor('the replacement listening', async () => listening() === 3, { timeoutMs: 40_000 });
    expect(await workersOf(primary)).toHaveLength(2);
    await waitFor('ready', async () => (await fetch(new URL('/ready', server.url))).status === 200, { timeoutMs: 20_000 });
    expect(server.output()).not.toContain('stopping every worker');
    expect(await stopWithin(server, 20_000)).toBe(0);
  }, 90_000);
});
