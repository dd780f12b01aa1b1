import { execFile } from 'node:child_process';
import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { SignJWT, exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signToken } from '../src/infra/auth/tokens.ts';
import { CreateRedPacketDocument } from './gql/generated.ts';
import { gql } from './support/client.ts';
import { TEST_JWT_SECRET, testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { type ServerProcess, freePort, startServerProcess } from './support/server.ts';
import { type Stores, openStores } from './support/stores.ts';
import { tokenOf } from './support/tokens.ts';

// The server of the HTTP tests takes HS256 tokens with JWT_SECRET (the default); the
// identity-provider server takes only RS256/ES256 tokens of the JWKS served below.
const env = testEnv('auth');
const ISSUER = 'https://id.example.test/';
const AUDIENCE = 'campaign-api';
let server: ServerProcess;
let idpServer: ServerProcess;
let jwksServer: Server;
let stores: Stores;
const rsa = await generateKeyPair('RS256');
const ec = await generateKeyPair('ES256');
const stranger = await generateKeyPair('RS256');

beforeAll(async () => {
  const keys = [
    { ...(await exportJWK(rsa.publicKey)), kid: 'rsa-1', alg: 'RS256', use: 'sig' },
    { ...(await exportJWK(ec.publicKey)), kid: 'ec-1', alg: 'ES256', use: 'sig' },
  ];
  jwksServer = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ keys }));
  });
  await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
  const jwksUrl = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/.well-known/jwks.json`;
  server = await startServerProcess(env.vars);
  idpServer = await startServerProcess({ ...env.vars, JWT_SECRET: '', JWT_JWKS_URL: jwksUrl, JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE });
  stores = openStores(env);
});

afterAll(async () => {
  try {
    await stopAll(server, idpServer);
  } finally {
    jwksServer?.close();
    await stores?.cleanup();
  }
});

const run = promisify(execFile);
const hs256 = new TextEncoder().encode(TEST_JWT_SECRET);
const now = () => Math.floor(Date.now() / 1000);

/** A token with exactly the claims given (no defaults), signed with the test secret. */
function rawToken(claims: Record<string, unknown>): Promise<string> {
  return new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(hs256);
}

/** An identity provider's token: RS256 or ES256, with the configured issuer and audience unless overridden. */
function idpToken(options: { key?: CryptoKey; alg?: string; kid?: string; issuer?: string; audience?: string } = {}): Promise<string> {
  return new SignJWT({ roles: [] })
    .setProtectedHeader({ alg: options.alg ?? 'RS256', kid: options.kid ?? 'rsa-1' })
    .setSubject('idp-user')
    .setIssuer(options.issuer ?? ISSUER)
    .setAudience(options.audience ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime('1h')
    .sign(options.key ?? rsa.privateKey);
}

const PUBLIC_QUERY = '{ __typename }';
const ME_QUERY = '{ me { userId } }';

/** The same operation over the fast lane (JSON POST) and over Yoga's own handler (GET). */
async function bothLanes(url: string, query: string, authorization?: string) {
  const headers: Record<string, string> = authorization ? { authorization } : {};
  const post = await fetch(url, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
  // A GET names itself to Yoga's CSRF prevention, as browsers' GraphQL clients do.
  const get = await fetch(`${url}?query=${encodeURIComponent(query)}`, { headers: { ...headers, accept: 'application/json', 'x-graphql-yoga-csrf': '1' } });
  return [
    { lane: 'POST', status: post.status, body: (await post.json()) as { data?: unknown; errors?: { extensions?: Record<string, unknown> }[] } },
    { lane: 'GET', status: get.status, body: (await get.json()) as { data?: unknown; errors?: { extensions?: Record<string, unknown> }[] } },
  ];
}

const reasonsOf = (body: { errors?: { extensions?: Record<string, unknown> }[] }) => (body.errors ?? []).map((error) => [error.extensions?.code, error.extensions?.reason]);

describe('UNAUTHENTICATED says why, over HTTP', () => {
  it('MISSING on a field that needs sign-in, while public fields answer', async () => {
    for (const answer of await bothLanes(server.url, ME_QUERY)) {
      expect(reasonsOf(answer.body), answer.lane).toEqual([['UNAUTHENTICATED', 'MISSING']]);
    }
    for (const answer of await bothLanes(server.url, PUBLIC_QUERY)) expect(answer.body, answer.lane).toEqual({ data: { __typename: 'Query' } });
  });

  const refusals: [name: string, authorization: () => Promise<string>, reason: string][] = [
    ['a Basic header', async () => 'Basic dXNlcjpwYXNz', 'MALFORMED'],
    ['a token that is not a JWT', async () => 'Bearer not-a-jwt', 'MALFORMED'],
    ['a token without exp', async () => `Bearer ${await rawToken({ sub: 'no-exp', iat: now() })}`, 'MALFORMED'],
    ['a token without sub', async () => `Bearer ${await rawToken({ iat: now(), exp: now() + 60 })}`, 'MALFORMED'],
    // A user id reaches Redis keys and journal entries: the characters refused in inputs are refused here too.
    ['a token whose sub holds a NUL', async () => `Bearer ${await rawToken({ sub: 'mallory\u0000', iat: now(), exp: now() + 60 })}`, 'MALFORMED'],
    // A line feed would let `victim\nx` meet `victim`'s lottery requestIds in one Redis field.
    ['a token whose sub holds a line feed', async () => `Bearer ${await rawToken({ sub: 'victim\nx', iat: now(), exp: now() + 60 })}`, 'MALFORMED'],
    ['a token whose sub holds a tab', async () => `Bearer ${await rawToken({ sub: 'victim\tx', iat: now(), exp: now() + 60 })}`, 'MALFORMED'],
    // Shown in full to operators, these would pass for another user's id.
    ['a token whose sub holds a bidi override', async () => `Bearer ${await rawToken({ sub: 'victim\u202Etxt', iat: now(), exp: now() + 60 })}`, 'MALFORMED'],
    ['a token whose sub holds a zero-width space', async () => `Bearer ${await rawToken({ sub: 'vic\u200Btim', iat: now(), exp: now() + 60 })}`, 'MALFORMED'],
    ['a token whose sub ends in a space', async () => `Bearer ${await rawToken({ sub: 'victim ', iat: now(), exp: now() + 60 })}`, 'MALFORMED'],
    ['an expired token', async () => `Bearer ${await rawToken({ sub: 'late', iat: now() - 120, exp: now() - 60 })}`, 'EXPIRED'],
    ['a token valid only later', async () => `Bearer ${await rawToken({ sub: 'early', nbf: now() + 600, exp: now() + 1200 })}`, 'EXPIRED'],
    ['a token issued an hour ahead', async () => `Bearer ${await rawToken({ sub: 'ahead', iat: now() + 3_600, exp: now() + 7_200 })}`, 'EXPIRED'],
    ['a token of another secret', async () => `Bearer ${await signToken('another-secret-that-is-also-32-characters-long', { userId: 'mallory', roles: ['admin'] })}`, 'BAD_SIGNATURE'],
    ['a token living 8 days', async () => `Bearer ${await rawToken({ sub: 'forever', iat: now(), exp: now() + 8 * 86_400 })}`, 'LIFETIME_TOO_LONG'],
    ['a token living 8 days without iat', async () => `Bearer ${await rawToken({ sub: 'forever', exp: now() + 8 * 86_400 })}`, 'LIFETIME_TOO_LONG'],
    [
      'a token dated 10 days ahead, living 1 day from then',
      async () => `Bearer ${await rawToken({ sub: 'forever', iat: now() + 10 * 86_400, exp: now() + 11 * 86_400 })}`,
      'LIFETIME_TOO_LONG',
    ],
  ];

  it.each(refusals)('refuses the whole request with %s, even a public field, the same on both lanes', async (_name, authorization, reason) => {
    const header = await authorization();
    for (const query of [PUBLIC_QUERY, ME_QUERY]) {
      const [post, get] = await bothLanes(server.url, query, header);
      expect(post!.body.data ?? null).toBeNull();
      expect(reasonsOf(post!.body)).toEqual([['UNAUTHENTICATED', reason]]);
      expect(get).toEqual({ ...post, lane: 'GET' });
    }
  });

  it('refuses the mutation too, changing nothing', async () => {
    const expired = await rawToken({ sub: 'late-sender', iat: now() - 120, exp: now() - 60 });
    const response = await gql(server.url, CreateRedPacketDocument, { input: { totalAmount: 100, count: 2 } }, expired);
    expect(reasonsOf(response.body)).toEqual([['UNAUTHENTICATED', 'EXPIRED']]);
    const { rows } = await stores.sql.query('SELECT count(*)::int AS n FROM red_packet WHERE sender_id = $1', ['late-sender']);
    expect(rows).toEqual([{ n: 0 }]);
  });

  it('takes a token living exactly the maximum, and what npm run token mints', async () => {
    const exact = await rawToken({ sub: 'exact', iat: now(), exp: now() + 7 * 86_400 });
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'scripts/token.ts', 'minted'], { env: { ...process.env, ...env.vars } });
    for (const [token, userId] of [
      [exact, 'exact'],
      [stdout.trim(), 'minted'],
    ] as const) {
      for (const answer of await bothLanes(server.url, ME_QUERY, `Bearer ${token}`)) expect(answer.body, answer.lane).toEqual({ data: { me: { userId } } });
    }
  });
});

describe('tokens of an identity provider (JWT_JWKS_URL, JWT_ISSUER, JWT_AUDIENCE)', () => {
  it('takes RS256 and ES256 tokens signed with the keys of its JWKS', async () => {
    for (const token of [await idpToken(), await idpToken({ key: ec.privateKey, alg: 'ES256', kid: 'ec-1' })]) {
      const response = await gql(idpServer.url, ME_QUERY, undefined, token);
      expect(response.body).toEqual({ data: { me: { userId: 'idp-user' } } });
    }
  });

  it.each([
    ['another issuer', () => idpToken({ issuer: 'https://evil.example.test/' }), 'WRONG_ISSUER'],
    ['another audience', () => idpToken({ audience: 'another-api' }), 'WRONG_AUDIENCE'],
    ['a key not in the JWKS', () => idpToken({ key: stranger.privateKey, kid: 'rsa-1' }), 'BAD_SIGNATURE'],
    ['an unknown kid', () => idpToken({ key: stranger.privateKey, kid: 'rsa-9' }), 'BAD_SIGNATURE'],
    ['an HS256 token of the default secret', () => tokenOf('hs-user'), 'BAD_SIGNATURE'],
  ])('refuses a token with %s', async (_name, makeToken, reason) => {
    const response = await gql(idpServer.url, PUBLIC_QUERY, undefined, await makeToken());
    expect(response.body.data ?? null).toBeNull();
    expect(reasonsOf(response.body)).toEqual([['UNAUTHENTICATED', reason]]);
  });

  it('answers SERVICE_UNAVAILABLE, not UNAUTHENTICATED, while the JWKS cannot be fetched', async () => {
    const unreachable = `http://127.0.0.1:${await freePort()}/jwks.json`;
    const cut = await startServerProcess({ ...env.vars, JWT_SECRET: '', JWT_JWKS_URL: unreachable, JWT_ISSUER: ISSUER, JWT_AUDIENCE: AUDIENCE });
    try {
      const response = await gql(cut.url, PUBLIC_QUERY, undefined, await idpToken());
      expect(response.body.data ?? null).toBeNull();
      expect(reasonsOf(response.body)).toEqual([['SERVICE_UNAVAILABLE', undefined]]);
      // A graphql-sse reservation too: 503, not 401.
      const reservation = await fetch(new URL('/graphql/stream', cut.url), { method: 'PUT', headers: { authorization: `Bearer ${await idpToken()}` } });
      expect(reservation.status).toBe(503);
      expect(reasonsOf((await reservation.json()) as Parameters<typeof reasonsOf>[0])).toEqual([['SERVICE_UNAVAILABLE', undefined]]);
    } finally {
      await stopAll(cut);
    }
  });
});
