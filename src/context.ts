import type { GraphQLError } from 'graphql';
import type { App } from './app.ts';
import { ErrorCode, graphqlError, unavailableError } from './errors.ts';
import { AuthFailure, TokenRefusedError, type Viewer, bearerToken } from './infra/auth/tokens.ts';

export interface Context {
  app: App;
  /** Who is calling; null without a token. */
  viewer: Viewer | null;
  /** Why the Authorization sent is refused; the whole operation is answered with it (useCredentialRefusal). */
  credentialError: GraphQLError | null;
}

/** The context of a field built with `t.withAuth({ signedIn: true })` (or `admin`): scope auth has checked the viewer. */
export type SignedInContext = Context & { viewer: Viewer };

/** What Yoga's context factory is given: an HTTP request, or a graphql-ws operation. */
export interface TransportContext {
  request?: { headers: { get(name: string): string | null } };
  connectionParams?: Record<string, unknown>;
  params?: { extensions?: Record<string, unknown> };
}

/** The value of a key named `authorization` in any case, if it is a non-blank string. */
function authorizationIn(record: unknown): string | undefined {
  if (typeof record !== 'object' || record === null) return undefined;
  for (const [name, value] of Object.entries(record)) {
    if (typeof value === 'string' && value.trim() !== '' && name.toLowerCase() === 'authorization') return value;
  }
  return undefined;
}

/**
 * The caller's Authorization. Over HTTP, the header. Over graphql-ws, the first of: the
 * operation's own `extensions.headers` (what GraphiQL sends from its headers tab),
 * `connectionParams.authorization`, and Apollo's `connectionParams.headers.authorization`,
 * names in any case. The operation's own header wins so one socket can carry several callers.
 */
export function authorizationOf({ request, connectionParams, params }: TransportContext): string | undefined {
  if (request) return request.headers.get('authorization') ?? undefined;
  return authorizationIn(params?.extensions?.headers) ?? authorizationIn(connectionParams) ?? authorizationIn(connectionParams?.headers);
}

/**
 * Builds the context. No Authorization means an anonymous caller. An Authorization that
 * does not verify becomes `credentialError`, which refuses the whole operation with
 * UNAUTHENTICATED and its reason, even on fields anyone may read, so a client with a stale
 * token learns it at once. Kept as a value rather than thrown, so every transport (HTTP,
 * SSE, graphql-sse, graphql-ws) answers it as an ordinary GraphQL result.
 */
export async function buildContext(app: App, authorization: string | undefined): Promise<Context> {
  if (!authorization?.trim()) return { app, viewer: null, credentialError: null };
  const token = bearerToken(authorization);
  if (!token) return refused(app, unauthenticated(AuthFailure.malformed, 'send Authorization: Bearer <token>'));
  try {
    return { app, viewer: await app.tokens.verify(token), credentialError: null };
  } catch (error) {
    if (error instanceof TokenRefusedError) return refused(app, unauthenticated(error.reason, error.message));
    app.log.warn({ err: error }, 'cannot verify a token');
    return refused(app, unavailableError('cannot verify tokens right now; retry shortly'));
  }
}

function refused(app: App, credentialError: GraphQLError): Context {
  return { app, viewer: null, credentialError };
}

/** UNAUTHENTICATED with its reason in `extensions.reason`. */
export function unauthenticated(reason: AuthFailure, message: string) {
  return graphqlError(ErrorCode.unauthenticated, message, { reason });
}
