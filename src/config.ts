import { z } from 'zod';
import { readOrCreateDevSecret } from './infra/auth/devSecret.ts';
import { DEFAULT_REDIS_COMMAND_TIMEOUT_MS, DEFAULT_REDIS_CONNECT_TIMEOUT_MS } from './infra/redis/connection.ts';

const DEV_PAYMENT_SECRET_FILE = '.data/payment-webhook-secret';
const DEV_ALIAS_SECRET_FILE = '.data/user-alias-secret';

const intFromEnv = (fallback: number, min = 0) => z.coerce.number().int().min(min).default(fallback);

/**
 * A URL this server fetches (a webhook, the JWKS). fetch refuses one with credentials in it
 * on every call, quoting it whole, query string included, in an error that is logged and
 * stored; so it is refused here, once, without echoing it.
 */
const fetchedUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL', abort: true }).refine((value) => {
  const { username, password } = new URL(value);
  return username === '' && password === '';
}, 'must not carry credentials (user:password@): fetch refuses such a URL');

const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  HOST: z.string().default('0.0.0.0'),
  PORT: intFromEnv(4000),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** alias: user ids in log lines are written as their alias (scope 'logs'), for subs that are personal data. */
  LOG_USER_IDS: z.enum(['clear', 'alias']).default('clear'),

  DATABASE_URL: z.string().url().optional(),
  PGLITE_DIR: z.string().default('./.data/pglite'),
  DATABASE_POOL_SIZE: intFromEnv(10, 1),
  /** How long a statement may wait for a lock (a table locked by a migration or by hand); then its request answers SERVICE_UNAVAILABLE. */
  DATABASE_LOCK_TIMEOUT_MS: intFromEnv(10_000, 100),
  /** How long a statement may run, and a request wait for a pooled connection (the lesser of this and 10 s); 0 would be no limit, so at least 1 s. */
  DATABASE_STATEMENT_TIMEOUT_MS: intFromEnv(30_000, 1000),

  REDIS_URL: z.string().url().default('redis://127.0.0.1:6379'),
  REDIS_KEY_PREFIX: z.string().default('cb:'),
  /** Set (`host:port,host:port,…`, some nodes of it): a Redis Cluster instead of the server at REDIS_URL, whose credentials it still takes. */
  REDIS_CLUSTER_NODES: z
    .string()
    .default('')
    .transform((value) =>
      value
        .split(',')
        .map((node) => node.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().regex(/^[^\s:,]+:\d{1,5}$/, 'REDIS_CLUSTER_NODES must list host:port, separated by commas'))),
  /** How long a start waits for a Redis that accepts connections to be ready (a cluster: in state ok) before it refuses; one refusing connections is refused at once. */
  REDIS_CONNECT_TIMEOUT_MS: intFromEnv(DEFAULT_REDIS_CONNECT_TIMEOUT_MS, 100),
  /** How long a Redis command waits for its reply before its request answers SERVICE_UNAVAILABLE (a hung Redis closes nothing). */
  REDIS_COMMAND_TIMEOUT_MS: intFromEnv(DEFAULT_REDIS_COMMAND_TIMEOUT_MS, 100),

  JWT_SECRET: z.string().min(32, 'JWT_SECRET must be at least 32 characters').optional(),
  /** Keys the per-campaign aliases other users see instead of a user id; unset: derived from the JWT secret. */
  USER_ALIAS_SECRET: z.string().min(32, 'USER_ALIAS_SECRET must be at least 32 characters').optional(),
  /** Tokens whose exp lies further than this from iat (or from now) are refused. */
  JWT_MAX_LIFETIME_SECONDS: intFromEnv(7 * 86_400, 1),
  JWT_ISSUER: z.string().optional(),
  JWT_AUDIENCE: z.string().optional(),
  /** Set: RS256/ES256 tokens of the identity provider publishing these keys, instead of HS256 with JWT_SECRET. */
  JWT_JWKS_URL: fetchedUrl.optional(),
  /**
   * 1: the web app's development sign-in (POST /app/dev-token) mints a token, operators' too,
   * for any name. Unset: only with the generated development secret, which no other server
   * trusts; a set JWT_SECRET may be shared with production. Never in production.
   */
  DEV_TOKENS: z.enum(['0', '1']).optional(),
  /**
   * 1: sandboxPay pays any payment as the provider would. Unset: only while
   * PAYMENT_WEBHOOK_SECRET is unset (the generated secret no provider knows), since a set one
   * may be production's and NODE_ENV may have been left unset. Never in production, whatever it says.
   */
  SANDBOX_PAYMENTS: z.enum(['0', '1']).optional(),

  RATE_LIMIT_MUTATIONS: intFromEnv(30),
  RATE_LIMIT_WINDOW_MS: intFromEnv(1000, 1),
  RATE_LIMIT_ANONYMOUS: intFromEnv(100),
  /** Cost units per window that a caller's costly operations may take (see src/guards/operationCost.ts); operators are not counted. */
  RATE_LIMIT_COST: intFromEnv(40_000),
  RATE_LIMIT_WS_CONNECTIONS: intFromEnv(20),
  /** graphql-ws sockets open at once per client address (an IPv6 client: its /64) in one process; 0: no limit. */
  WS_CONNECTIONS_PER_ADDRESS: intFromEnv(256),
  /** A graphql-ws socket without a live operation for this long is closed; 0: never. */
  WS_IDLE_TIMEOUT_MS: intFromEnv(300_000),
  SUBSCRIPTIONS_PER_USER: intFromEnv(200),
  SUBSCRIPTIONS_PER_SOCKET: intFromEnv(100),
  /** graphql-sse single connection mode: a stream reserved (PUT) but not connected within this is dropped. */
  SSE_RESERVATION_TIMEOUT_MS: intFromEnv(30_000, 1),
  /** How many proxies in front of the server append to X-Forwarded-For; 0: the socket's peer is the client. */
  TRUST_PROXY: intFromEnv(0),

  GRAPHQL_MAX_DEPTH: intFromEnv(10, 1),
  /** See src/guards/operationCost.ts: 1 per field, the selection under a `limit`/`first` argument once per item. */
  GRAPHQL_MAX_COST: intFromEnv(10_000, 1),
  GRAPHQL_MAX_ALIASES: intFromEnv(15, 1),
  GRAPHQL_MAX_TOKENS: intFromEnv(2000, 1),
  /** See src/guards/bodySize.ts: the largest request body of a user or an anonymous caller (at least what the fast lane takes), and of an operator. */
  GRAPHQL_MAX_BODY_BYTES: intFromEnv(64 * 1024, 64 * 1024),
  GRAPHQL_MAX_OPERATOR_BODY_BYTES: intFromEnv(2 * 1024 * 1024, 1024),
  /** 1: plain JSON POSTs skip Yoga's fetch layer (see src/fastLane.ts); 0: Yoga serves every request. */
  GRAPHQL_FAST_LANE: z.enum(['0', '1']).default('1'),
  /**
   * Persisted documents (src/trustedDocuments.ts): off, only query text; allow, text or the
   * documentId of one in the web app's manifest; only, documentIds alone except from operators.
   */
  GRAPHQL_TRUSTED_DOCUMENTS: z.enum(['off', 'allow', 'only']).default('allow'),

  JOURNAL_BATCH_MAX: intFromEnv(256, 1),
  JOURNAL_BATCH_WAIT_MS: intFromEnv(5, 0),
  JOURNAL_MAX_INFLIGHT: intFromEnv(4, 1),
  JOURNAL_SWEEP_AFTER_MS: intFromEnv(3000, 100),
  SWEEP_INTERVAL_MS: intFromEnv(1000, 50),
  TEAM_SWEEP_INTERVAL_MS: intFromEnv(200, 20),
  SHUTDOWN_TIMEOUT_MS: intFromEnv(10_000, 100),

  LOTTERY_SCHEDULE_INTERVAL_MS: intFromEnv(30_000, 50),
  /** Tests only: lets the lottery scripts see Redis TIME plus the offset kept in Redis at testclock:offsetMs. */
  TEST_CLOCK: z.enum(['0', '1']).default('0'),
  WEB_CONCURRENCY: intFromEnv(1, 1),
  /** Descriptors accepting on the listening socket, each one connection per event-loop turn (src/acceptors.ts). */
  HTTP_ACCEPTORS: intFromEnv(64, 1),

  /** Unset: vouchers are marked DELIVERED, logged and announced on the event bus. Set: POSTed here. */
  POINTS_DELIVERY_WEBHOOK_URL: fetchedUrl.optional(),
  /** Signs each delivery (`Delivery-Signature`), which carries a voucher code in clear; required with the URL. */
  POINTS_DELIVERY_WEBHOOK_SECRET: z.string().min(32, 'POINTS_DELIVERY_WEBHOOK_SECRET must be at least 32 characters').optional(),
  POINTS_DELIVERY_TIMEOUT_MS: intFromEnv(10_000, 100),
  POINTS_DELIVERY_RETRY_MS: intFromEnv(1000, 10),
  /**
   * The points shop's Redis buckets, each its own hash tag (so its own cluster slot): users
   * hash to one, goods stock is spread over all (src/domain/points/buckets.ts). 1: the one
   * {shop} slot. Change it only with the shop's keys dropped (docs/operations.md).
   */
  POINTS_SHOP_BUCKETS: z.coerce.number().int().min(1).max(64).default(1),
  /** A paid draw's reservation whose draw is not committed by then is released by the sweeper. */
  DRAW_RESERVATION_TIMEOUT_MS: intFromEnv(60_000, 100),
  /**
   * Tests only (NODE_ENV=test): after this many paid draws have reserved their points,
   * every later one stops for good right after its reservation, as a process would
   * whose draw never came (a crash test then kills it).
   */
  TEST_HANG_AFTER_DRAW_RESERVATIONS: z.coerce.number().int().min(0).optional(),
  /** Tests only (NODE_ENV=test): after this many stock transfers between buckets were taken, every later one stops for good before its give. */
  TEST_HANG_AFTER_STOCK_TAKES: z.coerce.number().int().min(0).optional(),
  /**
   * Tests only (NODE_ENV=test): the lease of the locks a rebuild, an operator's change or a
   * stock transfer takes, 10 s otherwise: how long such a lock outlives a process killed
   * holding it, as a crash test's is.
   */
  TEST_LOCK_TTL_MS: z.coerce.number().int().min(300).optional(),

  /** Keys the HMAC of the payment provider's notifies (POST /payments/notify); unset outside production: a generated development secret. */
  PAYMENT_WEBHOOK_SECRET: z.string().min(32, 'PAYMENT_WEBHOOK_SECRET must be at least 32 characters').optional(),
  /** Unset: every refund is paid to the user's wallet. Set: refunds of a provider payment are POSTed here. */
  REFUND_WEBHOOK_URL: fetchedUrl.optional(),
  /** Signs the refund webhook's requests (Refund-Signature); required with REFUND_WEBHOOK_URL. */
  REFUND_WEBHOOK_SECRET: z.string().min(32, 'REFUND_WEBHOOK_SECRET must be at least 32 characters').optional(),
  REFUND_WEBHOOK_TIMEOUT_MS: intFromEnv(10_000, 100),
  REFUND_RETRY_MS: intFromEnv(1000, 10),

  /** GET /metrics (Prometheus). Unset: on outside production, and in production only with METRICS_TOKEN. */
  METRICS: z.enum(['off', 'on']).optional(),
  /** Set: /metrics needs Authorization: Bearer <METRICS_TOKEN>. Required for METRICS=on in production. */
  METRICS_TOKEN: z.string().min(16, 'METRICS_TOKEN must be at least 16 characters').optional(),

  /** 1: unexpected errors carry the original error (message, stack) to the client, in any NODE_ENV. */
  GRAPHQL_EXPOSE_ERRORS: z.enum(['0', '1']).default('0'),
  /** Comma-separated origins allowed cross-origin; unset: own origin and localhost outside production, none in production. */
  CORS_ORIGINS: z
    .string()
    .refine((list) => list.split(',').every((entry) => /^https?:\/\/[^/\s]+$/.test(entry.trim()) || entry.trim() === ''), {
      message: 'CORS_ORIGINS must be a comma-separated list of origins such as https://shop.example',
    })
    .optional(),
});

export type Env = z.infer<typeof envSchema>;

export interface Config extends Omit<Env, 'JWT_SECRET' | 'PAYMENT_WEBHOOK_SECRET'> {
  paymentWebhookSecret: string;
  /** Empty when JWT_JWKS_URL is set. */
  jwtSecret: string;
  /** True when JWT_SECRET was unset and the development secret in .data/ is used. */
  jwtSecretGenerated: boolean;
  /** Whether POST /app/dev-token mints tokens (DEV_TOKENS). */
  devTokens: boolean;
  /** Whether sandboxPay exists (SANDBOX_PAYMENTS). */
  sandboxPayments: boolean;
  /** Keys the aliases of other users' ids: USER_ALIAS_SECRET, else the JWT secret, else (JWT_JWKS_URL, outside production) a generated one. */
  userAliasSecret: string;
  databaseSchema: string | undefined;
}

export class ConfigError extends Error {}

/** Parses the environment once; every problem is reported in one line per variable. */
export function loadConfig(source: NodeJS.ProcessEnv = process.env): Config {
  const cleaned = Object.fromEntries(Object.entries(source).filter(([, value]) => value !== ''));
  const parsed = envSchema.safeParse(cleaned);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`invalid configuration: ${lines.join('; ')}`);
  }
  const { JWT_SECRET, PAYMENT_WEBHOOK_SECRET, ...env } = parsed.data;
  if (env.WEB_CONCURRENCY > 1 && !env.DATABASE_URL) {
    throw new ConfigError('WEB_CONCURRENCY > 1 needs DATABASE_URL: the embedded PGlite database belongs to one process');
  }
  if (env.TEST_HANG_AFTER_DRAW_RESERVATIONS !== undefined && env.NODE_ENV !== 'test') {
    throw new ConfigError('TEST_HANG_AFTER_DRAW_RESERVATIONS stops paid draws on purpose and is only allowed when NODE_ENV=test');
  }
  if (env.TEST_HANG_AFTER_STOCK_TAKES !== undefined && env.NODE_ENV !== 'test') {
    throw new ConfigError('TEST_HANG_AFTER_STOCK_TAKES stops stock transfers on purpose and is only allowed when NODE_ENV=test');
  }
  if (env.TEST_LOCK_TTL_MS !== undefined && env.NODE_ENV !== 'test') {
    throw new ConfigError('TEST_LOCK_TTL_MS shortens the leases of campaign locks and is only allowed when NODE_ENV=test');
  }
  if (env.TEST_CLOCK === '1' && env.NODE_ENV !== 'test') {
    throw new ConfigError('TEST_CLOCK=1 shifts the time scripts see and is only allowed when NODE_ENV=test');
  }
  if (env.DEV_TOKENS === '1' && env.NODE_ENV === 'production') {
    throw new ConfigError('DEV_TOKENS=1 lets anyone mint operator tokens and is refused when NODE_ENV=production');
  }
  if (env.JWT_JWKS_URL && env.NODE_ENV === 'production') {
    // The identity provider signs tokens for its other apps with the same keys, and their roles are theirs.
    if (!env.JWT_AUDIENCE) throw new ConfigError('JWT_JWKS_URL needs JWT_AUDIENCE when NODE_ENV=production: without it, a token the identity provider minted for another app signs in here');
    if (new URL(env.JWT_JWKS_URL).protocol !== 'https:') throw new ConfigError('JWT_JWKS_URL must be https:// when NODE_ENV=production: the keys decide who signs in');
    // Keyed on nothing, aliases can be computed by anyone and turned back into ids.
    if (!env.USER_ALIAS_SECRET)
      throw new ConfigError('JWT_JWKS_URL needs USER_ALIAS_SECRET (at least 32 characters) when NODE_ENV=production: there is no JWT secret to key the user aliases with');
  }
  if (env.POINTS_DELIVERY_WEBHOOK_URL && !env.POINTS_DELIVERY_WEBHOOK_SECRET) {
    throw new ConfigError('POINTS_DELIVERY_WEBHOOK_URL needs POINTS_DELIVERY_WEBHOOK_SECRET (at least 32 characters) to sign the vouchers it is sent');
  }
  if (env.REFUND_WEBHOOK_URL && !env.REFUND_WEBHOOK_SECRET) {
    throw new ConfigError('REFUND_WEBHOOK_URL needs REFUND_WEBHOOK_SECRET (at least 32 characters) to sign the refunds it is sent');
  }
  if (!JWT_SECRET && !env.JWT_JWKS_URL && env.NODE_ENV === 'production') {
    throw new ConfigError('JWT_SECRET (at least 32 characters) or JWT_JWKS_URL is required when NODE_ENV=production');
  }
  if (env.METRICS === 'on' && !env.METRICS_TOKEN && env.NODE_ENV === 'production') {
    throw new ConfigError('METRICS=on needs METRICS_TOKEN (at least 16 characters) when NODE_ENV=production: /metrics must not be open to anyone');
  }
  if (!PAYMENT_WEBHOOK_SECRET && env.NODE_ENV === 'production') {
    throw new ConfigError('PAYMENT_WEBHOOK_SECRET (at least 32 characters) is required when NODE_ENV=production');
  }
  const jwtSecretGenerated = !JWT_SECRET && !env.JWT_JWKS_URL;
  return {
    ...env,
    paymentWebhookSecret: PAYMENT_WEBHOOK_SECRET ?? readOrCreateDevSecret(DEV_PAYMENT_SECRET_FILE),
    // With JWT_JWKS_URL the secret is not used, so none is generated.
    jwtSecret: JWT_SECRET ?? (env.JWT_JWKS_URL ? '' : readOrCreateDevSecret()),
    jwtSecretGenerated,
    devTokens: env.NODE_ENV !== 'production' && (env.DEV_TOKENS === undefined ? jwtSecretGenerated : env.DEV_TOKENS === '1'),
    sandboxPayments: env.NODE_ENV !== 'production' && (env.SANDBOX_PAYMENTS === undefined ? !PAYMENT_WEBHOOK_SECRET : env.SANDBOX_PAYMENTS === '1'),
    userAliasSecret: env.USER_ALIAS_SECRET ?? JWT_SECRET ?? (env.JWT_JWKS_URL ? readOrCreateDevSecret(DEV_ALIAS_SECRET_FILE) : readOrCreateDevSecret()),
    databaseSchema: env.DATABASE_URL ? (new URL(env.DATABASE_URL).searchParams.get('schema') ?? undefined) : undefined,
  };
}
