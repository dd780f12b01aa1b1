import { GraphQLError, type GraphQLErrorOptions } from 'graphql';

/** The error codes of the public contract (docs/api.md). */
export const ErrorCode = {
  badUserInput: 'BAD_USER_INPUT',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  rateLimited: 'RATE_LIMITED',
  notFound: 'NOT_FOUND',
  unavailable: 'SERVICE_UNAVAILABLE',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** The same error with another message or extensions; GraphQLError's fields are read-only. */
export function rebuiltError(error: GraphQLError, change: { message?: string; extensions?: Record<string, unknown> }): GraphQLError {
  return new GraphQLError(change.message ?? error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: change.extensions ?? error.extensions,
  });
}

export function graphqlError(code: ErrorCode, message: string, extensions: Record<string, unknown> = {}): GraphQLError {
  return new GraphQLError(message, { extensions: { code, ...extensions } });
}

/** How long a client should wait before retrying after SERVICE_UNAVAILABLE (about a Redis restart). */
export const RETRY_AFTER_UNAVAILABLE_MS = 1000;

/**
 * A temporary failure the client should retry (a packet being rebuilt, a commit that
 * could not be confirmed, Redis or PostgreSQL unreachable). Its message reaches the
 * client with `SERVICE_UNAVAILABLE` and `retryAfterMs` instead of being masked as an
 * unexpected error.
 */
export class ServiceUnavailableError extends GraphQLError {
  constructor(message: string, options: Pick<GraphQLErrorOptions, 'nodes' | 'path'> = {}) {
    super(message, { ...options, extensions: { code: ErrorCode.unavailable, retryAfterMs: RETRY_AFTER_UNAVAILABLE_MS } });
  }
}
