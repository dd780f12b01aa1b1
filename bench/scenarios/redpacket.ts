/**
 * The red-packet grab three ways, on the same machine in the same run:
 *  (a) grabRedPacket over HTTP with the durable ack (the product): each grab commits with
 *      its credit to the grabber's wallet, in one statement per batch,
 *  (b) the same Lua script through ioredis alone (the ceiling),
 *  (c) the grab in PostgreSQL alone, one transaction with FOR UPDATE SKIP LOCKED,
 *  (d) the project's service in process (script + group commit with the wallet credit,
 *      no HTTP), the like-for-like partner of (c), which has no HTTP either.
 * The packets are shop-funded (an operator creates them), so no sender needs a wallet;
 * every grab must be credited once, which the run checks at the end.
 * Options: --grabs N (default 100000), --connections N (default 200).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { splitAmount } from '../../src/domain/redPackets/split.ts';
import { RedPacketStore, redPacketKeys } from '../../src/domain/redPackets/store.ts';
import { createLogger } from '../../src/infra/logger.ts';
import type { RedisClient } from '../../src/infra/redis/connection.ts';
import { Scripts } from '../../src/infra/redis/scripts.ts';
import { TEST_DATABASE_URL, TEST_REDIS_URL, testEnv } from '../../test/support/env.ts';
import { startServerProcess } from '../../test/support/server.ts';
import { openStores } from '../../test/support/stores.ts';
import { tokenFor } from '../../test/support/tokens.ts';
import { type Measurement, machine, measureConcurrent, option, perSecond, printTable, signedInPosts } from '../support.ts';

const MAX_SHARES_PER_PACKET = 10_000;
const PACKET_TOTAL = 1_000_000;

export async function run(args: string[]): Promise<void> {
  const grabs = option(args, 'grabs', 100_000);
  const connections = option(args, 'connections', 200);
  const packets = Math.ceil(grabs / MAX_SHARES_PER_PACKET);
  const usersPerPacket = Math.min(grabs, MAX_SHARES_PER_PACKET);
  console.log(`red-packet grab: ${grabs} grabs over ${packets} packets of ${usersPerPacket} shares, ${connections} connections; ${machine()}`);

  const env = testEnv('bench_rp', { LOG_LEVEL: 'info', RATE_LIMIT_MUTATIONS: '0' });
  const stores = openStores(env);
  const server = await startServerProcess(env.vars);
  const violations: string[] = [];
  try {
    const a = await viaHttp(server.url, grabs, connections, packets, usersPerPacket, stores.sql, violations);
    const ceiling = new Redis(TEST_REDIS_URL, { keyPrefix: env.keyPrefix });
    const b = await viaScript(ceiling, grabs, connections, violations);
    ceiling.disconnect();
    const c = await viaPostgres(env.schema, grabs, connections, violations);
    const d = await viaService(env.vars, Math.min(grabs, MAX_SHARES_PER_PACKET * 3), connections, violations);
    await expectCredited(stores.sql, violations);
    console.log();
    printTable([a, b, c, d]);
    console.log();
    console.log(`a/b = ${(perSecond(a) / perSecond(b)).toFixed(2)}  (share of the script ceiling the full stack reaches)`);
    console.log(`a/c = ${(perSecond(a) / perSecond(c)).toFixed(2)}  (the product over HTTP against PostgreSQL alone without HTTP)`);
    console.log(`d/c = ${(perSecond(d) / perSecond(c)).toFixed(2)}  (Redis + group commit against PostgreSQL alone, both in process)`);
    console.log(`invariant violations: ${violations.length}`);
    for (const violation of violations) console.log(`  - ${violation}`);
  } finally {
    await server.stop();
    await stores.cleanup();
  }
}

/** (a) The product: HTTP + GraphQL + Lua + group commit to PostgreSQL before the response. */
async function viaHttp(url: string, grabs: number, connections: number, packets: number, usersPerPacket: number, sql: pg.Pool, violations: string[]): Promise<Measurement> {
  const sender = await tokenFor('bench-sender', { admin: true });
  const packetIds: string[] = [];
  for (let p = 0; p < packets; p++) {
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${sender}` },
      body: JSON.stringify({
        query: `mutation { createRedPacket(input: { totalAmount: ${PACKET_TOTAL}, count: ${usersPerPacket}, mode: RANDOM, fundedBy: SHOP }) { ... on RedPacket { id } } }`,
      }),
    });
    packetIds.push(((await response.json()) as { data: { createRedPacket: { id: string } } }).data.createRedPacket.id);
  }
  const tokens = await Promise.all(Array.from({ length: usersPerPacket }, (_, i) => tokenFor(`bench-user-${i}`)));
  const bodies = packetIds.map((id) => JSON.stringify({ query: `mutation { grabRedPacket(packetId: "${id}") { __typename ... on GrabbedShare { amount } } }` }));

  let granted = 0;
  let other = 0;
  const { result, measurement } = await signedInPosts('(a) HTTP grabRedPacket, durable ack', {
    url,
    connections,
    amount: grabs,
    request: (i) => ({ body: bodies[Math.floor(i / usersPerPacket) % bodies.length]!, token: tokens[i % usersPerPacket]! }),
    onResponse: (status, body) => {
      if (status === 200 && body.includes('GrabbedShare')) granted++;
      else other++;
    },
  });
  if (result.errors > 0 || result.non2xx > 0) violations.push(`(a) ${result.errors} errors, ${result.non2xx} non-2xx responses`);
  if (granted !== grabs) violations.push(`(a) ${granted} grabs granted, expected ${grabs} (${other} other replies)`);
  const { rows } = await sql.query<{ n: string; total: string }>('SELECT count(*) AS n, COALESCE(sum(amount), 0) AS total FROM red_packet_grab');
  if (Number(rows[0]!.n) !== granted) violations.push(`(a) PostgreSQL holds ${rows[0]!.n} grabs, clients were acknowledged ${granted}`);
  if (granted === grabs && Number(rows[0]!.total) !== packets * PACKET_TOTAL) violations.push(`(a) granted amounts sum to ${rows[0]!.total}`);
  return measurement;
}

/** Every durable grab of (a) and (d) is credited once, to its grabber, with its amount. */
async function expectCredited(sql: pg.Pool, violations: string[]): Promise<void> {
  const { rows } = await sql.query<{ uncredited: number; credited: string; grabbed: string }>(`
    SELECT count(*) FILTER (WHERE l.entry_key IS NULL OR l.user_id <> g.user_id OR l.delta_cents <> g.amount)::int AS uncredited,
           COALESCE(SUM(l.delta_cents), 0) AS credited, COALESCE(SUM(g.amount), 0) AS grabbed
    FROM red_packet_grab g LEFT JOIN wallet_ledger l ON l.entry_key = 'grab:' || g.id`);
  const { rows: balances } = await sql.query<{ wallets: string }>('SELECT COALESCE(SUM(balance_cents), 0) AS wallets FROM wallet_account');
  const { uncredited, credited, grabbed } = rows[0]!;
  if (uncredited > 0 || credited !== grabbed || balances[0]!.wallets !== grabbed) {
    violations.push(`wallet credits: ${uncredited} grabs not credited as grabbed; credited ${credited}, grabbed ${grabbed}, wallets hold ${balances[0]!.wallets}`);
  }
}

/** (b) The ceiling: the grab script alone through ioredis (one server's or a cluster's client), no GraphQL, no PostgreSQL. */
export async function viaScript(redis: RedisClient, grabs: number, connections: number, violations: string[]): Promise<Measurement> {
  const scripts = new Scripts(redis);
  const store = new RedPacketStore(redis, scripts);
  const packetId = `ceiling-${randomUUID()}`;
  await store.write({
    id: packetId,
    senderId: 'bench',
    fundedBy: 'SHOP',
    totalAmount: grabs * 100,
    count: grabs,
    mode: 'EQUAL',
    greeting: null,
    expiresAt: new Date(Date.now() + 3600_000),
    shareAmounts: splitAmount({ totalAmount: grabs * 100, count: grabs, minAmount: 1, maxAmount: grabs * 100, mode: 'EQUAL' }),
    refundedAmount: null,
    grabs: [],
  });
  let granted = 0;
  const measurement = await measureConcurrent('(b) Lua script via ioredis (ceiling)', grabs, connections, async (i) => {
    const reply = await store.grab(packetId, `u${i}`, randomUUID());
    if (reply.kind === 'granted') granted++;
  });
  if (granted !== grabs) violations.push(`(b) ${granted} of ${grabs} script grabs granted`);
  const keys = redPacketKeys(packetId);
  await redis.del(keys.meta, keys.shares, keys.grabs, keys.journal);
  return measurement;
}

/** (c) What a team without Redis builds: one transaction per grab in PostgreSQL. */
async function viaPostgres(schema: string, grabs: number, connections: number, violations: string[]): Promise<Measurement> {
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 20, options: `-c search_path="${schema}"` });
  await pool.query(`
    CREATE TABLE pg_only_share (packet_id text NOT NULL, share_index int NOT NULL, amount int NOT NULL, user_id text, grabbed_at timestamptz,
      PRIMARY KEY (packet_id, share_index));
    CREATE UNIQUE INDEX pg_only_share_user ON pg_only_share (packet_id, user_id);
    CREATE INDEX pg_only_share_free ON pg_only_share (packet_id) WHERE user_id IS NULL;`);
  const shares = splitAmount({ totalAmount: grabs * 100, count: grabs, minAmount: 1, maxAmount: grabs * 100, mode: 'EQUAL' });
  await pool.query(`INSERT INTO pg_only_share (packet_id, share_index, amount) SELECT 'p', i - 1, a FROM unnest($1::int[]) WITH ORDINALITY AS t(a, i)`, [shares]);
  let granted = 0;
  const measurement = await measureConcurrent('(c) PostgreSQL only, SKIP LOCKED', grabs, connections, async (i) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query(
        `UPDATE pg_only_share SET user_id = $1, grabbed_at = now()
         WHERE (packet_id, share_index) = (
           SELECT packet_id, share_index FROM pg_only_share WHERE packet_id = 'p' AND user_id IS NULL
           AND NOT EXISTS (SELECT 1 FROM pg_only_share WHERE packet_id = 'p' AND user_id = $1)
           LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING amount`,
        [`u${i}`],
      );
      await client.query('COMMIT');
      if (rows.length === 1) granted++;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  });
  if (granted !== grabs) violations.push(`(c) ${granted} of ${grabs} PostgreSQL grabs granted`);
  await pool.end();
  return measurement;
}

/** (d) RedPacketService.grab in this process: the Lua script, the group commit and the durable ack, without HTTP. */
async function viaService(vars: Record<string, string>, grabs: number, connections: number, violations: string[]): Promise<Measurement> {
  const app = await createApp(loadConfig({ ...process.env, ...vars }), createLogger('warn'));
  try {
    const packets = Math.ceil(grabs / MAX_SHARES_PER_PACKET);
    const packetIds: string[] = [];
    for (let p = 0; p < packets; p++) {
      const packet = await app.redPackets.create('bench-sender', {
        totalAmount: PACKET_TOTAL,
        count: MAX_SHARES_PER_PACKET,
        mode: 'RANDOM',
        minAmount: 1,
        maxAmount: null,
        expiresInSeconds: 3600,
        greeting: null,
        fundedBy: 'SHOP',
      });
      packetIds.push(packet.id);
    }
    let granted = 0;
    const measurement = await measureConcurrent('(d) service in process, durable ack', grabs, connections, async (i) => {
      await app.redPackets.grab(`service-user-${i % MAX_SHARES_PER_PACKET}`, packetIds[Math.floor(i / MAX_SHARES_PER_PACKET)]!);
      granted++;
    });
    if (granted !== grabs) violations.push(`(d) ${granted} of ${grabs} service grabs granted`);
    return measurement;
  } finally {
    await app.close();
  }
}
