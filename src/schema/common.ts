import { GraphQLError, Kind } from 'graphql';
import { builder } from '../builder.ts';
import type { Context } from '../context.ts';
import type { AliasScope } from '../domain/privacy.ts';
import { NotFound, type Problem } from '../domain/problems.ts';
import { ErrorCode, graphqlError } from '../errors.ts';
import { problemMessage } from '../i18n/messages.ts';
import { redisTimeMs } from '../infra/redis/time.ts';

// PostgreSQL stores later years than the driver reads back: a row dated after 9999 could
// no longer be read, and every list holding it would fail.
const FIRST_DATE_MS = Date.UTC(1970, 0, 1);
const LAST_DATE_MS = Date.UTC(10_000, 0, 1) - 1;

function parseDateTime(value: unknown): Date {
  const date = typeof value === 'string' ? new Date(value) : new Date(Number.NaN);
  if (Number.isNaN(date.getTime())) {
    throw new GraphQLError('DateTime must be an ISO-8601 string', { extensions: { code: ErrorCode.badUserInput } });
  }
  if (date.getTime() < FIRST_DATE_MS || date.getTime() > LAST_DATE_MS) {
    throw new GraphQLError('DateTime must lie between 1970-01-01 and 9999-12-31', { extensions: { code: ErrorCode.badUserInput } });
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
  fields: (t) => ({
    code: t.exposeString('code', { description: 'Stable: the type name in CONSTANT_CASE (TeamFull: TEAM_FULL). Branch and translate on this.' }),
    message: t.string({
      description: "For people, in the language of the request's Accept-Language (zh-CN or en, the default).",
      resolve: (problem, _args, context) => problemMessage(problem, context.locale),
    }),
  }),
});

/** What every problem object shares: it implements Problem and is recognised by its class. */
export function asProblem(problemClass: abstract new (...args: never[]) => Problem) {
  return {
    interfaces: [ProblemInterface],
    isTypeOf: (value: unknown) => value instanceof problemClass,
  };
}

builder.objectType(NotFound, { name: 'NotFound', ...asProblem(NotFound) });

builder.queryField('serverTime', (t) =>
  t.field({
    type: 'DateTime',
    description: 'The clock every countdown is counted against (Redis time, shared by every instance): a client keeps its offset from this.',
    resolve: (_root, _args, { app }) => serverNow(app),
  }),
);

/** Redis time, the clock every countdown is counted against. */
export async function serverNow(app: Context['app']): Promise<Date> {
  return new Date(await redisTimeMs(app.redis));
}

/** The description of serverTime where it is read with the field (or, in a published state, with the state). */
export const serverTimeNote = 'Redis time when this was read: count down to the times here against it.';

/** NOT_FOUND for a field whose result type has no NotFound member, worded in the caller's language. */
export function notFoundError(missing: NotFound, { locale }: Pick<Context, 'locale'>): GraphQLError {
  return graphqlError(ErrorCode.notFound, problemMessage(missing, locale));
}

/**
 * A subscription to one campaign: NOT_FOUND at once when it does not exist, rather than
 * a stream that would stay silent; otherwise its events (`watch` may look the campaign up first).
 */
export async function watchExisting<T>(
  missing: NotFound,
  context: Pick<Context, 'locale'>,
  found: Promise<unknown>,
  watch: () => AsyncIterable<T> | Promise<AsyncIterable<T>>,
): Promise<AsyncIterable<T>> {
  if (!(await found)) throw notFoundError(missing, context);
  return watch();
}

/** A user id as the caller may see it in a campaign: the id itself or an alias (src/domain/privacy.ts). */
export function shownUserId(context: Context, scope: AliasScope, userId: string): string {
  return context.app.userAliases.shownTo(context.viewer, scope, userId);
}
