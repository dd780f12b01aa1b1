import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { cp, mkdtemp, readFile, readdir, readlink, rm } from 'node:fs/promises';
import { createServer as createHttpServer, request } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/infra/db/database.ts';
import { MIGRATIONS_DIR, applyMigrations } from '../src/infra/db/migrations.ts';
import { createLogger } from '../src/infra/logger.ts';
import { projectFile } from '../src/projectFiles.ts';
import { createWebApp } from '../src/webApp.ts';
import { CreateRedPacketDocument, GrabRedPacketDocument, RedPacketUpdatedDocument } from './gql/generated.ts';
import { errorCodes, gql, subscribeSse, subscribeWs } from './support/client.ts';
import { TEST_DATABASE_URL, TEST_JWT_SECRET, testEnv } from './support/env.ts';
import { stopAll, stopWithin, withTimeout } from './support/lifecycle.ts';
import { waitFor } from './support/poll.ts';
import { startThrowawayRedis, stopChild } from './support/redisServer.ts';
import { expectRedPacketInvariants } from './support/redPacketInvariants.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, freePort, runUntilExit, startServerProcess } from './support/server.ts';
import { type Stores, deleteKeys, loseKeysAtOnce, openStores } from './support/stores.ts';
import { signAhead, tokenOf } from './support/tokens.ts';

/** The one line the server printed on stderr before exiting; fails on more, or on a stack trace. */
function expectOneLineRefusal(result: { code: number | null; stderr: string }, names: string) {
  expect(result.code, result.stderr).not.toBe(0);
  expect(result.code).not.toBeNull();
  const lines = result.stderr.split('\n').filter((line) => line.trim() !== '');
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toContain(names);
  expect(result.stderr).not.toMatch(/^\s+at\s/m);
  expect(result.stderr).not.toMatch(/\.(ts|js):\d+/);
  return lines[0]!;
}

// Up to the running server below, each test has its own schema and key prefix (or Redis),
// and most wait on server processes of their own: they run side by side.
describe.concurrent('refusing to start', () => {
  it('names REDIS_URL when Redis is unreachable, in one line without a stack', async () => {
    const env = testEnv('startup_noredis', { REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    const result = await runUntilExit(env.vars, 20_000);
    expect(expectOneLineRefusal(result, 'REDIS_URL')).toMatch(/unreachable/i);
    // EX_TEMPFAIL, not EX_CONFIG: a supervisor may start it again, and it may then succeed.
    expect(result.code).toBe(75);
  });

  it('names DATABASE_URL when PostgreSQL is unreachable, in one line without a stack', async () => {
    const env = testEnv('startup_nopg', { DATABASE_URL: `postgresql://postgres@127.0.0.1:${await freePort()}/test` });
    const result = await runUntilExit(env.vars, 20_000);
    expect(expectOneLineRefusal(result, 'DATABASE_URL')).toMatch(/unreachable/i);
    expect(result.code).toBe(75);
  });

  it('names DATABASE_URL when PostgreSQL has no such database, as a setting to fix (78), not an outage', async () => {
    const noDatabase = new URL(TEST_DATABASE_URL);
    noDatabase.pathname = '/no_such_database_here';
    const env = testEnv('startup_nodb', { DATABASE_URL: noDatabase.toString() });
    const result = await runUntilExit(env.vars, 20_000);
    expect(expectOneLineRefusal(result, 'DATABASE_URL')).toMatch(/refused .*does not exist/);
    expect(result.code).toBe(78);
  });

  it('refuses NODE_ENV=production without JWT_SECRET', async () => {
    const env = testEnv('startup_nosecret', { NODE_ENV: 'production', JWT_SECRET: '' });
    expectOneLineRefusal(await runUntilExit(env.vars, 20_000), 'JWT_SECRET');
  });

  it('refuses a URL it would fetch with credentials in it, exiting 78 without echoing them', async () => {
    const withCredentials = 'http://hookuser:hookpass@127.0.0.1:5998/hook?key=SECRETQUERY';
    const env = testEnv('startup_webhook_credentials', { POINTS_DELIVERY_WEBHOOK_URL: withCredentials, POINTS_DELIVERY_WEBHOOK_SECRET: 'd'.repeat(32) });
    const result = await runUntilExit(env.vars, 20_000);
    expect(result.code).toBe(78);
    const line = expectOneLineRefusal(result, 'POINTS_DELIVERY_WEBHOOK_URL');
    expect(line).toContain('credentials');
    expect(line).not.toMatch(/hookpass|SECRETQUERY/);
    // Every URL fetched: the refund webhook and the identity provider's keys alike, and only over HTTP.
    expect(() => loadConfig({ ...env.vars, POINTS_DELIVERY_WEBHOOK_URL: '', REFUND_WEBHOOK_URL: withCredentials })).toThrow(/REFUND_WEBHOOK_URL: must not carry credentials/);
    expect(() => loadConfig({ ...env.vars, POINTS_DELIVERY_WEBHOOK_URL: '', JWT_JWKS_URL: 'https://idp@idp.example/jwks.json' })).toThrow(/JWT_JWKS_URL: must not carry credentials/);
    expect(() => loadConfig({ ...env.vars, POINTS_DELIVERY_WEBHOOK_URL: 'ftp://127.0.0.1/hook' })).toThrow(/POINTS_DELIVERY_WEBHOOK_URL: must be an http/);
  });

  it('refuses DEV_TOKENS=1 with NODE_ENV=production', () => {
    expect(() => loadConfig({ ...testEnv('startup_devtokens').vars, NODE_ENV: 'production', DEV_TOKENS: '1' })).toThrow(/DEV_TOKENS/);
  });

  it('opens the payment sandbox only with the generated payment secret or SANDBOX_PAYMENTS=1, and never in production', () => {
    const vars = { ...testEnv('startup_sandbox').vars, SANDBOX_PAYMENTS: '' };
    // NODE_ENV left unset (development) on a server with a real secret: no free money.
    expect(loadConfig({ ...vars, NODE_ENV: '' }).sandboxPayments).toBe(false);
    expect(loadConfig({ ...vars, SANDBOX_PAYMENTS: '1' }).sandboxPayments).toBe(true);
    expect(loadConfig({ ...vars, NODE_ENV: 'production', SANDBOX_PAYMENTS: '1' }).sandboxPayments).toBe(false);
  });

  it('takes an identity provider in production only with an audience, over https, and an alias secret', () => {
    const idp = {
      ...testEnv('startup_idp').vars,
      NODE_ENV: 'production',
      JWT_SECRET: '',
      JWT_JWKS_URL: 'https://idp.example/jwks.json',
      JWT_AUDIENCE: 'campaigns',
      USER_ALIAS_SECRET: 'a'.repeat(32),
    };
    expect(loadConfig(idp).userAliasSecret).toBe('a'.repeat(32));
    expect(() => loadConfig({ ...idp, JWT_AUDIENCE: '' })).toThrow(/JWT_AUDIENCE/);
    expect(() => loadConfig({ ...idp, JWT_JWKS_URL: 'http://idp.example/jwks.json' })).toThrow(/https/);
    // Keyed on nothing, anyone could compute the aliases and turn them back into ids.
    expect(() => loadConfig({ ...idp, USER_ALIAS_SECRET: '' })).toThrow(/USER_ALIAS_SECRET/);
    expect(loadConfig({ ...idp, NODE_ENV: 'development', USER_ALIAS_SECRET: '' }).userAliasSecret).toMatch(/^.{32,}$/);
  });

  it('refuses a key prefix whose Redis state belongs to another database, until those keys are deleted', async () => {
    const first = testEnv('startup_owner_a');
    const second = testEnv('startup_owner_b', { REDIS_KEY_PREFIX: first.keyPrefix });
    const firstStores = openStores(first);
    const secondStores = openStores(second);
    try {
      await stopWithin(await startServerProcess(first.vars));
      const line = expectOneLineRefusal(await runUntilExit(second.vars, 60_000), 'REDIS_KEY_PREFIX');
      expect(line).toContain('another database');
      // The way out the message names: that database is gone, so its keys go too.
      await deleteKeys(firstStores.redis, first.keyPrefix);
      await stopWithin(await startServerProcess(second.vars));
    } finally {
      await firstStores.cleanup();
      await secondStores.cleanup();
    }
  });

  it('refuses a Redis whose maxmemory-policy evicts keys', async () => {
    const port = await freePort();
    const redis = await startThrowawayRedis(port, ['--maxmemory-policy', 'allkeys-lru']);
    try {
      const env = testEnv('startup_lru', { REDIS_URL: `redis://127.0.0.1:${port}` });
      const line = expectOneLineRefusal(await runUntilExit(env.vars, 20_000), 'maxmemory-policy');
      expect(line).toContain('allkeys-lru');
      expect(line).toContain('noeviction');
    } finally {
      await stopChild(redis);
    }
  });
});

describe.concurrent('instances of a new deployment starting at once', () => {
  it('all open the database and migrate it once, though their CREATE SCHEMA calls race', async () => {
    // Eight at once make PostgreSQL's catalog race (a unique violation for the losers) in
    // nearly every round; an instance that lost it once hung in its start for good.
    const env = testEnv('startup_together');
    const config = loadConfig({ ...env.vars, LOG_LEVEL: 'silent' });
    const log = createLogger('silent');
    const opened = await withTimeout(Promise.all(Array.from({ length: 8 }, () => openDatabase(config))), 30_000, 'eight instances opening the database');
    const stores = openStores(env);
    try {
      const created = await Promise.all(opened.map((db) => applyMigrations(db, log)));
      expect(created.filter(({ createdNow }) => createdNow)).toHaveLength(1);
      const { rows } = await stores.sql.query('SELECT migration_name FROM _prisma_migrations');
      expect(rows.length).toBe(new Set(rows.map((row) => row.migration_name)).size);
    } finally {
      await Promise.all(opened.map((db) => db.close()));
      await stores.cleanup();
    }
  });
});

describe.concurrent('a database upgraded from before one seat refund per payment', () => {
  it('keeps one refund per seat payment, a paid one first, so the unique index builds', async () => {
    const env = testEnv('startup_double_refunds');
    const config = loadConfig({ ...env.vars, LOG_LEVEL: 'silent' });
    const log = createLogger('silent');
    const stores = openStores(env);
    const db = await openDatabase(config);
    const before = await mkdtemp(join(tmpdir(), 'migrations-'));
    try {
      for (const name of await readdir(MIGRATIONS_DIR)) {
        if (name < '20261127055959') await cp(join(MIGRATIONS_DIR, name), join(before, name), { recursive: true });
      }
      await applyMigrations(db, log, before);
      const refund = (id: string, reason: string, paymentRef: string, status: 'PENDING' | 'PAID', minute: number) =>
        stores.sql.query(
          `INSERT INTO refund (id, source_key, user_id, amount_cents, reason, payment_ref, status, created_at)
           VALUES ($1, $1, 'buyer', 990, $2, $3, $4::"RefundStatus", timestamptz '2026-11-20 10:00Z' + make_interval(mins => $5))`,
          [id, reason, paymentRef, status, minute],
        );
      await refund('a-late', 'LATE_PAYMENT', 'pay-a', 'PENDING', 1);
      await refund('a-team', 'TEAM_FAILED', 'pay-a', 'PENDING', 2);
      await refund('a-dup', 'DUPLICATE_PAYMENT', 'pay-a', 'PENDING', 3);
      await refund('b-team', 'TEAM_FAILED', 'pay-b', 'PENDING', 1);
      await refund('b-late', 'LATE_PAYMENT', 'pay-b', 'PAID', 2);
      await refund('c-late', 'LATE_PAYMENT', 'pay-c', 'PAID', 1);
      await refund('c-team', 'TEAM_FAILED', 'pay-c', 'PAID', 2);
      await refund('d-team', 'TEAM_FAILED', 'pay-d', 'PENDING', 1);

      await applyMigrations(db, log);
      const { rows } = await stores.sql.query<{ id: string; reason: string }>('SELECT id, reason FROM refund ORDER BY id');
      expect(rows).toEqual([
        { id: 'a-dup', reason: 'DUPLICATE_PAYMENT' },
        { id: 'a-late', reason: 'LATE_PAYMENT' },
        { id: 'b-late', reason: 'LATE_PAYMENT' },
        { id: 'c-late', reason: 'LATE_PAYMENT' },
        { id: 'c-team', reason: 'DOUBLE_SEAT_REFUND' },
        { id: 'd-team', reason: 'TEAM_FAILED' },
      ]);
      await expect(refund('a-team-again', 'TEAM_FAILED', 'pay-a', 'PENDING', 4)).rejects.toThrow(/refund_seat_payment_key/);
    } finally {
      await rm(before, { recursive: true, force: true });
      await db.close();
      await stores.cleanup();
    }
  });
});

describe.concurrent('the key prefix, while the server runs', () => {
  it('is claimed again after Redis lost its keys, so another database still cannot start on it', async () => {
    const first = testEnv('startup_reclaim_a', { SWEEP_INTERVAL_MS: '100' });
    const second = testEnv('startup_reclaim_b', { REDIS_KEY_PREFIX: first.keyPrefix });
    const firstStores = openStores(first);
    const secondStores = openStores(second);
    const server = await startServerProcess(first.vars);
    try {
      const owner = await firstStores.redis.get('database');
      expect(owner).toMatch(/^postgresql:/);
      // What a Redis restart without persistence, or a FLUSHALL, does to the prefix.
      await loseKeysAtOnce(firstStores.redis, first.keyPrefix);
      await waitFor('the owner key written again', async () => (await firstStores.redis.get('database')) === owner, { timeoutMs: 5_000, intervalMs: 50 });
      await waitFor('the warning logged', () => server.output().includes('claimed the prefix again'), { timeoutMs: 5_000, intervalMs: 50 });

      const line = expectOneLineRefusal(await runUntilExit(second.vars, 60_000), 'REDIS_KEY_PREFIX');
      expect(line).toContain('another database');
      expect((await fetch(`${new URL(server.url).origin}/ready`)).status).toBe(200);
    } finally {
      await stopAll(server);
      await firstStores.cleanup();
      await secondStores.cleanup();
    }
  });

  it('stops serving, as a refusal to start, when another database claimed it meanwhile', async () => {
    const env = testEnv('startup_foreign', { SWEEP_INTERVAL_MS: '100' });
    const stores = openStores(env);
    const server = await startServerProcess(env.vars);
    try {
      // Another database's instance started while Redis had lost the owner key.
      await stores.redis.set('database', 'postgresql:another-database');
      // 'close', not 'exit': the output is read to its end.
      const exitCode = await withTimeout(
        once(server.child, 'close').then(([code]) => code as number | null),
        10_000,
        'the server stopping',
      );
      expect(exitCode).toBe(78);
      expect(server.output()).toContain('must not serve the key prefix');
      expect(server.output()).toContain('another database (postgresql:another-database) claimed');
      expect(server.output()).not.toContain('delete the keys');
    } finally {
      await server.kill();
      await stores.cleanup();
    }
  });
});

describe('a running server', () => {
  const env = testEnv('startup_live', {
    RATE_LIMIT_MUTATIONS: '5',
    RATE_LIMIT_WINDOW_MS: '60000',
    GRAPHQL_MAX_DEPTH: '5',
    GRAPHQL_MAX_ALIASES: '3',
  });
  let server: ServerProcess;
  let stores: Stores;
  let base: string;

  beforeAll(async () => {
    server = await startServerProcess(env.vars);
    stores = openStores(env);
    base = new URL(server.url).origin;
  });

  afterAll(async () => {
    try {
      await stopAll(server);
    } finally {
      await stores?.cleanup();
    }
  });

  it('accepts on its listening socket through HTTP_ACCEPTORS descriptors, and answers a burst of 300 new connections', async () => {
    // The listening socket's inode, from the kernel's table (state 0A is LISTEN).
    const portHex = server.port.toString(16).toUpperCase().padStart(4, '0');
    const listening = (await readFile('/proc/net/tcp', 'utf8')).split('\n').find((line) => line.includes(`:${portHex} 00000000:0000 0A`));
    const inode = listening!.trim().split(/\s+/)[9];
    const pid = server.child.pid!;
    const links = await Promise.all((await readdir(`/proc/${pid}/fd`)).map((fd) => readlink(`/proc/${pid}/fd/${fd}`).catch(() => '')));
    expect(links.filter((link) => link === `socket:[${inode}]`)).toHaveLength(loadConfig(env.vars).HTTP_ACCEPTORS);
    // The process that sent the descriptors back is gone.
    await waitFor('no child process left', async () => (await readFile(`/proc/${pid}/task/${pid}/children`, 'utf8')).trim() === '', { timeoutMs: 5000 });

    const body = JSON.stringify({ query: '{ __typename }' });
    const answers = await Promise.all(
      Array.from(
        { length: 300 },
        () =>
          new Promise<string>((resolve, reject) => {
            const socket = connect(server.port, '127.0.0.1');
            let text = '';
            socket.once('connect', () =>
              socket.end(`POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`),
            );
            socket.on('data', (chunk) => (text += String(chunk)));
            socket.once('close', () => resolve(text));
            socket.once('error', reject);
          }),
      ),
    );
    expect(answers.filter((answer) => answer.startsWith('HTTP/1.1 200') && answer.endsWith('{"data":{"__typename":"Query"}}'))).toHaveLength(300);
  });

  it('answers /health and /ready', async () => {
    const health = await fetch(`${base}/health`);
    expect(health.status).toBe(200);
    await health.body?.cancel();

    const ready = await fetch(`${base}/ready`);
    expect(ready.status).toBe(200);
    expect(ready.headers.get('content-type')).toContain('application/json');
    expect(await ready.json()).toMatchObject({ ready: true, redis: true, database: true });
  });

  it('limits mutations per user: the 6th in the window is RATE_LIMITED and changes nothing; others are unaffected', async () => {
    const redPackets = redPacketsAt(server.url);
    const alice = `rl-alice-${randomUUID()}`;
    const bob = `rl-bob-${randomUUID()}`;

    // Six packets of a shop (an operator's mutations are not counted), five grabs: all allowed.
    const packets: string[] = [];
    for (let i = 0; i < 6; i++) {
      packets.push((await redPackets.create(`rl-shop-${randomUUID()}`, { totalAmount: 500, count: 5 })).id);
    }
    const [target, ...others] = packets as [string, ...string[]];
    for (const other of others) expect((await redPackets.grab(alice, other)).__typename).toBe('GrabbedShare');

    // The 6th (a grab) and a 7th (a create) are refused, and neither leaves a trace.
    const grab = await redPackets.raw(GrabRedPacketDocument, { packetId: target }, alice);
    expect(errorCodes(grab)).toEqual(['RATE_LIMITED']);
    expect(grab.body.data ?? null).toBeNull();
    const retryAfterMs = grab.body.errors![0]!.extensions?.retryAfterMs as number;
    expect(retryAfterMs).toBeGreaterThan(0);
    expect(retryAfterMs).toBeLessThanOrEqual(60_000);

    const create = await redPackets.raw(CreateRedPacketDocument, { input: { totalAmount: 500, count: 5 } }, alice);
    expect(errorCodes(create)).toEqual(['RATE_LIMITED']);

    const { rows: created } = await stores.sql.query<{ id: string }>('SELECT id FROM red_packet WHERE sender_id = $1', [alice]);
    expect(created).toEqual([]);
    const { rows: grabs } = await stores.sql.query('SELECT id FROM red_packet_grab WHERE packet_id = $1', [target]);
    expect(grabs).toHaveLength(0);
    expect(await stores.redis.hget(`{rp:${target}}:meta`, 'remainingCount')).toBe('5');

    // Reads are not limited.
    const redPacket = await redPackets.packet(alice, target);
    expect(redPacket?.remainingCount).toBe(5);

    // Another user mutates freely.
    const bobGrab = await redPackets.grab(bob, target);
    expect(bobGrab.__typename).toBe('GrabbedShare');
    expect((await redPackets.grab(bob, others[0]!)).__typename).toBe('GrabbedShare');
    const after = await expectRedPacketInvariants(stores, target);
    expect(after).toHaveLength(1);
  });

  it('mints no development token when JWT_SECRET is set, which production may share, unless DEV_TOKENS=1', async () => {
    const mint = await fetch(new URL('/app/dev-token', base), { method: 'POST', body: JSON.stringify({ name: 'mallory', operator: true }) });
    expect(mint.status).toBe(404);
    expect(await mint.json()).toEqual({ error: expect.stringContaining('DEV_TOKENS') });
    expect(loadConfig(env.vars).devTokens).toBe(false);
    expect(loadConfig({ ...env.vars, DEV_TOKENS: '1' }).devTokens).toBe(true);
  });

  it('serves GraphiQL to a browser without loading anything from a CDN', async () => {
    const response = await fetch(server.url, { headers: { accept: 'text/html' } });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/html');
    const html = await response.text();
    expect(html).toMatch(/graphiql/i);
    expect(html).not.toContain('unpkg');
    expect(html).not.toContain('jsdelivr');
    expect(html).not.toMatch(/<(script|link)[^>]+(src|href)=["']?(https?:)?\/\//i);
  });

  it('rejects a query nested deeper than GRAPHQL_MAX_DEPTH', async () => {
    const token = await tokenOf('deep-diver');
    const nested = (fragments: number) => `query { redPacket(id: "${randomUUID()}") { ${'... on RedPacket { '.repeat(fragments)} shares { userId } ${'} '.repeat(fragments)} } }`;

    // redPacket, two fragments, shares, userId: depth 5, the limit.
    const atLimit = await gql(server.url, nested(2), {}, token);
    expect(atLimit.body.errors, JSON.stringify(atLimit.body.errors)).toBeUndefined();
    expect(atLimit.body.data).toEqual({ redPacket: null });

    const tooDeep = await gql(server.url, nested(3), {}, token);
    expect(tooDeep.body.data ?? null).toBeNull();
    expect(tooDeep.body.errors?.[0]?.message).toMatch(/depth/i);
    expect(errorCodes(tooDeep)).toEqual(['BAD_USER_INPUT']);
  });

  it('rejects too many aliases', async () => {
    const token = await tokenOf('alias-lover');
    const aliased = (count: number) => `query { ${Array.from({ length: count }, (_, i) => `a${i}: redPacket(id: "${randomUUID()}") { id }`).join(' ')} }`;

    const atLimit = await gql(server.url, aliased(3), {}, token);
    expect(atLimit.body.errors, JSON.stringify(atLimit.body.errors)).toBeUndefined();

    const tooMany = await gql(server.url, aliased(4), {}, token);
    expect(tooMany.body.data ?? null).toBeNull();
    expect(tooMany.body.errors?.[0]?.message).toMatch(/alias/i);
    expect(errorCodes(tooMany)).toEqual(['BAD_USER_INPUT']);
  });
});

describe('what a development server gives away, and a production one does not', () => {
  /** The web app's handler alone, in this process, on every interface. */
  async function webAppOn(config: ReturnType<typeof loadConfig>) {
    const handle = createWebApp(config);
    const server = createHttpServer((req, res) => {
      if (!handle(req, res)) res.writeHead(404).end();
    });
    server.listen(0, '0.0.0.0');
    await once(server, 'listening');
    return {
      port: (server.address() as AddressInfo).port,
      close: () => {
        const closed = new Promise((resolve) => server.close(resolve));
        // fetch keeps its connections alive, and close() would wait seconds for them to time out.
        server.closeAllConnections();
        return closed;
      },
    };
  }

  it('mints development tokens for this machine only, and serves source maps outside production only', async () => {
    const vars = { ...testEnv('startup_exposure').vars, JWT_SECRET: '', SANDBOX_PAYMENTS: '' };
    const development = await webAppOn(loadConfig(vars));
    const production = await webAppOn(loadConfig({ ...vars, NODE_ENV: 'production', JWT_SECRET: TEST_JWT_SECRET }));
    try {
      const mint = (host: string) =>
        fetch(`http://${host}:${development.port}/app/dev-token`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ name: 'lan-guest', operator: true }),
        });
      expect((await mint('127.0.0.1')).status).toBe(200);
      // From another address of this machine, as a neighbour on the network would reach it.
      const lan = Object.values(networkInterfaces())
        .flat()
        .find((address) => address?.family === 'IPv4' && !address.internal)?.address;
      if (lan) expect((await mint(lan)).status).toBe(403);
      // From this machine, but a page whose domain was re-pointed at 127.0.0.1 (DNS
      // rebinding), or relayed by a proxy on this machine.
      const mintFromLoopback = (headers: Record<string, string>) =>
        new Promise<number>((resolve, reject) => {
          const body = JSON.stringify({ name: 'rebound', operator: true });
          request({ host: '127.0.0.1', port: development.port, path: '/app/dev-token', method: 'POST', headers: { 'content-type': 'application/json', ...headers } }, (res) => {
            res.resume();
            resolve(res.statusCode ?? 0);
          })
            .on('error', reject)
            .end(body);
        });
      expect(await mintFromLoopback({ host: `localhost:${development.port}` })).toBe(200);
      expect(await mintFromLoopback({ host: `[::1]:${development.port}` })).toBe(200);
      expect(await mintFromLoopback({ host: `attacker.example:${development.port}`, origin: `http://attacker.example:${development.port}` })).toBe(403);
      expect(await mintFromLoopback({ host: `127.0.0.1.attacker.example:${development.port}` })).toBe(403);
      expect(await mintFromLoopback({ host: `localhost:${development.port}`, 'x-forwarded-for': '203.0.113.7' })).toBe(403);
      expect(await mintFromLoopback({ host: `localhost:${development.port}`, forwarded: 'for=203.0.113.7' })).toBe(403);

      const map = (await readdir(projectFile('dist', 'web', 'assets'))).find((file) => file.endsWith('.map'))!;
      expect((await fetch(`http://127.0.0.1:${development.port}/app/assets/${map}`)).status).toBe(200);
      expect((await fetch(`http://127.0.0.1:${production.port}/app/assets/${map}`)).status).toBe(404);
    } finally {
      await Promise.all([development.close(), production.close()]);
    }
  });
});

describe('SIGTERM', () => {
  const env = testEnv('startup_stop');
  let stores: Stores;

  beforeAll(() => {
    stores = openStores(env);
  });

  afterAll(async () => {
    await stores?.cleanup();
  });

  it('does not wait out the grace period for a connection that never sent a request, as a browser preconnect is', async () => {
    const server = await startServerProcess({ ...env.vars, SHUTDOWN_TIMEOUT_MS: '30000' });
    try {
      const preconnect = connect(server.port, '127.0.0.1');
      await once(preconnect, 'connect');
      const closedByServer = once(preconnect, 'close');
      expect((await gql(server.url, '{ __typename }')).body.data).toEqual({ __typename: 'Query' });
      const stopping = Date.now();
      expect(await stopWithin(server, 20_000)).toBe(0);
      expect(Date.now() - stopping).toBeLessThan(5_000);
      await closedByServer;
    } finally {
      await server.kill();
    }
  });

  it('exits 0, and every grab acknowledged before it is in PostgreSQL', async () => {
    const server = await startServerProcess(env.vars);
    try {
      const redPackets = redPacketsAt(server.url);
      const packet = await redPackets.create('stop-sender', { totalAmount: 10_000, count: 300 });
      const users = Array.from({ length: 300 }, (_, i) => `stop-user-${i}`);
      await signAhead(users);

      let firstAck!: () => void;
      const acked = new Promise<void>((resolve) => (firstAck = resolve));
      const grabs = Promise.allSettled(
        users.map(async (user) => {
          const response = await redPackets.raw(GrabRedPacketDocument, { packetId: packet.id }, user);
          const result = response.body.data?.grabRedPacket;
          if (result?.__typename === 'GrabbedShare') firstAck();
          return { user, result };
        }),
      );
      // Stop while grabs are in flight, as soon as the first one is acknowledged.
      await Promise.race([acked, grabs]);
      const [results, exitCode] = await Promise.all([grabs, stopWithin(server, 20_000)]);
      expect(exitCode).toBe(0);
      expect(server.output()).toContain('shutting down');
      expect(server.output()).not.toContain('shutdown failed');

      const won = new Map<string, number>();
      for (const settled of results) {
        if (settled.status === 'fulfilled' && settled.value.result?.__typename === 'GrabbedShare') {
          won.set(settled.value.user, settled.value.result.amount);
        }
      }
      expect(won.size).toBeGreaterThan(0);

      const rows = await expectRedPacketInvariants(stores, packet.id);
      const durable = new Map(rows.map((row) => [row.user_id, row.amount]));
      for (const [user, amount] of won) expect(durable.get(user), `${user}'s acknowledged grab`).toBe(amount);
      // Nothing is left waiting in the journal: the drain committed it all.
      expect(await stores.redis.xlen(`{rp:${packet.id}}:journal`)).toBe(0);
      expect(rows.length).toBeGreaterThanOrEqual(won.size);
    } finally {
      await server.kill();
    }
  });

  // Ending the subscriptions unsubscribes their channels while the pub/sub connection closes.
  it('exits 0 with live subscriptions on every transport', async () => {
    const server = await startServerProcess(env.vars);
    try {
      const packets = await Promise.all(Array.from({ length: 20 }, () => redPacketsAt(server.url).create('stop-watched', { totalAmount: 100, count: 2 })));
      const token = await tokenOf('stop-watcher');
      const watchers = packets.flatMap((packet) => [subscribeWs, subscribeSse].map((subscribe) => subscribe(server.url, RedPacketUpdatedDocument, { packetId: packet.id }, token)));
      await Promise.all(watchers.map((watcher) => watcher.until((events) => events.length > 0)));
      expect(await stopWithin(server, 20_000)).toBe(0);
      expect(server.output()).not.toContain('failed unhandled while stopping');
      for (const watcher of watchers) watcher.close();
    } finally {
      await server.kill();
    }
  });
});

describe('a port already in use', () => {
  it('is refused in one line naming PORT, without the WebSocket library printing its stack first', async () => {
    const taken = createHttpServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const env = testEnv('startup_port_taken', { PORT: String((taken.address() as AddressInfo).port) });
    const stores = openStores(env);
    try {
      const result = await runUntilExit(env.vars, 60_000);
      expect(expectOneLineRefusal(result, 'EADDRINUSE')).toContain('set PORT or HOST');
      expect(result.code).toBe(78);
    } finally {
      taken.close();
      await stores.cleanup();
    }
  });
});
