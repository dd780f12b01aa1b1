/**
 * Points redemption three ways, on the same machine in the same run:
 *  (a) redeemPoints over HTTP with the durable ack (the product): Lua script, then the group commit;
 *  (b) the redemption in PostgreSQL alone: one transaction per redemption with a conditional
 *      UPDATE on the balance, a voucher code taken with FOR UPDATE SKIP LOCKED, the redemption
 *      row, and a conditional UPDATE on the stock last (the hot row, so its lock is held shortest);
 *  (c) the redeem script alone through ioredis (the ceiling; nothing persisted);
 *  (d) the service of (a) in this process, without HTTP and GraphQL: the like-for-like pair with (b).
 * (a), (b) and (d) hand out codes of pools of 10,000, one pool after the other (everyone hits the same item).
 * Options: --redemptions N (default 100000), --connections N (default 200), --users N (default 10000),
 *          --only <letters> (the parts to run; all by default).
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { MAX_VOUCHER_CODES } from '../../src/domain/points/input.ts';
import { PointsStore } from '../../src/domain/points/store.ts';
import { createLogger } from '../../src/infra/logger.ts';
import type { RedisClient } from '../../src/infra/redis/connection.ts';
import { Scripts } from '../../src/infra/redis/scripts.ts';
import { TEST_DATABASE_URL, TEST_REDIS_URL, testEnv } from '../../test/support/env.ts';
import { pointsAt, voucherCodes } from '../../test/support/points.ts';
import { startServerProcess } from '../../test/support/server.ts';
import { deleteKeys, openStores } from '../../test/support/stores.ts';
import { tokenFor } from '../../test/support/tokens.ts';
import { type Measurement, benchServerEnv, machine, measureConcurrent, onlyParts, option, printRatio, printTable, signedInPosts } from '../support.ts';

export const COST = 10;
const SETUP_CONCURRENCY = 50;

export async function run(args: string[]): Promise<void> {
  const redemptions = option(args, 'redemptions', 100_000);
  const connections = option(args, 'connections', 200);
  const users = Math.min(option(args, 'users', 10_000), redemptions);
  const pools = Math.ceil(redemptions / MAX_VOUCHER_CODES);
  // Each user can afford exactly their share of the redemptions.
  const award = COST * Math.ceil(redemptions / users);
  console.log(`points redemption: ${redemptions} redemptions by ${users} users from ${pools} pools of ${MAX_VOUCHER_CODES} codes, ${connections} connections; ${machine()}`);

  const env = testEnv('bench_points', { RATE_LIMIT_MUTATIONS: '0', ...benchServerEnv() });
  const stores = openStores(env);
  const server = await startServerProcess(env.vars);
  const violations: string[] = [];
  try {
    const shape = { redemptions, connections, users, pools, award };
    const run = onlyParts(args, 'abcd');
    const a = run('a') ? await viaHttp(server.url, shape, stores.sql, violations) : undefined;
    const b = run('b') ? await viaPostgres(env.schema, shape, violations) : undefined;
    const ceiling = new Redis(TEST_REDIS_URL, { keyPrefix: `${env.keyPrefix}ceiling:` });
    const c = run('c') ? await viaScript(ceiling, `${env.keyPrefix}ceiling:`, shape, violations) : undefined;
    ceiling.disconnect();
    const d = run('d') ? await viaService(env.vars, shape, violations) : undefined;
    console.log();
    printTable([a, b, c, d].filter((part) => part !== undefined));
    console.log();
    printRatio('a/b', a, b, 'the product over HTTP against PostgreSQL alone; target ≥ 4');
    printRatio('d/b', d, b, 'Redis + group commit against PostgreSQL alone, both in process');
    printRatio('a/c', a, c, 'share of the script ceiling the full stack reaches');
    if (a) console.log(`target for (a): p99 ≤ 60 ms at ${connections} connections: ${a.p99Ms <= 60 ? 'met' : 'not met'}`);
    console.log(`invariant violations: ${violations.length}`);
    for (const violation of violations) console.log(`  - ${violation}`);
  } finally {
    await server.stop();
    await stores.cleanup();
  }
}

export interface Shape {
  redemptions: number;
  connections: number;
  users: number;
  pools: number;
  award: number;
}

const userId = (i: number) => `bench-user-${i}`;

/** (a) The product: HTTP + GraphQL + Lua + group commit to PostgreSQL before the response. */
async function viaHttp(url: string, shape: Shape, sql: pg.Pool, violations: string[]): Promise<Measurement> {
  const shop = pointsAt(url);
  const goodsIds: string[] = [];
  for (let p = 0; p < shape.pools; p++) {
    const codes = voucherCodes(`BENCH${p}`, MAX_VOUCHER_CODES);
    goodsIds.push((await shop.createGoods('operator', { title: `card ${p}`, pointsCost: COST, stock: codes.length, voucherCodes: codes })).id);
  }
  // Awarding also loads each balance into Redis, as a shop's first day would before its rush.
  await measureConcurrent('awards', shape.users, SETUP_CONCURRENCY, (i) => shop.award('operator', { userId: userId(i), amount: shape.award }));
  const tokens = await Promise.all(Array.from({ length: shape.users }, (_, i) => tokenFor(userId(i))));
  const query = 'mutation ($goodsId: ID!, $requestId: String!) { redeemPoints(goodsId: $goodsId, requestId: $requestId) { __typename ... on Redemption { voucherCode } } }';

  let granted = 0;
  let other = 0;
  const { result, measurement } = await signedInPosts('(a) HTTP redeemPoints, durable ack', {
    url,
    connections: shape.connections,
    amount: shape.redemptions,
    request: (i) => ({
      body: JSON.stringify({ query, variables: { goodsId: goodsIds[Math.floor(i / MAX_VOUCHER_CODES)], requestId: `bench-${i}` } }),
      token: tokens[i % shape.users]!,
    }),
    onResponse: (status, body) => {
      if (status === 200 && body.includes('"__typename":"Redemption"')) granted++;
      else other++;
    },
  });
  if (result.errors > 0 || result.non2xx > 0) violations.push(`(a) ${result.errors} errors, ${result.non2xx} non-2xx responses`);
  if (granted !== shape.redemptions) violations.push(`(a) ${granted} redemptions granted, expected ${shape.redemptions} (${other} other replies)`);
  const { rows } = await sql.query<{ n: string; codes: string; spent: string; balances: string }>(
    `SELECT count(*) AS n, count(DISTINCT voucher_code) AS codes, COALESCE(sum(points_spent), 0) AS spent,
            (SELECT sum(balance) FROM points_account) AS balances
     FROM redemption`,
  );
  const durable = rows[0]!;
  if (Number(durable.n) !== granted) violations.push(`(a) PostgreSQL holds ${durable.n} redemptions, clients were acknowledged ${granted}`);
  if (Number(durable.codes) !== Number(durable.n)) violations.push(`(a) ${durable.codes} distinct codes in ${durable.n} redemptions`);
  if (Number(durable.spent) + Number(durable.balances) !== shape.users * shape.award) violations.push(`(a) points spent + balances = ${Number(durable.spent) + Number(durable.balances)}`);
  return measurement;
}

/** (b) What a team without Redis builds: one transaction per redemption in PostgreSQL. */
async function viaPostgres(schema: string, shape: Shape, violations: string[]): Promise<Measurement> {
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 20, options: `-c search_path="${schema}"` });
  await pool.query(`
    CREATE TABLE pg_only_account (user_id text PRIMARY KEY, balance int NOT NULL CHECK (balance >= 0));
    CREATE TABLE pg_only_goods (id text PRIMARY KEY, points_cost int NOT NULL, remaining int NOT NULL CHECK (remaining >= 0));
    CREATE TABLE pg_only_code (code text PRIMARY KEY, goods_id text NOT NULL, position int NOT NULL, redemption_id text);
    CREATE INDEX pg_only_code_free ON pg_only_code (goods_id, position) WHERE redemption_id IS NULL;
    CREATE TABLE pg_only_redemption (id bigserial PRIMARY KEY, user_id text NOT NULL, goods_id text NOT NULL, request_id text NOT NULL,
      voucher_code text NOT NULL UNIQUE, created_at timestamptz NOT NULL DEFAULT now(), UNIQUE (user_id, request_id));`);
  await pool.query('INSERT INTO pg_only_account SELECT $1 || i, $2 FROM generate_series(0, $3 - 1) AS i', ['bench-user-', shape.award, shape.users]);
  for (let p = 0; p < shape.pools; p++) {
    await pool.query('INSERT INTO pg_only_goods VALUES ($1, $2, $3)', [`g${p}`, COST, MAX_VOUCHER_CODES]);
    await pool.query('INSERT INTO pg_only_code SELECT c, $1, i FROM unnest($2::text[]) WITH ORDINALITY AS t(c, i)', [`g${p}`, voucherCodes(`PG${p}`, MAX_VOUCHER_CODES)]);
  }

  let granted = 0;
  const measurement = await measureConcurrent('(b) PostgreSQL only, conditional UPDATEs', shape.redemptions, shape.connections, async (i) => {
    const goodsId = `g${Math.floor(i / MAX_VOUCHER_CODES)}`;
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const paid = await client.query('UPDATE pg_only_account SET balance = balance - $2 WHERE user_id = $1 AND balance >= $2', [userId(i % shape.users), COST]);
      const code = await client.query<{ code: string }>(
        `UPDATE pg_only_code SET redemption_id = $2 WHERE code = (
           SELECT code FROM pg_only_code WHERE goods_id = $1 AND redemption_id IS NULL ORDER BY position LIMIT 1 FOR UPDATE SKIP LOCKED)
         RETURNING code`,
        [goodsId, `r${i}`],
      );
      if (paid.rowCount !== 1 || code.rowCount !== 1) {
        await client.query('ROLLBACK');
        return;
      }
      await client.query('INSERT INTO pg_only_redemption (user_id, goods_id, request_id, voucher_code) VALUES ($1, $2, $3, $4)', [
        userId(i % shape.users),
        goodsId,
        `bench-${i}`,
        code.rows[0]!.code,
      ]);
      const taken = await client.query('UPDATE pg_only_goods SET remaining = remaining - 1 WHERE id = $1 AND remaining > 0', [goodsId]);
      if (taken.rowCount !== 1) {
        await client.query('ROLLBACK');
        return;
      }
      await client.query('COMMIT');
      granted++;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  });
  if (granted !== shape.redemptions) violations.push(`(b) ${granted} of ${shape.redemptions} PostgreSQL redemptions granted`);
  await pool.end();
  return measurement;
}

/**
 * (c) The ceiling: the redeem script alone, on keys of its own (`redis` prefixes them with
 * `keyPrefix`, which no server sweeps), nothing persisted. One server's client or a cluster's.
 */
export async function viaScript(redis: RedisClient, keyPrefix: string, shape: Shape, violations: string[]): Promise<Measurement> {
  const store = new PointsStore(redis, new Scripts(redis), 1);
  const goodsId = randomUUID();
  const codes = voucherCodes('CEILING', shape.redemptions);
  await store.writeGoods({
    id: goodsId,
    bucket: 0,
    pointsCost: COST,
    perUserLimit: 0,
    pooled: true,
    onSale: true,
    saleStartsAtMs: null,
    saleEndsAtMs: null,
    stock: codes.length,
    remaining: codes.length,
    freeCodes: codes,
    lastSeqByUser: {},
    givenTransfers: [],
  });
  const nowMs = Date.now();
  for (let i = 0; i < shape.users; i++) await store.writeBalance({ userId: userId(i), balance: shape.award, recent: [], settledDraws: [], drawHolds: [] }, nowMs);
  let granted = 0;
  const measurement = await measureConcurrent('(c) Lua script via ioredis (ceiling)', shape.redemptions, shape.connections, async (i) => {
    const reply = await store.redeem(userId(i % shape.users), goodsId, `ceiling-${i}`, randomUUID(), false);
    if (reply.kind === 'redeemed') granted++;
  });
  if (granted !== shape.redemptions) violations.push(`(c) ${granted} of ${shape.redemptions} script redemptions granted`);
  await deleteKeys(redis, keyPrefix);
  return measurement;
}

/** (d) The service of (a) in this process, as another instance of the same deployment. */
async function viaService(vars: Record<string, string>, shape: Shape, violations: string[]): Promise<Measurement> {
  const config = loadConfig({ ...vars, LOG_LEVEL: 'warn' });
  const app = await createApp(config, createLogger(config.LOG_LEVEL));
  try {
    const goodsIds: string[] = [];
    for (let p = 0; p < shape.pools; p++) {
      const codes = voucherCodes(`SERVICE${p}`, MAX_VOUCHER_CODES);
      goodsIds.push((await app.points.createGoods('bench', { title: `card ${p}`, pointsCost: COST, stock: codes.length, perUserLimit: 0, voucherCodes: codes })).id);
    }
    await measureConcurrent('awards', shape.users, SETUP_CONCURRENCY, (i) => app.points.award({ userId: userId(i), amount: shape.award, reason: 'bench', requestId: `service-award-${i}` }));
    let granted = 0;
    const measurement = await measureConcurrent('(d) the service in process, durable ack', shape.redemptions, shape.connections, async (i) => {
      await app.points.redeem(userId(i % shape.users), goodsIds[Math.floor(i / MAX_VOUCHER_CODES)]!, `service-${i}`);
      granted++;
    });
    if (granted !== shape.redemptions) violations.push(`(d) ${granted} of ${shape.redemptions} redemptions granted`);
    return measurement;
  } finally {
    await app.close();
  }
}
