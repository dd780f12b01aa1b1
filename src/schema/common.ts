import { GraphQLError, Kind } from 'graphql';
import { builder } from '../builder.ts';
import type { Context } from '../context.ts';
import type { AliasScope } from '../domain/privacy.ts';
import { NotFound, type Problem } from '../domain/problems.ts';
import { ErrorCode, graphqlError } from '../errors.ts';

function parseDateTime(value: unknown): Date {
  const date = typeof value === 'string' ? new Date(value) : new Date(Number.NaN);
  if (Number.isNaN(date.getTime())) {
    throw new GraphQLError('DateTime must be an ISO-8601 string', { extensions: { code: ErrorCode.badUserInput } });
  }
  return date;
}

builder.scalarType('DateTime', {
  description: 'An ISO-8601 timestamp, always serialized in UTC.',
  serialize: (value) => (value instanceof Date ? value : new Date(value)).toISOString(),
  parseValue: parseDateTime,
  parseLiteral: (node) => parseDateTime(node.kind === Kind.STRING ? node.value : undefined),
});

export const ProblemInterface = builder.interfaceRef<Problem>('Problem').implement({
  description: 'A business reason why an operation did not happen. Nothing was changed.',
  fields: (t) => ({ message: t.exposeString('message') }),
});

/** What every problem object shares: it implements Problem and is recognised by its class. */
export function asProblem(problemClass: abstract new (...args: never[]) => Problem) {
  return {
    interfaces: [ProblemInterface],
    isTypeOf: (value: unknown) => value instanceof problemClass,
  };
}

builder.objectType(NotFound, { name: 'NotFound', ...asProblem(NotFound) });

/** NOT_FOUND for a field whose result type has no NotFound member; `what` names the campaign, with its id. */
export function notFoundError(what: string): GraphQLError {
  return graphqlError(ErrorCode.notFound, `${what} does not exist`);
}

/**
 * A subscription to one campaign: NOT_FOUND at once when it does not exist, rather than
 * a stream that would stay silent; otherwise its events (`watch` may look the campaign up first).
 */
export async function watchExisting<T>(what: string, found: Promise<unknown>, watch: () => AsyncIterable<T> | Promise<AsyncIterable<T>>): Promise<AsyncIterable<T>> {
  if (!(await found)) throw notFoundError(what);
  return watch();
}

/** A user id as the caller may see it in a campaign: the id itself or an alias (src/domain/privacy.ts). */
export function shownUserId(context: Context, scope: AliasScope, userId: string): string {
  return context.app.userAliases.shownTo(context.viewer, scope, userId);
}
