/**
 * The paid draw against the free draw, on the same server in the same run:
 *  (a) drawLottery over HTTP with the durable ack, WEIGHTED, free (as `lottery` (a)),
 *  (b) the same activity shape with drawCostPoints = 1: reserve in {shop} (journaled and
 *      committed), then the draw, whose commit also writes the payment and the ledger debit.
 * Options: --draws N (default 20000, per scenario), --connections N (default 200),
 * --users N (default 2000).
 */
import { testEnv } from '../../test/support/env.ts';
import { startServerProcess } from '../../test/support/server.ts';
import { openStores } from '../../test/support/stores.ts';
import { tokenFor } from '../../test/support/tokens.ts';
import { machine, option, perSecond, printTable } from '../support.ts';
import { createActivity, viaHttp } from './lottery.ts';

const COST = 1;

export async function run(args: string[]): Promise<void> {
  const draws = option(args, 'draws', 20_000);
  const connections = option(args, 'connections', 200);
  const users = option(args, 'users', 2000);
  console.log(`paid draw: ${draws} draws per scenario by ${users} users, ${connections} connections, cost ${COST} point; ${machine()}`);

  const env = testEnv('bench_paid', { LOG_LEVEL: 'info', RATE_LIMIT_MUTATIONS: '0' });
  const stores = openStores(env);
  const server = await startServerProcess(env.vars);
  const violations: string[] = [];
  try {
    const tokens = await Promise.all(Array.from({ length: users }, (_, i) => tokenFor(`bench-user-${i}`)));
    const admin = await tokenFor('bench-op', { admin: true });
    // Enough points for every paid draw, with room to spare.
    const award = Math.ceil(draws / users) * COST * 2;
    for (let i = 0; i < users; i++) await awardPoints(server.url, admin, `bench-user-${i}`, award);
    const free = await createActivity(server.url, admin, 'WEIGHTED');
    const paid = await createActivity(server.url, admin, 'WEIGHTED', COST);
    const a = await viaHttp('(a) HTTP drawLottery, free', server.url, free, tokens, draws, connections, stores.sql, violations);
    const b = await viaHttp(`(b) HTTP drawLottery, ${COST} point`, server.url, paid, tokens, draws, connections, stores.sql, violations);
    const { rows } = await stores.sql.query<{ paid: string; debits: string }>(
      `SELECT (SELECT count(*) FROM draw_payment WHERE activity_id = $1 AND status = 'PAID') AS paid,
              (SELECT count(*) FROM points_ledger l JOIN lottery_draw d ON d.id = l.draw_id WHERE d.activity_id = $1 AND l.reason = 'lottery draw') AS debits`,
      [paid],
    );
    if (Number(rows[0]!.paid) !== draws || Number(rows[0]!.debits) !== draws) violations.push(`(b) ${rows[0]!.paid} payments and ${rows[0]!.debits} debits for ${draws} draws`);
    console.log();
    printTable([a, b]);
    console.log();
    console.log(`b/a = ${(perSecond(b) / perSecond(a)).toFixed(2)}  (the paid draw's throughput against the free draw's)`);
    console.log(`invariant violations: ${violations.length}`);
    for (const violation of violations) console.log(`  - ${violation}`);
  } finally {
    await server.stop();
    await stores.cleanup();
  }
}

async function awardPoints(url: string, admin: string, userId: string, amount: number): Promise<void> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${admin}` },
    body: JSON.stringify({ query: `mutation { awardPoints(userId: "${userId}", amount: ${amount}, reason: "bench", requestId: "bench-${userId}") }` }),
  });
  const body = (await response.json()) as { errors?: unknown };
  if (body.errors) throw new Error(`could not award ${userId}: ${JSON.stringify(body.errors)}`);
}
