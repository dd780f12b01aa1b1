import { readFile } from 'node:fs/promises';
import { print } from 'graphql';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { signToken } from '../src/infra/auth/tokens.ts';
import { metricsAccess } from '../src/metrics.ts';
import { RedPacketUpdatedDocument } from './gql/generated.ts';
import { errorCodes, gql, openWs } from './support/client.ts';
import { TEST_JWT_SECRET, testEnv } from './support/env.ts';
import { lotteryAt } from './support/lottery.ts';
import { sendNotify } from './support/payments.ts';
import { webDocumentId } from './support/persistedDocuments.ts';
import { pointsAt, voucherCodes } from './support/points.ts';
import { sleep, waitFor } from './support/poll.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcesses } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { type As, tokenOf } from './support/tokens.ts';
import { WebhookReceiver } from './support/webhookReceiver.ts';

// Anonymous reads are limited to 2 per window, so the third within it is RATE_LIMITED.
const env = testEnv('metrics', { LOG_LEVEL: 'debug', RATE_LIMIT_ANONYMOUS: '2', RATE_LIMIT_WINDOW_MS: '60000' });
const METRICS_TOKEN = 'metrics-token-of-the-test-0123456789';
let server: ServerProcess;
let production: ServerProcess;
let stores: Stores;
// Takes the vouchers of both servers; a test holds one to keep its redemption waiting.
const fulfilment = new WebhookReceiver<unknown>();

beforeAll(async () => {
  stores = openStores(env);
  env.vars.POINTS_DELIVERY_WEBHOOK_URL = await fulfilment.start('/vouchers');
  env.vars.POINTS_DELIVERY_WEBHOOK_SECRET = 'metrics-voucher-webhook-secret-0123456789';
  // The production server counts no anonymous budget: it shares the other's, which the rate-limit test uses up.
  [server, production] = await startServerProcesses([env.vars, { ...env.vars, NODE_ENV: 'production', LOG_LEVEL: 'info', METRICS_TOKEN, RATE_LIMIT_ANONYMOUS: '0' }]);
}, 90_000);

afterAll(async () => {
  await Promise.all([server?.stop(), production?.stop()]);
  await fulfilment.close();
  await stores?.cleanup();
});

function metricsUrl(target: ServerProcess): string {
  return new URL('/metrics', target.url).toString();
}

async function scrape(target: ServerProcess = server): Promise<string> {
  const response = await fetch(metricsUrl(target));
  expect(response.status).toBe(200);
  return response.text();
}

/** A POST of any body, query text or a documentId, as `user` or anonymous. */
async function post(body: Record<string, unknown>, user?: string, as: As = {}): Promise<{ data?: Record<string, unknown> | null; errors?: unknown[] }> {
  const token = user === undefined ? undefined : await tokenOf(user, as);
  const response = await fetch(server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  });
  return (await response.json()) as { data?: Record<string, unknown> | null; errors?: unknown[] };
}

/** The value of one sample (name with its labels as Prometheus prints them), 0 when absent. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((entry) => entry.startsWith(`${series} `));
  return line ? Number(line.slice(series.length + 1)) : 0;
}

describe('GET /metrics', () => {
  it('counts operations, timing them, and the refusals their mutations answered', async () => {
    const redPackets = redPacketsAt(server.url);
    const packet = await redPackets.create('metrics-sender', { totalAmount: 2, count: 1 });
    // As the web app grabs: its persisted document, whose name is a label of its own.
    const grab = async (user: string) => (await post({ documentId: webDocumentId('WebGrabRedPacket'), variables: { packetId: packet.id } }, user)).data?.grabRedPacket;
    expect(await grab('metrics-first')).toMatchObject({ __typename: 'GrabbedShare' });
    const before = await scrape();
    expect(await grab('metrics-late')).toMatchObject({ __typename: 'RedPacketEmpty' });
    const after = await scrape();

    const grabs = 'graphql_requests_total{operation="WebGrabRedPacket",type="mutation"}';
    expect(sample(after, grabs)).toBe(sample(before, grabs) + 1);
    expect(sample(after, 'graphql_request_duration_seconds_count{operation="WebGrabRedPacket",type="mutation"}')).toBeGreaterThanOrEqual(2);
    expect(sample(after, 'business_refusals_total{code="RED_PACKET_EMPTY"}')).toBe(sample(before, 'business_refusals_total{code="RED_PACKET_EMPTY"}') + 1);
    // The journal committed both grabs and the creation, in batches it timed.
    expect(sample(after, 'journal_batch_size_count')).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'journal_commit_duration_seconds_count')).toBeGreaterThanOrEqual(1);
    for (const name of ['journal_depth', 'journal_lag_seconds', 'journal_dead_letters_total', 'campaign_rebuilds_total', 'store_errors_total', 'process_cpu_user_seconds_total']) {
      expect(after).toContain(`# TYPE ${name}`);
    }
  });

  it("counts the lottery's refusals too, whose union is built by hand", async () => {
    const lottery = lotteryAt(server.url);
    const later = Date.now() + 3_600_000;
    const activity = await lottery.create('metrics-operator', {
      title: 'later',
      startsAt: new Date(later).toISOString(),
      endsAt: new Date(later + 3_600_000).toISOString(),
      prizes: [{ title: 'cup', weight: 1, totalStock: 1 }],
    });
    const series = 'business_refusals_total{code="ACTIVITY_NOT_ACTIVE"}';
    const before = sample(await scrape(), series);
    expect((await lottery.draw('metrics-drawer', activity.id)).__typename).toBe('ActivityNotActive');
    expect(sample(await scrape(), series)).toBe(before + 1);
  });

  it("labels an operation by its own name only for the app's operations and operators' names: a user's made-up names are other, however many", async () => {
    const named = (name: string) => `graphql_requests_total{operation="${name}",type="query"}`;
    const ask = async (name: string, user?: string, as: As = {}) => post({ query: `query ${name} { serverTime }` }, user, as);
    const before = await scrape();
    // One customer makes up more names than there are slots.
    const junk = Array.from({ length: 250 }, (_, i) => `MetricsJunk${i}`);
    for (let first = 0; first < junk.length; first += 50) await Promise.all(junk.slice(first, first + 50).map((name) => ask(name, 'metrics-junk-namer')));
    await ask('MadeUpByAnAnonymousCaller');
    await ask('NamedByAnOperator', 'metrics-operator', { admin: true });
    await ask(`Long${'x'.repeat(61)}`, 'metrics-operator', { admin: true });
    // The app's own operation, after the flood, from someone else.
    expect((await post({ documentId: webDocumentId('WebGroupBuyActivities') }, 'metrics-shopper')).errors).toBeUndefined();
    const after = await scrape();

    expect(sample(after, named('WebGroupBuyActivities'))).toBe(sample(before, named('WebGroupBuyActivities')) + 1);
    expect(sample(after, named('other'))).toBe(sample(before, named('other')) + junk.length + 2);
    const series = (text: string) => text.split('\n').filter((line) => line.startsWith('graphql_requests_total{'));
    expect(series(after).filter((line) => /MetricsJunk|MadeUp|Long/.test(line))).toEqual([]);
    // The flood added no series: at most other's and those of the app's and the operator's names.
    expect(series(after).length - series(before).length).toBeLessThanOrEqual(3);
    expect(sample(after, named('NamedByAnOperator'))).toBe(1);
    // Once an operator named it, the name counts for anyone.
    await ask('NamedByAnOperator', 'metrics-junk-namer');
    expect(sample(await scrape(), named('NamedByAnOperator'))).toBe(2);
  });

  it('follows graphql-ws connections and live subscribers up and down', async () => {
    const packet = await redPacketsAt(server.url).create('metrics-ws-sender', { totalAmount: 10, count: 2 });
    const start = await scrape();
    // Signed in: anonymous operations are what the rate-limit test uses up.
    const connection = openWs(server.url, { authorization: `Bearer ${await tokenOf('metrics-watcher')}` });
    const subscription = connection.subscribe({ query: print(RedPacketUpdatedDocument), variables: { packetId: packet.id } });
    try {
      await subscription.until((events) => events.length > 0);
      const open = await scrape();
      expect(sample(open, 'graphql_ws_connections')).toBe(sample(start, 'graphql_ws_connections') + 1);
      expect(sample(open, 'live_event_subscribers')).toBe(sample(start, 'live_event_subscribers') + 1);
    } finally {
      subscription.close();
      connection.dispose();
    }
    await waitFor('the connection to be closed', async () => sample(await scrape(), 'graphql_ws_connections') === sample(start, 'graphql_ws_connections'));
    await waitFor('the subscriber to leave', async () => sample(await scrape(), 'live_event_subscribers') === sample(start, 'live_event_subscribers'));
  });

  it('counts payment notifies by the status answered, and logs forged ones once per window however many come', async () => {
    const refusedLines = () =>
      server
        .output()
        .split('\n')
        .filter((line) => line.includes('"payment notify refused"')).length;
    const before = await scrape();
    const linesBefore = refusedLines();
    const forged = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        sendNotify(server.url, { paymentRef: `metrics-forged-${i}`, amountCents: 1, status: 'SUCCEEDED', providerTxnId: `t-${i}` }, { signature: 'garbage' }),
      ),
    );
    expect(new Set(forged.map((answer) => answer.status))).toEqual(new Set([401]));
    const unknown = await sendNotify(server.url, { paymentRef: 'metrics-no-such-payment', amountCents: 1, status: 'SUCCEEDED', providerTxnId: 't' });
    expect(unknown.status).toBe(404);
    const after = await scrape();
    expect(sample(after, 'payment_notifies_total{status="401"}')).toBe(sample(before, 'payment_notifies_total{status="401"}') + 60);
    expect(sample(after, 'payment_notifies_total{status="404"}')).toBe(sample(before, 'payment_notifies_total{status="404"}') + 1);
    // The first forged notify of the window is logged; the other 59 only counted.
    await waitFor('the refusal logged', () => refusedLines() > linesBefore);
    expect(refusedLines() - linesBefore).toBe(1);
    // A malformed notify, signed (a provider's problem, not a forger's), is not hidden by them.
    const malformed = await sendNotify(server.url, { paymentRef: 'metrics-malformed' });
    expect(malformed.status).toBe(400);
    await waitFor('the malformed notify logged', () => refusedLines() === linesBefore + 2);
    const last = server
      .output()
      .split('\n')
      .filter((line) => line.includes('"payment notify refused"'))
      .at(-1)!;
    expect(JSON.parse(last)).toMatchObject({ status: 400, reason: expect.stringMatching(/^malformed notify/) });
  });

  it('shows the vouchers waiting for delivery and the age of the oldest, back to 0 once delivered', async () => {
    const pending = 'outbox_pending{outbox="redemption"}';
    const oldest = 'outbox_oldest_pending_seconds{outbox="redemption"}';
    const points = pointsAt(server.url);
    const goods = await points.createGoods('metrics-operator', { title: 'voucher', pointsCost: 10, stock: 1, voucherCodes: voucherCodes('METRICS', 1) });
    await points.award('metrics-operator', { userId: 'metrics-redeemer', amount: 10 });
    const before = (await scrape()).split('\n');
    for (const series of [pending, 'outbox_pending{outbox="refund"}']) expect(before).toContain(`${series} 0`);

    fulfilment.answer = () => 'hang';
    try {
      expect((await points.tryRedeem('metrics-redeemer', goods.id, 'metrics-redemption')).result?.__typename).toBe('Redemption');
      await waitFor('the voucher held by the webhook', () => fulfilment.requests.length === 1);
      const held = await scrape();
      expect(held.split('\n')).toContain(`${pending} 1`);
      expect(sample(held, oldest)).toBeGreaterThan(0);
      expect(sample(held, oldest)).toBeLessThan(60);
      expect(held.split('\n')).toContain('outbox_pending{outbox="refund"} 0');
    } finally {
      fulfilment.answer = () => 'ok';
      fulfilment.answerHanging('ok');
    }
    await waitFor('the voucher delivered', async () => (await scrape()).split('\n').includes(`${pending} 0`));
    expect((await scrape()).split('\n')).toContain(`${oldest} 0`);
  });

  it('shows how busy the PostgreSQL pool is', async () => {
    const text = await scrape();
    for (const name of ['postgres_pool_connections', 'postgres_pool_idle_connections', 'postgres_pool_waiting_requests']) expect(text).toMatch(new RegExp(`^${name} \\d+$`, 'm'));
    const total = sample(text, 'postgres_pool_connections');
    // The default DATABASE_POOL_SIZE; idle, the server uses fewer connections than it has.
    expect(total).toBeGreaterThanOrEqual(1);
    expect(total).toBeLessThanOrEqual(10);
    expect(sample(text, 'postgres_pool_idle_connections')).toBeLessThanOrEqual(total);
    expect(sample(text, 'postgres_pool_waiting_requests')).toBe(0);
  });

  it('serves the outbox gauges as they were within a scrape timeout while PostgreSQL makes their read wait', async () => {
    expect((await scrape()).split('\n')).toContain('outbox_pending{outbox="redemption"} 0');
    // Held by hand, as a migration would: the read waits for DATABASE_LOCK_TIMEOUT_MS (10 s).
    const holder = await stores.sql.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE redemption, refund IN ACCESS EXCLUSIVE MODE');
      for (let i = 0; i < 3; i++) {
        const started = performance.now();
        const text = await scrape();
        expect(performance.now() - started, `scrape ${i}`).toBeLessThan(2_500);
        expect(text.split('\n')).toContain('outbox_pending{outbox="redemption"} 0');
        // The first scrape's read still waits on the lock, on a connection of its own.
        if (i > 0) expect(sample(text, 'postgres_pool_connections') - sample(text, 'postgres_pool_idle_connections'), `scrape ${i}`).toBeGreaterThanOrEqual(1);
      }
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
  });

  it('samples the event loop delay finer than every 10 ms, so an idle loop reads below 10 ms', async () => {
    // A scrape starts the delays afresh: the next one shows a second of idling.
    await scrape();
    await sleep(1_000);
    const text = await scrape();
    expect(text).toContain('# HELP nodejs_eventloop_lag_p50_seconds The 50th percentile of the recorded event loop delays. Sampled every 5 ms');
    expect(sample(text, 'nodejs_eventloop_lag_p50_seconds')).toBeGreaterThan(0);
    expect(sample(text, 'nodejs_eventloop_lag_p50_seconds')).toBeLessThan(0.01);
  });

  it('is off in production without METRICS_TOKEN, and cannot be turned on there without one', () => {
    const production = { ...env.vars, NODE_ENV: 'production' };
    expect(metricsAccess(loadConfig(production))).toEqual({ enabled: false, token: undefined });
    expect(metricsAccess(loadConfig({ ...production, METRICS_TOKEN }))).toEqual({ enabled: true, token: METRICS_TOKEN });
    expect(() => loadConfig({ ...production, METRICS: 'on' })).toThrow(/METRICS=on needs METRICS_TOKEN/);
    expect(metricsAccess(loadConfig({ ...production, METRICS: 'off', METRICS_TOKEN }))).toMatchObject({ enabled: false });
    expect(metricsAccess(loadConfig({ ...env.vars, NODE_ENV: 'development' }))).toEqual({ enabled: true, token: undefined });
    expect(() => loadConfig({ ...env.vars, METRICS: 'maybe' })).toThrow(/METRICS/);
  });

  it("serves the labelled counters' known series at 0 from the start, the release, and counts refused tokens by reason", async () => {
    // The production server has served nothing but refused scrapes: every series here is as it started.
    const scrapeProduction = async () => (await fetch(metricsUrl(production), { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    const fresh = await scrapeProduction();
    const zeroes = [
      ...['request', 'redis', 'postgres'].map((source) => `store_errors_total{source="${source}"}`),
      ...['mutation', 'anonymous', 'cost', 'ws-open', 'ws-connection'].map((limit) => `rate_limited_requests_total{limit="${limit}"}`),
      ...[200, 400, 401, 404, 405, 409, 413, 503].map((status) => `payment_notifies_total{status="${status}"}`),
      ...['MALFORMED', 'EXPIRED', 'BAD_SIGNATURE', 'WRONG_ISSUER', 'WRONG_AUDIENCE', 'LIFETIME_TOO_LONG'].map((reason) => `auth_refusals_total{reason="${reason}"}`),
    ];
    for (const series of zeroes) expect(fresh.split('\n'), series).toContain(`${series} 0`);
    const { version } = JSON.parse(await readFile(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(fresh.split('\n')).toContain(`build_info{version="${version}"} 1`);
    expect(production.output()).toContain(`"version":"${version}"`);

    const refusedWith = async (authorization: string) => {
      const response = await fetch(production.url, { method: 'POST', headers: { 'content-type': 'application/json', authorization }, body: JSON.stringify({ query: '{ __typename }' }) });
      return ((await response.json()) as { errors?: { extensions?: { reason?: string } }[] }).errors?.[0]?.extensions?.reason;
    };
    expect(await refusedWith('Bearer not-a-jwt')).toBe('MALFORMED');
    expect(await refusedWith('Basic dXNlcjpwYXNz')).toBe('MALFORMED');
    // Signed with another secret, as an instance with another JWT_SECRET would sign.
    expect(await refusedWith(`Bearer ${await signToken('another-secret-of-at-least-32-characters', { userId: 'metrics-stranger', roles: [] })}`)).toBe('BAD_SIGNATURE');
    expect(await refusedWith(`Bearer ${await signToken(TEST_JWT_SECRET, { userId: 'metrics-late', roles: [] }, { expiresInSeconds: -60 })}`)).toBe('EXPIRED');
    const after = await scrapeProduction();
    expect(sample(after, 'auth_refusals_total{reason="MALFORMED"}')).toBe(2);
    expect(sample(after, 'auth_refusals_total{reason="BAD_SIGNATURE"}')).toBe(1);
    expect(sample(after, 'auth_refusals_total{reason="EXPIRED"}')).toBe(1);
  });

  it("times operations in buckets up to the service's own timeouts (30 s statements), and past them", async () => {
    await post({ query: '{ serverTime }' }, 'metrics-timed');
    const text = await scrape();
    for (const le of ['2.5', '5', '10', '30', '60']) expect(text).toContain(`graphql_request_duration_seconds_bucket{le="${le}",operation="anonymous",type="query"}`);
  });

  it('needs METRICS_TOKEN in production', async () => {
    expect((await fetch(metricsUrl(production))).status).toBe(401);
    expect((await fetch(metricsUrl(production), { headers: { authorization: 'Bearer wrong-token-of-the-same-size-0000' } })).status).toBe(401);
    const allowed = await fetch(metricsUrl(production), { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(allowed.status).toBe(200);
    expect(await allowed.text()).toContain('# TYPE graphql_requests_total counter');
  });
});

describe('request ids', () => {
  it('are echoed, taken from a sane X-Request-Id, and carried by the log lines of their request', async () => {
    const response = await fetch(server.url, {
      method: 'POST',
      // An operator's: the operation's name is a label of its own, which the debug line carries.
      headers: { 'content-type': 'application/json', 'x-request-id': 'req-metrics-0001', authorization: `Bearer ${await tokenOf('metrics-reader', { admin: true })}` },
      body: JSON.stringify({ query: 'query MetricsIdProbe { __typename }' }),
    });
    expect(response.headers.get('x-request-id')).toBe('req-metrics-0001');
    await waitFor('a log line of the request', () =>
      server
        .output()
        .split('\n')
        .some((line) => line.includes('"reqId":"req-metrics-0001"') && line.includes('MetricsIdProbe')),
    );
  });

  it('are generated for a request without one, or with one that is not sane', async () => {
    const plain = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ __typename }' }) });
    const insane = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-request-id': 'two words\tand a tab' },
      body: JSON.stringify({ query: '{ __typename }' }),
    });
    for (const response of [plain, insane]) expect(response.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    expect((await fetch(metricsUrl(server))).headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });
});

// Last: it uses up the anonymous budget of 127.0.0.1 for the window.
describe('rate limits', () => {
  it('counts rate-limited requests', async () => {
    const query = '{ __typename }';
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await gql(server.url, query));
    expect(errorCodes(answers.at(-1)!)).toEqual(['RATE_LIMITED']);
    expect(sample(await scrape(), 'rate_limited_requests_total{limit="anonymous"}')).toBeGreaterThanOrEqual(1);
  });
});
