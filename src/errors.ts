import { GraphQLError } from 'graphql';
import { type DomainError, type ErrorCode, ServiceUnavailableError } from './domain/errors.ts';

export { ErrorCode } from './domain/errors.ts';

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

/**
 * The errors as a client over a socket or an event stream gets them: Yoga's
 * `extensions.http` (the status it would answer over HTTP) is for its own HTTP answers.
 */
export function withoutHttpStatus(errors: readonly GraphQLError[]): GraphQLError[] {
  return errors.map((error) => {
    if (error.extensions.http === undefined) return error;
    const { http: _status, ...extensions } = error.extensions;
    return rebuiltError(error, { extensions });
  });
}

/** A result as a client over a socket or an event stream gets it (see withoutHttpStatus); a stream of results passes as it is. */
export function resultWithoutHttpStatus<T>(result: T): T {
  if (typeof result !== 'object' || result === null || Symbol.asyncIterator in result) return result;
  const { errors } = result as { errors?: readonly GraphQLError[] };
  if (!errors?.some((error) => error.extensions?.http !== undefined)) return result;
  return { ...result, errors: withoutHttpStatus(errors) };
}

const WHOLE_REFUSAL_STATUS: Partial<Record<string, number>> = { UNAUTHENTICATED: 401, RATE_LIMITED: 429, SERVICE_UNAVAILABLE: 503 };

/**
 * An error that refuses a whole operation (no data), with the HTTP status the GraphQL over
 * HTTP spec wants for it under application/graphql-response+json: 401, 429 or 503. `spec`
 * keeps application/json answers and event streams at 200, as theirs wants (Yoga reads it).
 */
export function wholeRefusal(error: GraphQLError): GraphQLError {
  const status = WHOLE_REFUSAL_STATUS[String(error.extensions.code)];
  return status === undefined ? error : rebuiltError(error, { extensions: { ...error.extensions, http: { status, spec: true } } });
}

export function graphqlError(code: ErrorCode, message: string, extensions: Record<string, unknown> = {}): GraphQLError {
  return new GraphQLError(message, { extensions: { code, ...extensions } });
}

/**
 * A domain error as the client is answered: its message and extensions (graphql-js copies
 * them from the original error), at the place in the operation `located` names, if any.
 * The domain error stays its original error, so masking the answer again keeps it.
 */
export function answeredError(error: DomainError, located?: GraphQLError): GraphQLError {
  return new GraphQLError(error.message, {
    nodes: located?.nodes,
    source: located?.source,
    positions: located?.positions,
    path: located?.path,
    originalError: error,
  });
}

/** SERVICE_UNAVAILABLE with a retry hint, for refusals made at the edge itself, worded in the caller's language. */
export function unavailableError(message: string): GraphQLError {
  return answeredError(new ServiceUnavailableError(message, { inCallerLanguage: true }));
}
