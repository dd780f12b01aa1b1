/**
 * Group-buy teams, two parts on the same machine in the same run:
 *
 * Locks: buyers race for the seats of teams of three (two free seats each); a buyer locks a
 * random team that still looks open (another one on TeamFull/TeamClosed) and pays for it.
 *  (a) lockTeamSeat over HTTP, then the provider's signed notify (POST /payments/notify),
 *      each answered after the durable ack (the product),
 *  (b) the same service in this process: Lua scripts + group commit, no HTTP or GraphQL,
 *  (c) the same seat lock in PostgreSQL alone, in this process: SELECT ... FOR UPDATE on the
 *      team row, one transaction per lock and per confirm,
 *  (d) the Lua scripts alone through ioredis, nothing persisted (the ceiling).
 * (b) and (c) are the like-for-like pair: the same layer, Redis + journal against row locks.
 * Fan-out: graphql-ws subscribers spread over teams while locks, releases and confirms run;
 * the delay from each mutation's response to each subscriber's receipt of the state it made,
 * and whether every subscriber ends on the final state.
 *
 * Options: --seats N (default 20000), --connections N (default 200),
 *          --subscribers N (default 5000), --fanout-teams N (default 500),
 *          --only <letters> (the parts to run, of abcd and f for the fan-out; all by default).
 */
import { randomUUID } from 'node:crypto';
import { createClient } from 'graphql-ws';
import { Redis } from 'ioredis';
import pg from 'pg';
import { Agent, request } from 'undici';
import WebSocket from 'ws';
import { createApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { signNotify } from '../../src/domain/payments/provider.ts';
import { TeamClosed, TeamFull } from '../../src/domain/teams/problems.ts';
import { TeamStore, activityKeys } from '../../src/domain/teams/store.ts';
import { createLogger } from '../../src/infra/logger.ts';
import { Scripts } from '../../src/infra/redis/scripts.ts';
import { TEST_DATABASE_URL, TEST_REDIS_URL, type TestEnv, testEnv } from '../../test/support/env.ts';
import { startServerProcess } from '../../test/support/server.ts';
import { openStores } from '../../test/support/stores.ts';
import { activityInApp, activityInput } from '../../test/support/teams.ts';
import { tokenFor } from '../../test/support/tokens.ts';
import { type Measurement, benchServerEnv, machine, measureConcurrent, onlyParts, option, percentile, printRatio, printTable } from '../support.ts';

const CAPACITY = 3;
const SEATS_PER_TEAM = CAPACITY - 1;
/** Teams are opened by this many leaders, each within the activity's cap on open teams. */
const LEADERS = 50;

/** The provider's notify of a payment, signed; the outcome it answered, or null when refused. */
function notifier(graphqlUrl: string, agent: Agent, secret: string) {
  const url = new URL('/payments/notify', graphqlUrl).toString();
  return async ({ paymentRef, amountCents }: { paymentRef: string; amountCents: number }): Promise<string | null> => {
    const body = Buffer.from(JSON.stringify({ paymentRef, amountCents, status: 'SUCCEEDED', providerTxnId: `txn-${paymentRef}` }));
    const response = await request(url, { method: 'POST', dispatcher: agent, headers: { 'payment-signature': signNotify(secret, body, Date.now()) }, body });
    const answer = (await response.body.json()) as { outcome?: string };
    return response.statusCode === 200 ? (answer.outcome ?? null) : null;
  };
}

export async function run(args: string[]): Promise<void> {
  const seats = option(args, 'seats', 20_000);
  const connections = option(args, 'connections', 200);
  const subscribers = option(args, 'subscribers', 5_000);
  const fanoutTeams = option(args, 'fanout-teams', 500);
  const teamCount = Math.ceil(seats / SEATS_PER_TEAM);
  console.log(`teams: ${seats} seats in ${teamCount} teams of ${CAPACITY}, ${connections} in flight; fan-out ${subscribers} subscribers over ${fanoutTeams} teams; ${machine()}`);

  const env = testEnv('bench_tm', { LOG_LEVEL: 'info', RATE_LIMIT_MUTATIONS: '0', ...benchServerEnv() });
  const stores = openStores(env);
  const server = await startServerProcess(env.vars);
  const violations: string[] = [];
  try {
    const run = onlyParts(args, 'abcdf');
    const a = run('a') ? await viaHttp(server.url, env.vars.PAYMENT_WEBHOOK_SECRET!, seats, connections, stores.sql, violations) : undefined;
    const b = run('b') ? await viaService(env, seats, connections, violations) : undefined;
    const c = run('c') ? await viaPostgres(env.schema, seats, connections, violations) : undefined;
    const d = run('d') ? await viaScripts(env.keyPrefix, seats, connections, violations) : undefined;
    console.log();
    printTable([a, b, c, d].filter((part) => part !== undefined));
    console.log();
    printRatio('b/c', b, c, 'Redis + group commit against PostgreSQL row locks, both in process; target ≥ 3');
    printRatio('a/c', a, c, 'the product over HTTP against PostgreSQL row locks in process; target ≥ 1.5');
    printRatio('a/d', a, d, 'share of the script ceiling the full stack reaches');
    console.log();
    if (run('f')) await fanOut(server.url, subscribers, fanoutTeams, violations);
    console.log();
    console.log(`invariant violations: ${violations.length}`);
    for (const violation of violations) console.log(`  - ${violation}`);
  } finally {
    await server.stop();
    await stores.cleanup();
  }
}

type GraphqlBody = { data?: Record<string, Record<string, unknown> | undefined>; errors?: unknown[] };

/**
 * POSTs GraphQL over one undici agent as the token's user. undici's `request`, not `fetch`:
 * the load generator shares the two cores with the server, and fetch's WHATWG objects cost
 * it 413 µs of CPU per request (request: 101 µs), two thirds of what the server spends.
 */
function poster(url: string, agent: Agent) {
  return async (token: string, query: string, variables: Record<string, unknown>): Promise<GraphqlBody> => {
    const response = await request(url, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
    });
    return (await response.body.json()) as GraphqlBody;
  };
}

/** Opens `count` teams, fifty at a time; `openOne` returns the new team's id. */
async function openTeams(count: number, openOne: () => Promise<string>): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < count; i += 50) ids.push(...(await Promise.all(Array.from({ length: Math.min(50, count - i) }, openOne))));
  return ids;
}

/**
 * One buyer's flow against any implementation: lock a team that still looks open, confirm,
 * and look elsewhere when the team turns out full or closed. Returns the requests it made.
 */
async function buy(open: OpenTeams, lock: (teamId: string) => Promise<'locked' | 'full' | 'closed'>, confirm: (teamId: string) => Promise<boolean>): Promise<number> {
  for (let requests = 0; ; ) {
    const teamId = open.pick();
    requests++;
    const locked = await lock(teamId);
    if (locked === 'locked') {
      requests++;
      if (await confirm(teamId)) return requests;
    } else if (locked === 'closed') {
      open.remove(teamId);
    }
  }
}

/**
 * The teams the buyers still see as open, shared by all of them: a random pick and a removal
 * in constant time. (An array's indexOf and splice over 10,000 teams cost the in-process
 * runs 7% of their CPU, more than the service's own team code.)
 */
class OpenTeams {
  private readonly ids: string[];
  private readonly indexOf: Map<string, number>;

  constructor(teamIds: string[]) {
    this.ids = [...teamIds];
    this.indexOf = new Map(this.ids.map((id, index) => [id, index]));
  }

  pick(): string {
    if (this.ids.length === 0) throw new Error('no open team left for a buyer');
    return this.ids[Math.floor(Math.random() * this.ids.length)]!;
  }

  /** Moves the last team into the removed one's place. */
  remove(teamId: string): void {
    const index = this.indexOf.get(teamId);
    if (index === undefined) return;
    const last = this.ids.pop()!;
    this.indexOf.delete(teamId);
    if (last !== teamId) {
      this.ids[index] = last;
      this.indexOf.set(last, index);
    }
  }
}

function buyMeasurement(label: string, seats: number, requests: number, flows: Measurement): Measurement {
  console.log(
    `${label}: ${seats} seats sold in ${flows.seconds.toFixed(1)} s with ${requests} requests (p50/p99 of a whole purchase: ${flows.p50Ms.toFixed(1)}/${flows.p99Ms.toFixed(1)} ms)`,
  );
  return { ...flows, label, operations: requests };
}

/** (a) The product: HTTP + GraphQL + Lua + group commit to PostgreSQL before each response. */
async function viaHttp(url: string, secret: string, seats: number, connections: number, sql: pg.Pool, violations: string[]): Promise<Measurement> {
  const agent = new Agent({ connections, pipelining: 1 });
  const post = poster(url, agent);
  const leaders = await Promise.all(Array.from({ length: LEADERS }, (_, i) => tokenFor(`bench-leader-${i}`)));
  const activityId = `bench-${randomUUID().slice(0, 8)}`;
  const created = await post(await tokenFor('bench-ops', { admin: true }), 'mutation ($input: CreateGroupBuyActivityInput!) { createGroupBuyActivity(input: $input) { id } }', {
    input: activityInput(activityId, { title: 'bench' }),
  });
  if (created.errors) throw new Error(`createGroupBuyActivity: ${JSON.stringify(created.errors)}`);
  let opened = 0;
  const teamIds = await openTeams(Math.ceil(seats / SEATS_PER_TEAM), async () => {
    const body = await post(leaders[opened++ % LEADERS]!, 'mutation ($a: ID!) { openTeam(input: { activityId: $a }) { ... on Team { id } } }', { a: activityId });
    return body.data!.openTeam!.id as string;
  });
  const tokens = await Promise.all(Array.from({ length: seats }, (_, i) => tokenFor(`buyer-${i}`)));
  const payments: { paymentRef: string; amountCents: number }[] = [];
  const notify = notifier(url, agent, secret);
  const open = new OpenTeams(teamIds);
  let requests = 0;
  let errors = 0;
  // Each request's own latency too: a purchase is two or more of them.
  const latencies: number[] = [];
  const timed = async <T>(request: Promise<T>): Promise<T> => {
    const started = performance.now();
    const answer = await request;
    latencies.push(performance.now() - started);
    return answer;
  };
  const flows = await measureConcurrent('(a)', seats, connections, async (i) => {
    const made = await buy(
      open,
      async (teamId) => {
        const body = await timed(post(tokens[i]!, 'mutation ($t: ID!) { lockTeamSeat(teamId: $t) { __typename ... on SeatLocked { payment { paymentRef amountCents } } } }', { t: teamId }));
        if (body.errors) errors++;
        const result = body.data?.lockTeamSeat;
        if (result?.__typename === 'SeatLocked') payments[i] = result.payment as { paymentRef: string; amountCents: number };
        return result?.__typename === 'SeatLocked' ? 'locked' : result?.__typename === 'TeamClosed' ? 'closed' : 'full';
      },
      async () => {
        const outcome = await timed(notify(payments[i]!));
        if (outcome === null) errors++;
        return outcome === 'SEATED';
      },
    );
    requests += made;
  });
  await agent.close();
  if (errors > 0) violations.push(`(a) ${errors} requests answered with errors`);
  const { rows } = await sql.query<{ members: number; complete: number; over: number }>(
    `SELECT (SELECT count(*) FROM team_member)::int AS members,
            (SELECT count(*) FROM team WHERE status = 'COMPLETE')::int AS complete,
            (SELECT count(*) FROM team t WHERE (SELECT count(*) FROM team_member m WHERE m.team_id = t.id) > t.capacity)::int AS over`,
  );
  const row = rows[0]!;
  if (row.members !== seats + teamIds.length) violations.push(`(a) PostgreSQL holds ${row.members} members, expected ${seats + teamIds.length}`);
  if (row.over > 0) violations.push(`(a) ${row.over} teams with more members than seats`);
  if (row.complete !== Math.floor(seats / SEATS_PER_TEAM)) violations.push(`(a) ${row.complete} complete teams`);
  latencies.sort((x, y) => x - y);
  console.log(`(a) per request (a lock or a notify): p50 ${percentile(latencies, 0.5).toFixed(1)} ms, p99 ${percentile(latencies, 0.99).toFixed(1)} ms (target: p99 ≤ 150 ms)`);
  return buyMeasurement('(a) HTTP lock + payment notify, durable ack', seats, requests, flows);
}

/** (b) The service without HTTP: an app instance in this process, its own key prefix, the same database. */
async function viaService(env: TestEnv, seats: number, connections: number, violations: string[]): Promise<Measurement> {
  const config = loadConfig({ ...env.vars, LOG_LEVEL: 'silent', REDIS_KEY_PREFIX: `${env.keyPrefix}service:` });
  const app = await createApp(config, createLogger(config.LOG_LEVEL));
  const activityId = `service-${randomUUID().slice(0, 8)}`;
  await activityInApp(app, activityId, { title: 'bench' });
  let opened = 0;
  const teamIds = await openTeams(Math.ceil(seats / SEATS_PER_TEAM), async () => (await app.teams.open(`service-leader-${opened++ % LEADERS}`, { activityId })).id);
  const payments: string[] = [];
  const open = new OpenTeams(teamIds);
  let requests = 0;
  let joined = 0;
  const flows = await measureConcurrent('(b)', seats, connections, async (i) => {
    const made = await buy(
      open,
      async (teamId) => {
        try {
          payments[i] = (await app.teams.lock(`s${i}`, teamId)).payment.paymentRef;
          return 'locked';
        } catch (error) {
          if (error instanceof TeamClosed) return 'closed';
          if (error instanceof TeamFull) return 'full';
          throw error;
        }
      },
      async (teamId) => {
        if ((await app.teams.payForSeat({ userId: `s${i}`, teamId, paymentRef: payments[i]!, providerTxnId: `txn-${i}` })) === 'late') return false;
        joined++;
        return true;
      },
    );
    requests += made;
  });
  await app.close();
  if (joined !== seats) violations.push(`(b) ${joined} of ${seats} seats confirmed`);
  return buyMeasurement('(b) the service in process, durable ack', seats, requests, flows);
}

/** (d) The ceiling: the lock and confirm scripts alone through ioredis; nothing reaches PostgreSQL. */
export async function viaScripts(keyPrefix: string, seats: number, connections: number, violations: string[]): Promise<Measurement> {
  const redis = new Redis(TEST_REDIS_URL, { keyPrefix: `${keyPrefix}ceiling:` });
  const store = new TeamStore(redis, new Scripts(redis));
  const activityId = 'ceiling';
  const teamIds = Array.from({ length: Math.ceil(seats / SEATS_PER_TEAM) }, () => randomUUID());
  const deadline = new Date(Date.now() + 3600_000);
  await redis.hset(activityKeys(activityId).activity, { groupPriceCents: 990, maxTeamsPerUser: 1000 });
  for (const id of teamIds) {
    await store.write({
      id,
      activityId,
      leaderId: 'leader',
      capacity: CAPACITY,
      lockSeconds: 300,
      deadline,
      status: 'OPEN',
      createdAt: new Date(),
      closedAt: null,
      members: [{ userId: 'leader', paymentRef: null, seat: 1, joinedAt: new Date() }],
    });
  }
  const open = new OpenTeams(teamIds);
  let requests = 0;
  let joined = 0;
  const flows = await measureConcurrent('(d)', seats, connections, async (i) => {
    const made = await buy(
      open,
      async (teamId) => {
        const reply = await store.lock(activityId, teamId, `u${i}`, randomUUID(), '', `pay-${i}`);
        return reply.kind === 'locked' ? 'locked' : reply.kind === 'closed' ? 'closed' : 'full';
      },
      async (teamId) => {
        const reply = await store.confirm(activityId, teamId, `u${i}`, `pay-${i}`, randomUUID(), { providerTxnId: `txn-${i}` });
        if (reply.kind === 'joined') joined++;
        return reply.kind === 'joined';
      },
    );
    requests += made;
  });
  if (joined !== seats) violations.push(`(d) ${joined} of ${seats} seats confirmed`);
  await redis.del(activityKeys(activityId).journal, activityKeys(activityId).activity, activityKeys(activityId).joined);
  redis.disconnect();
  return buyMeasurement('(d) Lua scripts via ioredis (ceiling)', seats, requests, flows);
}

/** (c) What a team without Redis builds: the same seat lock with row locks in PostgreSQL. */
async function viaPostgres(schema: string, seats: number, connections: number, violations: string[]): Promise<Measurement> {
  const pool = new pg.Pool({ connectionString: TEST_DATABASE_URL, max: 20, options: `-c search_path="${schema}"` });
  await pool.query(`
    CREATE TABLE pg_only_team (id text PRIMARY KEY, capacity int NOT NULL, status text NOT NULL DEFAULT 'OPEN');
    CREATE TABLE pg_only_member (team_id text NOT NULL, user_id text NOT NULL, payment_ref text, PRIMARY KEY (team_id, user_id));
    CREATE TABLE pg_only_lock (team_id text NOT NULL, user_id text NOT NULL, expires_at timestamptz NOT NULL, PRIMARY KEY (team_id, user_id));`);
  const teamIds = Array.from({ length: Math.ceil(seats / SEATS_PER_TEAM) }, () => randomUUID());
  await pool.query(`INSERT INTO pg_only_team (id, capacity) SELECT unnest($1::text[]), $2`, [teamIds, CAPACITY]);
  await pool.query(`INSERT INTO pg_only_member (team_id, user_id) SELECT unnest($1::text[]), 'leader'`, [teamIds]);

  const transaction = async <T>(work: (client: pg.PoolClient) => Promise<T>): Promise<T> => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const result = await work(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK');
      throw error;
    } finally {
      client.release();
    }
  };
  const open = new OpenTeams(teamIds);
  let requests = 0;
  const flows = await measureConcurrent('(c)', seats, connections, async (i) => {
    const made = await buy(
      open,
      (teamId) =>
        transaction(async (client) => {
          const { rows } = await client.query<{ capacity: number; status: string }>('SELECT capacity, status FROM pg_only_team WHERE id = $1 FOR UPDATE', [teamId]);
          if (rows[0]!.status !== 'OPEN') return 'closed';
          await client.query('DELETE FROM pg_only_lock WHERE team_id = $1 AND expires_at <= now()', [teamId]);
          const { rows: taken } = await client.query<{ n: number }>(
            `SELECT (SELECT count(*) FROM pg_only_member WHERE team_id = $1) + (SELECT count(*) FROM pg_only_lock WHERE team_id = $1) AS n`,
            [teamId],
          );
          if (Number(taken[0]!.n) >= rows[0]!.capacity) return 'full';
          await client.query(`INSERT INTO pg_only_lock (team_id, user_id, expires_at) VALUES ($1, $2, now() + interval '300 seconds')`, [teamId, `u${i}`]);
          return 'locked';
        }),
      (teamId) =>
        transaction(async (client) => {
          const { rows } = await client.query<{ capacity: number }>('SELECT capacity FROM pg_only_team WHERE id = $1 FOR UPDATE', [teamId]);
          const { rowCount } = await client.query('DELETE FROM pg_only_lock WHERE team_id = $1 AND user_id = $2 AND expires_at > now()', [teamId, `u${i}`]);
          if (rowCount !== 1) return false;
          await client.query('INSERT INTO pg_only_member (team_id, user_id, payment_ref) VALUES ($1, $2, $3)', [teamId, `u${i}`, `pay-${i}`]);
          const { rows: members } = await client.query<{ n: string }>('SELECT count(*) AS n FROM pg_only_member WHERE team_id = $1', [teamId]);
          if (Number(members[0]!.n) >= rows[0]!.capacity) {
            await client.query(`UPDATE pg_only_team SET status = 'COMPLETE' WHERE id = $1`, [teamId]);
            await client.query('DELETE FROM pg_only_lock WHERE team_id = $1', [teamId]);
          }
          return true;
        }),
    );
    requests += made;
  });
  const { rows } = await pool.query<{ n: string }>('SELECT count(*) AS n FROM pg_only_member');
  if (Number(rows[0]!.n) !== seats + teamIds.length) violations.push(`(c) ${rows[0]!.n} members, expected ${seats + teamIds.length}`);
  await pool.end();
  return buyMeasurement('(c) PostgreSQL only, FOR UPDATE', seats, requests, flows);
}

interface Receipt {
  at: number;
  version: number;
}

/**
 * Subscribers over graphql-ws, each on its own socket, spread evenly over teams; a driver
 * locks, releases and confirms on every team. For each mutation, every subscriber of its
 * team is timed from the mutation's response to the first event at least as new.
 */
async function fanOut(url: string, subscribers: number, teamCount: number, violations: string[]): Promise<void> {
  const http = new Agent({ connections: 64, pipelining: 1 });
  const post = poster(url, http);
  const leader = await tokenFor('fanout-leader');
  const operator = await tokenFor('fanout-ops', { admin: true });
  const activityId = `fanout-${randomUUID().slice(0, 8)}`;
  await post(operator, 'mutation ($input: CreateGroupBuyActivityInput!) { createGroupBuyActivity(input: $input) { id } }', {
    input: activityInput(activityId, { title: 'bench', capacity: 6 }),
  });
  const teamIds = await openTeams(teamCount, async () => {
    const body = await post(leader, 'mutation ($a: ID!) { openTeam(input: { activityId: $a }) { ... on Team { id } } }', { a: activityId });
    return body.data!.openTeam!.id as string;
  });

  const watcher = await tokenFor('fanout-watcher');
  const receipts: Receipt[][] = [];
  const clients: ReturnType<typeof createClient>[] = [];
  let ready = 0;
  const subscribed = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`only ${ready} of ${subscribers} subscribers got their first event`)), 120_000);
    for (let s = 0; s < subscribers; s++) {
      const mine: Receipt[] = [];
      receipts.push(mine);
      const client = createClient({ url: url.replace(/^http/, 'ws'), webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${watcher}` }, retryAttempts: 0, lazy: true });
      clients.push(client);
      client.subscribe<{ teamStatus: { version: number } }>(
        { query: 'subscription ($t: ID!) { teamStatus(teamId: $t) { version freeSeats locks { expiresAt } members { userId } } }', variables: { t: teamIds[s % teamIds.length] } },
        {
          next: (event) => {
            if (mine.length === 0 && ++ready === subscribers) {
              clearTimeout(timer);
              resolve();
            }
            if (event.data) mine.push({ at: performance.now(), version: event.data.teamStatus.version });
          },
          error: (error) => violations.push(`subscriber ${s}: ${JSON.stringify(error)}`),
          complete: () => undefined,
        },
      );
    }
  });
  const connectStarted = performance.now();
  await subscribed;
  console.log(`fan-out: ${subscribers} subscribers connected and holding their first state in ${((performance.now() - connectStarted) / 1000).toFixed(1)} s`);

  // Per team, with buyers of its own: two locks, a release, a confirm, another lock and confirm
  // (confirmed by an operator, whose answer carries the team's version).
  const steps: [user: number, action: 'lock' | 'release' | 'confirm'][] = [
    [1, 'lock'],
    [2, 'lock'],
    [2, 'release'],
    [1, 'confirm'],
    [3, 'lock'],
    [3, 'confirm'],
  ];
  const buyers = await Promise.all(teamIds.map((_, team) => Promise.all([1, 2, 3].map((n) => tokenFor(`fanout-buyer-${team}-${n}`)))));
  const mutations: { team: number; at: number; version: number }[] = [];
  let failures = 0;
  const started = performance.now();
  await Promise.all(
    teamIds.map(async (teamId, team) => {
      // Teams run side by side; each team's steps are in order, as one team's buyers act in turn.
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 2000));
      for (const [user, action] of steps) {
        const token = buyers[team]![user - 1]!;
        const body =
          action === 'lock'
            ? await post(token, 'mutation ($t: ID!) { lockTeamSeat(teamId: $t) { ... on SeatLocked { team { version } } } }', { t: teamId })
            : action === 'release'
              ? await post(token, 'mutation ($t: ID!) { releaseTeamSeat(teamId: $t) { version } }', { t: teamId })
              : await post(operator, 'mutation ($t: ID!, $u: ID!, $p: String!) { confirmTeamSeat(teamId: $t, userId: $u, paymentRef: $p) { ... on Team { version } } }', {
                  t: teamId,
                  u: `fanout-buyer-${team}-${user}`,
                  p: `fan-${user}-${teamId}`,
                });
        const at = performance.now();
        const result = body.data ? Object.values(body.data)[0] : undefined;
        const version = (result as { version?: number; team?: { version: number } } | undefined)?.version ?? (result as { team?: { version: number } })?.team?.version;
        if (body.errors || version === undefined) {
          failures++;
          continue;
        }
        mutations.push({ team, at, version });
      }
    }),
  );
  const driveSeconds = (performance.now() - started) / 1000;

  // Let the last events arrive, then read every team's final version.
  const finals = new Map<number, number>();
  const finalDeadline = performance.now() + 10_000;
  for (;;) {
    const states = await Promise.all(teamIds.map((id) => post(watcher, 'query ($t: ID!) { team(id: $t) { version } }', { t: id })));
    for (const [team, body] of states.entries()) finals.set(team, (body.data!.team as { version: number }).version);
    const behind = receipts.filter((mine, s) => (mine.at(-1)?.version ?? 0) < finals.get(s % teamIds.length)!).length;
    if (behind === 0 || performance.now() > finalDeadline) {
      if (behind > 0) violations.push(`fan-out: ${behind} subscribers never received their team's final state`);
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }

  const delays: number[] = [];
  let missing = 0;
  for (const mutation of mutations) {
    for (let s = mutation.team; s < subscribers; s += teamIds.length) {
      const receipt = receipts[s]!.find((r) => r.version >= mutation.version);
      if (!receipt) missing++;
      // An event can overtake the mutation's own response; that counts as no delay.
      else delays.push(Math.max(0, receipt.at - mutation.at));
    }
  }
  delays.sort((x, y) => x - y);
  for (const client of clients) void client.dispose();
  await http.close();
  if (failures > 0) violations.push(`fan-out: ${failures} mutations failed`);
  if (missing > 0) violations.push(`fan-out: ${missing} (mutation, subscriber) pairs without a matching event`);
  const events = receipts.reduce((sum, mine) => sum + mine.length, 0);
  console.log(
    `fan-out: ${mutations.length} mutations in ${driveSeconds.toFixed(1)} s (${(mutations.length / driveSeconds).toFixed(0)}/s), ${events} events received, ${delays.length} deliveries timed`,
  );
  console.log(
    `fan-out delivery after the mutation's response: p50 ${percentile(delays, 0.5).toFixed(1)} ms, p99 ${percentile(delays, 0.99).toFixed(1)} ms, max ${(delays.at(-1) ?? Number.NaN).toFixed(1)} ms (target: p99 < 250 ms)`,
  );
}
