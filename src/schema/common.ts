import { GraphQLError, Kind } from 'graphql';
import { builder } from '../builder.ts';
import type { Context } from '../context.ts';
import type { AliasScope } from '../domain/privacy.ts';
import { NotFound, Problem } from '../domain/problems.ts';
import { ErrorCode } from '../errors.ts';

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

/** A user id as the caller may see it in a campaign: the id itself or an alias (src/domain/privacy.ts). */
export function shownUserId(context: Context, scope: AliasScope, userId: string): string {
  return context.app.userAliases.shownTo(context.viewer, scope, userId);
}
