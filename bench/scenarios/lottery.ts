/**
 * The lottery draw, on the same machine in the same run:
 *  (a) drawLottery over HTTP with the durable ack, WEIGHTED (the product),
 *  (b) the same for a TIMED activity (releases plus the consolation prize),
 *  (c) the WEIGHTED draw script alone through ioredis (the ceiling),
 *  (d) the WEIGHTED draw in PostgreSQL alone: one transaction per draw with SELECT ... FOR
 *      UPDATE on the prize stock rows and the user's daily counters.
 * Options: --draws N (default 100000, per scenario), --connections N (default 200),
 * --users N (default 10000).
 */
import { randomInt, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { chooseWeighted } from '../../src/domain/lottery/choice.ts';
import { DRAW_RANDOM_RANGE } from '../../src/domain/lottery/settings.ts';
import { LotteryStore, lotteryKeys } from '../../src/domain/lottery/store.ts';
import type { RedisClient } from '../../src/infra/redis/connection.ts';
import { Scripts } from '../../src/infra/redis/scripts.ts';
import { TEST_DATABASE_URL, TEST_REDIS_URL, testEnv } from '../../test/support/env.ts';
import { weightedSettings, writeActivity } from '../../test/support/lotterySettings.ts';
import { startServerProcess } from '../../test/support/server.ts';
import { openStores } from '../../test/support/stores.ts';
import { tokenFor } from '../../test/support/tokens.ts';
import { type Measurement, machine, measureConcurrent, option, perSecond, printTable, signedInPosts } from '../support.ts';

const WEIGHTS = [1, 3, 6, 10, 20, 60];
const NO_PRIZE_WEIGHT = 100;
const STOCK = 10_000_000;

export async function run(args: string[]): Promise<void> {
  const draws = option(args, 'draws', 100_000);
  const connections = option(args, 'connections', 200);
  const users = option(args, 'users', 10_000);
  console.log(`lottery draw: ${draws} draws per scenario by ${users} users, ${connections} connections, weights [${WEIGHTS}] + no prize ${NO_PRIZE_WEIGHT}; ${machine()}`);

  const env = testEnv('bench_lot', { LOG_LEVEL: 'info', RATE_LIMIT_MUTATIONS: '0' });
  const stores = openStores(env);
  const server = await startServerProcess(env.vars);
  const violations: string[] = [];
  try {
    const tokens = await Promise.all(Array.from({ length: users }, (_, i) => tokenFor(`bench-user-${i}`)));
    const admin = await tokenFor('bench-op', { admin: true });
    const weighted = await createActivity(server.url, admin, 'WEIGHTED');
    const timed = await createActivity(server.url, admin, 'TIMED');
    const a = await viaHttp('(a) HTTP drawLottery WEIGHTED, durable ack', server.url, weighted, tokens, draws, connections, stores.sql, violations);
    const b = await viaHttp('(b) HTTP drawLottery TIMED, durable ack', server.url, timed, tokens, draws, connections, stores.sql, violations);
    const ceiling = new Redis(TEST_REDIS_URL, { keyPrefix: env.keyPrefix });
    const c = await viaScript(ceiling, draws, connections, users, violations);
    ceiling.disconnect();
    const d = await viaPostgres(env.schema, draws, connections, users, violations);
    console.log();
    printTable([a, b, c, d]);
    console.log();
    console.log(`a/c = ${(perSecond(a) / perSecond(c)).toFixed(2)}  (share of the script ceiling the full stack reaches)`);
    console.log(`a/d = ${(perSecond(a) / perSecond(d)).toFixed(2)}  (Redis + group commit against PostgreSQL alone; target ≥ 4)`);
    console.log(`b/d = ${(perSecond(b) / perSecond(d)).toFixed(2)}`);
    console.log(`invariant violations: ${violations.length}`);
    for (const violation of violations) console.log(`  - ${violation}`);
  } finally {
    await server.stop();
    await stores.cleanup();
  }
}

export async function createActivity(url: string, admin: string, strategy: 'WEIGHTED' | 'TIMED', drawCostPoints = 0): Promise<string> {
  const now = Date.now();
  const prizes =
    strategy === 'WEIGHTED'
      ? WEIGHTS.map((weight, i) => `{ title: "prize ${i}", weight: ${weight}, totalStock: ${STOCK} }`)
      : [`{ title: "gold", totalStock: ${STOCK}, hourlyQuota: [${Array(24).fill(100)}] }`, `{ title: "thanks", kind: CONSOLATION, totalStock: ${STOCK} }`];
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${admin}` },
    body: JSON.stringify({
      query: `mutation { createLotteryActivity(input: { title: "bench", strategy: ${strategy}, noPrizeWeight: ${strategy === 'WEIGHTED' ? NO_PRIZE_WEIGHT : 0}, drawCostPoints: ${drawCostPoints},
        startsAt: "${new Date(now - 60_000).toISOString()}", endsAt: "${new Date(now + 86_400_000).toISOString()}", prizes: [${prizes.join(', ')}] }) { id } }`,
    }),
  });
  const body = (await response.json()) as { data?: { createLotteryActivity: { id: string } }; errors?: unknown };
  if (!body.data) throw new Error(`could not create the ${strategy} activity: ${JSON.stringify(body.errors)}`);
  return body.data.createLotteryActivity.id;
}

/** (a), (b) The product: HTTP + GraphQL + Lua + group commit to PostgreSQL before the response. */
export async function viaHttp(
  label: string,
  url: string,
  activityId: string,
  tokens: string[],
  draws: number,
  connections: number,
  sql: pg.Pool,
  violations: string[],
): Promise<Measurement> {
  const body = JSON.stringify({ query: `mutation { drawLottery(activityId: "${activityId}") { __typename ... on LotteryWin { prize { id } } } }` });
  let drawn = 0;
  let other = 0;
  const { result, measurement } = await signedInPosts(label, {
    url,
    connections,
    amount: draws,
    request: (i) => ({ body, token: tokens[i % tokens.length]! }),
    onResponse: (status, response) => {
      if (status === 200 && /"(LotteryWin|LotteryLose)"/.test(response)) drawn++;
      else other++;
    },
  });
  if (result.errors > 0 || result.non2xx > 0) violations.push(`${label}: ${result.errors} errors, ${result.non2xx} non-2xx responses`);
  if (drawn !== draws) violations.push(`${label}: ${drawn} draws answered, expected ${draws} (${other} other replies)`);
  const { rows } = await sql.query<{ n: string }>('SELECT count(*) AS n FROM lottery_draw WHERE activity_id = $1', [activityId]);
  if (Number(rows[0]!.n) !== drawn) violations.push(`${label}: PostgreSQL holds ${rows[0]!.n} draws, clients were acknowledged ${drawn}`);
  return measurement;
}

/** (c) The ceiling: the draw script alone through ioredis (one server's or a cluster's client), no GraphQL, no PostgreSQL. */
export async function viaScript(redis: RedisClient, draws: number, connections: number, users: number, violations: string[]): Promise<Measurement> {
  const store = new LotteryStore(redis, new Scripts(redis));
  const activityId = `ceiling-${randomUUID()}`;
  await writeActivity(
    store,
    activityId,
    weightedSettings(WEIGHTS, NO_PRIZE_WEIGHT, () => STOCK),
  );
  let drawn = 0;
  const measurement = await measureConcurrent('(c) Lua draw script via ioredis (ceiling)', draws, connections, async (i) => {
    const reply = await store.draw({ activityId, userId: `u${i % users}`, drawId: randomUUID(), requestId: null, randomInput: randomInt(0, DRAW_RANDOM_RANGE), clockOffsetMs: 0 });
    if (reply.kind === 'drawn') drawn++;
  });
  if (drawn < draws * 0.999) violations.push(`(c) ${drawn} of ${draws} script draws drawn`);
  const keys = lotteryKeys(activityId);
  await redis.del(keys.meta, keys.stock, keys.daily, keys.journal);
  return measurement;
}

/** (d) What a team without Redis builds: the whole draw in one PostgreSQL transaction, under row locks. */
async function viaPostgres(schema: string, draws: number, connections: number, users: number, violations: string[]): Promise<Measurement> {
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 20, options: `-c search_path="${schema}"` });
  await pool.query(`
    CREATE TABLE pg_only_prize (position int PRIMARY KEY, weight int NOT NULL, stock int NOT NULL);
    CREATE TABLE pg_only_user_day (user_id text NOT NULL, day date NOT NULL, draws int NOT NULL DEFAULT 0, wins int NOT NULL DEFAULT 0, PRIMARY KEY (user_id, day));
    CREATE TABLE pg_only_draw (id uuid PRIMARY KEY, user_id text NOT NULL, day date NOT NULL, prize int, random_input bigint NOT NULL, drawn_at timestamptz NOT NULL DEFAULT now());`);
  await pool.query('INSERT INTO pg_only_prize (position, weight, stock) SELECT i - 1, w, $2 FROM unnest($1::int[]) WITH ORDINALITY AS t(w, i)', [WEIGHTS, STOCK]);
  let drawn = 0;
  const measurement = await measureConcurrent('(d) PostgreSQL only, FOR UPDATE', draws, connections, async (i) => {
    const user = `u${i % users}`;
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('INSERT INTO pg_only_user_day (user_id, day) VALUES ($1, current_date) ON CONFLICT DO NOTHING', [user]);
      await client.query('SELECT draws, wins FROM pg_only_user_day WHERE user_id = $1 AND day = current_date FOR UPDATE', [user]);
      // The choice needs every prize's stock as of this draw: lock them all, in one order.
      const { rows: prizes } = await client.query<{ position: number; weight: number; stock: number }>('SELECT position, weight, stock FROM pg_only_prize ORDER BY position FOR UPDATE');
      const available = prizes.filter((prize) => prize.weight > 0 && prize.stock > 0);
      let randomInput: number;
      let choice: ReturnType<typeof chooseWeighted>;
      do {
        randomInput = randomInt(0, DRAW_RANDOM_RANGE);
        choice = chooseWeighted(
          available.map((prize) => prize.weight),
          NO_PRIZE_WEIGHT,
          randomInput,
        );
      } while (choice.kind === 'reroll');
      const won = choice.index === null ? null : available[choice.index]!.position;
      if (won !== null) await client.query('UPDATE pg_only_prize SET stock = stock - 1 WHERE position = $1', [won]);
      await client.query('UPDATE pg_only_user_day SET draws = draws + 1, wins = wins + $2 WHERE user_id = $1 AND day = current_date', [user, won === null ? 0 : 1]);
      await client.query('INSERT INTO pg_only_draw (id, user_id, day, prize, random_input) VALUES ($1, $2, current_date, $3, $4)', [randomUUID(), user, won, randomInput]);
      await client.query('COMMIT');
      drawn++;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  });
  if (drawn !== draws) violations.push(`(d) ${drawn} of ${draws} PostgreSQL draws committed`);
  await pool.end();
  return measurement;
}
