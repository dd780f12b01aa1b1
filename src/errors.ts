import { GraphQLError } from 'graphql';

/** The error codes of the public contract (API.md). */
export const ErrorCode = {
  badUserInput: 'BAD_USER_INPUT',
  unauthenticated: 'UNAUTHENTICATED',
  forbidden: 'FORBIDDEN',
  rateLimited: 'RATE_LIMITED',
  notFound: 'NOT_FOUND',
  unavailable: 'SERVICE_UNAVAILABLE',
} as const;

export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

export function graphqlError(code: ErrorCode, message: string, extensions: Record<string, unknown> = {}): GraphQLError {
  return new GraphQLError(message, { extensions: { code, ...extensions } });
}

/**
 * A temporary failure the client should retry (a packet being rebuilt, a commit that
 * could not be confirmed). Its message reaches the client with `SERVICE_UNAVAILABLE`
 * instead of being masked as an unexpected error.
 */
export class ServiceUnavailableError extends GraphQLError {
  constructor(message: string) {
    super(message, { extensions: { code: ErrorCode.unavailable } });
  }
}
