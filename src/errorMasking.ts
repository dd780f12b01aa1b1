import { type ExecutionResult, GraphQLError } from 'graphql';
import { maskError } from 'graphql-yoga';
import { BadInputError, DomainError, ServiceUnavailableError } from './domain/errors.ts';
import { ErrorCode, answeredError } from './errors.ts';
import { badInputInLocale } from './i18n/issues.ts';
import { DEFAULT_LOCALE, type Locale, errorMessage } from './i18n/messages.ts';
import { type Logger, oncePerWindow } from './infra/logger.ts';
import { currentLocale } from './requestId.ts';

// Socket errors of ioredis, pg and Prisma's pg adapter when a store is down or restarting.
// biome-ignore format: one line per source reads better than one code per line
const OUTAGE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN',
  // Prisma: can't reach, timed out, connection closed, pool timeout, too many connections.
  'P1001', 'P1002', 'P1008', 'P1017', 'P2024', 'P2037',
  // PostgreSQL: connection failures (not 08P01, a protocol violation of ours), admin/crash
  // shutdown, cannot connect now, too many connections; a lock wait or a statement past its
  // limit (lock_timeout, statement_timeout: see database.ts).
  '08000', '08001', '08003', '08004', '08006', '57P01', '57P02', '57P03', '53300', '55P03', '57014',
]);
// Driver adapter error kinds (@prisma/driver-adapter-utils) that mean the database is unreachable.
const OUTAGE_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
const OUTAGE_NAMES = new Set(['MaxRetriesPerRequestError', 'ClusterAllFailedError']);
const OUTAGE_MESSAGES = [
  // ioredis, while disconnected or when a connection drops with commands in flight.
  /^Connection is closed\.?$/,
  /^Command aborted due to connection close/,
  /^Stream isn't writeable/,
  // ioredis, when a command got no reply within REDIS_COMMAND_TIMEOUT_MS (a hung Redis).
  /^Command timed out$/,
  // Redis replies while (re)starting or failing over. A cluster node's MOVED or ASK (the
  // command did not run) reaches callers when ioredis cannot redirect an auto-pipeline
  // whose commands were moved to different nodes, as its slot map lags a failover.
  /^(LOADING|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|NOSCRIPT|READONLY|MOVED|ASK)\b/,
  // pg, when the server goes away under a client.
  /^Connection terminated/,
  /^timeout exceeded when trying to connect/,
  // Prisma (P2028), when every pooled connection stayed busy for the transaction's maxWait.
  /Unable to start a transaction in the given time/,
  /is not queryable/,
  /^terminating connection due to administrator command/,
];

/** The causes an error carries: GraphQL's originalError, Error.cause, Prisma's driver adapter error. */
function causesOf(error: Record<string, unknown>): unknown[] {
  const meta = error.meta as Record<string, unknown> | undefined;
  return [error.originalError, error.cause, meta?.driverAdapterError];
}

/** True when the error, or anything it wraps, says Redis or PostgreSQL is unreachable or restarting. */
export function isStoreOutage(error: unknown, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 6) return false;
  const fields = error as Record<string, unknown>;
  for (const key of ['code', 'originalCode'] as const) {
    if (typeof fields[key] === 'string' && OUTAGE_CODES.has(fields[key])) return true;
  }
  if (typeof fields.kind === 'string' && OUTAGE_KINDS.has(fields.kind)) return true;
  if (typeof fields.name === 'string' && OUTAGE_NAMES.has(fields.name)) return true;
  if (typeof fields.message === 'string' && OUTAGE_MESSAGES.some((pattern) => pattern.test(fields.message as string))) return true;
  return causesOf(fields).some((cause) => cause !== error && isStoreOutage(cause, depth + 1));
}

/** The DomainError an error is, or wraps as GraphQL's original error. */
function domainErrorIn(error: unknown): DomainError | undefined {
  for (let current = error; current; current = current instanceof GraphQLError ? current.originalError : undefined) {
    if (current instanceof DomainError) return current;
  }
  return undefined;
}

/**
 * Whether an error of a result, masked or not yet, is answered SERVICE_UNAVAILABLE: an
 * outage of a store, a service's ServiceUnavailableError, or an answer already made.
 */
export function answersUnavailable(error: GraphQLError): boolean {
  if (error.extensions?.code === ErrorCode.unavailable) return true;
  const domain = domainErrorIn(error);
  return domain ? domain instanceof ServiceUnavailableError : isStoreOutage(error);
}

export type MaskErrorFunction = (error: unknown, message: string) => Error;

/**
 * Yoga's error masking, in one place for every transport, and the one place a domain
 * error becomes a GraphQL error: a DomainError (src/domain/errors.ts) is answered with
 * its message and extensions, an outage of Redis or PostgreSQL becomes
 * SERVICE_UNAVAILABLE with a retry hint, and anything else unexpected becomes
 * "Unexpected error.". The original error (a Prisma message, file paths, a stack)
 * reaches the client only with `exposeErrors` (GRAPHQL_EXPOSE_ERRORS=1), whatever
 * NODE_ENV says.
 *
 * Yoga passes no context, so the caller's language is the request's (src/requestId.ts).
 * A rule issue the domain worded in English is worded again in it. Outside English, every SERVICE_UNAVAILABLE says the same (the services word theirs in
 * English, with the detail an operator reads in the log), and so does every unexpected error.
 */
export function createErrorMasking(exposeErrors: boolean): MaskErrorFunction {
  return (error, message) => {
    const located = error instanceof GraphQLError ? error : undefined;
    const domain = domainErrorIn(error);
    if (!domain && isStoreOutage(error)) return answeredError(unavailableIn(currentLocale()), located);
    if (domain instanceof ServiceUnavailableError && !domain.inCallerLanguage) {
      const locale = currentLocale();
      if (locale !== DEFAULT_LOCALE) return answeredError(unavailableIn(locale), located);
    }
    if (domain instanceof BadInputError) {
      const worded = badInputInLocale(domain, currentLocale());
      if (worded !== domain) return answeredError(worded, located);
    }
    // graphql-js has already copied a resolver's DomainError into a located error: kept as
    // it is, so Yoga does not log an answer the client was meant to get.
    if (domain) return located?.originalError === domain ? located : answeredError(domain, located);
    const locale = currentLocale();
    return maskError(error, locale === DEFAULT_LOCALE ? message : errorMessage('UNEXPECTED_ERROR', locale), exposeErrors);
  };
}

const unavailableIn = (locale: Locale) => new ServiceUnavailableError(errorMessage('BRIEFLY_UNAVAILABLE', locale), { inCallerLanguage: true });

/** Seconds for a Retry-After header: the longest retry hint among the result's errors, if any. */
export function retryAfterSeconds(result: ExecutionResult | readonly ExecutionResult[]): number | undefined {
  let longestMs: number | undefined;
  for (const single of Array.isArray(result) ? result : [result as ExecutionResult]) {
    for (const error of single.errors ?? []) {
      const hint = error.extensions?.retryAfterMs;
      if (typeof hint === 'number' && hint >= 0) longestMs = Math.max(longestMs ?? 0, hint);
    }
  }
  return longestMs === undefined ? undefined : Math.max(1, Math.ceil(longestMs / 1000));
}

/**
 * Yoga's log line for an error it masked. An outage gets a stable message, `outage: true` and
 * the driver's error, at most one a second with how many it left out (an outage at a flash
 * crowd's rate would write thousands a second); anything else unexpected is logged each time.
 */
export function maskedErrorLog(log: Logger): (...args: unknown[]) => void {
  const logOutage = oncePerWindow(1_000);
  return (...args) => {
    const [error] = args;
    if (args.length !== 1 || !(error instanceof Error)) {
      log.error(args.map(String).join(' '));
      return;
    }
    if (isStoreOutage(error)) logOutage((skipped) => log.error({ err: error, outage: true, skipped }, 'a store is unreachable or too slow; answered SERVICE_UNAVAILABLE'));
    else log.error({ err: error }, 'unexpected error; answered "Unexpected error."');
  };
}
