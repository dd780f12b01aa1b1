import type { GraphQLError } from 'graphql';
import type { App } from './app.ts';
import { ErrorCode, graphqlError, unavailableError } from './errors.ts';
import { DEFAULT_LOCALE, type ErrorWording, type Locale, type RuleValues, errorMessage, localeOf } from './i18n/messages.ts';
import { AuthFailure, TokenRefusedError, type Viewer, bearerToken } from './infra/auth/tokens.ts';
import { logRepeating } from './infra/logger.ts';
import { authRefusals } from './infra/metrics.ts';
import { requestIdOrNew } from './requestId.ts';

export interface Context {
  app: App;
  /** Who is calling; null without a token. */
  viewer: Viewer | null;
  /** Why the Authorization sent is refused; the whole operation is answered with it (useCredentialRefusal). */
  credentialError: GraphQLError | null;
  /** The language messages are worded in, from Accept-Language. */
  locale: Locale;
  /** The request's id (src/requestId.ts); a graphql-ws operation has its own. Every line logged while serving it carries it. */
  requestId: string;
}

/** The context of a field built with `t.withAuth({ signedIn: true })` (or `admin`): scope auth has checked the viewer. */
export type SignedInContext = Context & { viewer: Viewer };

/** What Yoga's context factory is given: an HTTP request, or a graphql-ws operation. */
export interface TransportContext {
  request?: { headers: { get(name: string): string | null } };
  connectionParams?: Record<string, unknown>;
  params?: { extensions?: Record<string, unknown> | null };
}

/** The value of a key named `header` (lower case) in any case, if it is a non-blank string. */
function headerIn(record: unknown, header: string): string | undefined {
  if (typeof record !== 'object' || record === null) return undefined;
  for (const [name, value] of Object.entries(record)) {
    if (typeof value === 'string' && value.trim() !== '' && name.toLowerCase() === header) return value;
  }
  return undefined;
}

/**
 * A header of the caller's. Over HTTP, the request's. Over graphql-ws, the first of: the
 * operation's own `extensions.headers` (what GraphiQL sends from its headers tab),
 * `connectionParams.<header>`, and Apollo's `connectionParams.headers.<header>`, names in
 * any case. The operation's own header wins so one socket can carry several callers.
 */
function headerOf({ request, connectionParams, params }: TransportContext, header: string): string | undefined {
  if (request) return request.headers.get(header) ?? undefined;
  return headerIn(params?.extensions?.headers, header) ?? headerIn(connectionParams, header) ?? headerIn(connectionParams?.headers, header);
}

/**
 * The part of graphql-ws's connectionParams that headerOf reads, in its own shape. graphql-ws
 * keeps the payload for the life of the socket, so a socket keeps only this, not whatever
 * else (up to a frame of it) a client put there.
 */
export function connectionHeaders(connectionParams: Record<string, unknown> | undefined): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const [header, maxLength] of KEPT_CONNECTION_HEADERS) {
    const value = headerIn(connectionParams, header) ?? headerIn(connectionParams?.headers, header);
    // Cut, not dropped: a token cut short is refused as one, not taken for no token at all.
    if (value !== undefined) kept[header] = value.slice(0, maxLength);
  }
  return kept;
}

/** What a socket keeps of its connection_init payload, and at most how much of each. */
const KEPT_CONNECTION_HEADERS = [
  ['authorization', 16 * 1024],
  ['accept-language', 256],
] as const;

/** The caller's Authorization (see headerOf for where it is read). */
export function authorizationOf(transport: TransportContext): string | undefined {
  return headerOf(transport, 'authorization');
}

/** The language the caller reads, from its Accept-Language (see headerOf for where it is read). */
export function localeOfCaller(transport: TransportContext): Locale {
  return localeOf(headerOf(transport, 'accept-language'));
}

/**
 * Builds the context. No Authorization means an anonymous caller. An Authorization that
 * does not verify becomes `credentialError`, which refuses the whole operation with
 * UNAUTHENTICATED and its reason, even on fields anyone may read, so a client with a stale
 * token learns it at once. Kept as a value rather than thrown, so every transport (HTTP,
 * SSE, graphql-sse, graphql-ws) answers it as an ordinary GraphQL result.
 */
export async function buildContext(app: App, authorization: string | undefined, locale: Locale = DEFAULT_LOCALE, requestId: string = requestIdOrNew()): Promise<Context> {
  const context: Context = { app, viewer: null, credentialError: null, locale, requestId };
  if (!authorization?.trim()) return context;
  const refused = (credentialError: GraphQLError): Context => {
    context.credentialError = credentialError;
    return context;
  };
  // Counted, not logged: anyone can send a bad token. A secret or key mismatch between
  // instances, or a key rotation at the identity provider, shows as a rise of BAD_SIGNATURE.
  const refusedToken = (reason: AuthFailure, wording: ErrorWording, values?: RuleValues): Context => {
    authRefusals.inc({ reason });
    return refused(unauthenticated(reason, wording, locale, values));
  };
  const token = bearerToken(authorization);
  if (!token) return refusedToken(AuthFailure.malformed, 'BEARER_EXPECTED');
  try {
    context.viewer = await app.tokens.verify(token);
    return context;
  } catch (error) {
    if (error instanceof TokenRefusedError) return refusedToken(error.reason, error.wording, error.values);
    logRepeating(app.log, 'warn', { err: error }, 'cannot verify a token');
    return refused(unavailableError(errorMessage('TOKENS_UNVERIFIABLE', locale)));
  }
}

/** UNAUTHENTICATED with its reason in `extensions.reason`, worded in `locale` (English by default). */
export function unauthenticated(reason: AuthFailure, wording: ErrorWording, locale: Locale = DEFAULT_LOCALE, values: RuleValues = {}) {
  return graphqlError(ErrorCode.unauthenticated, errorMessage(wording, locale, values), { reason });
}
