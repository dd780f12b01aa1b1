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

/**
 * RFC 3339: a date, a time and its zone (Z or an offset), as client libraries write one.
 * Without a zone a time would be read in the server process's own, so a campaign's window
 * would move with where it is deployed; free-form dates and days that do not exist (Date
 * rolls 2026-02-30 into March) are refused too.
 */
const RFC_3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:[Zz]|[+-](\d{2}):(\d{2}))$/;

function isRfc3339(value: string): boolean {
  const fields = RFC_3339.exec(value);
  if (!fields) return false;
  const [year, month, day, hour, minute, second = 0, offsetHours = 0, offsetMinutes = 0] = fields.slice(1).map((field) => (field === undefined ? undefined : Number(field)));
  const daysInMonth = new Date(Date.UTC(year!, month!, 0)).getUTCDate();
  return month! >= 1 && month! <= 12 && day! >= 1 && day! <= daysInMonth && hour! <= 23 && minute! <= 59 && second <= 59 && offsetHours <= 23 && offsetMinutes <= 59;
}

function parseDateTime(value: unknown): Date {
  if (typeof value !== 'string' || !isRfc3339(value)) {
    throw new GraphQLError('DateTime must be a date and time with its zone (RFC 3339), such as 2026-11-11T00:00:00Z or 2026-11-11T08:00:00+08:00', {
      extensions: { code: ErrorCode.badUserInput },
    });
  }
  const date = new Date(value);
  if (date.getTime() < FIRST_DATE_MS || date.getTime() > LAST_DATE_MS) {
    throw new GraphQLError('DateTime must lie between 1970-01-01 and 9999-12-31', { extensions: { code: ErrorCode.badUserInput } });
  }
  return date;
}

builder.scalarType('DateTime', {
  description: 'An RFC 3339 (ISO-8601) timestamp with its zone, such as 2026-11-11T00:00:00Z or 2026-11-11T08:00:00+08:00; always answered in UTC.',
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

builder.objectType(NotFound, { name: 'NotFound', ...asProblem(NotFound), description: 'Nothing has the id given; the message names what was looked for.' });

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
