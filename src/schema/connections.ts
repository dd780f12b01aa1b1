import type { FieldKind, FieldRef, SchemaTypes } from '@pothos/core';
import { type DefaultConnectionArguments, resolveCursorConnection } from '@pothos/plugin-relay';
import { BadInputError } from '../domain/errors.ts';
import { unacceptableCharacter } from '../domain/text.ts';
import { badInput, inLocale, ruleInputIssue } from '../i18n/issues.ts';
import type { Locale } from '../i18n/messages.ts';
import type { KeysetPage } from '../infra/db/pages.ts';

/** Rows a page holds when `first`/`last` is not given, and at most (the cost limit counts pages by it too). */
export const PAGE_SIZE = { defaultSize: 20, maxSize: 100 };

/** What the Relay paging arguments mean; the relay plugin adds them to every connection field undescribed. */
const PAGING_ARGUMENTS: Record<string, string> = {
  first: `Relay paging forwards: at most this many rows, from the start or after \`after\` (0 to ${PAGE_SIZE.maxSize}; ${PAGE_SIZE.defaultSize} when neither first nor last is given; 0 answers pageInfo alone). Not with last or before.`,
  after: 'Relay paging forwards: the rows after this cursor, an endCursor (or edge cursor) this list answered. Not with last or before.',
  last: `Relay paging backwards: at most this many rows, from the end or before \`before\` (0 to ${PAGE_SIZE.maxSize}). Not with first or after.`,
  before: 'Relay paging backwards: the rows before this cursor, a startCursor (or edge cursor) this list answered. Not with first or after.',
};

/** Describes the first/after/last/before arguments of the connection field `t.connection` returned. */
export function describePaging<Types extends SchemaTypes, Shape, Kind extends FieldKind>(field: FieldRef<Types, Shape, Kind>): FieldRef<Types, Shape, Kind> {
  field.updateConfig((config) => ({
    ...config,
    args: Object.fromEntries(Object.entries(config.args).map(([name, arg]) => [name, PAGING_ARGUMENTS[name] && !arg.description ? { ...arg, description: PAGING_ARGUMENTS[name] } : arg])),
  }));
  return field;
}

/**
 * A list field without a size argument declares in `extensions.listSize` how many items
 * the cost limit counts for it (RedPacket.shares, up to 10,000 long), each at least at its
 * type's field count.
 */
export const LIST_SIZE_EXTENSION = 'listSize';
const CURSOR_PREFIX = 'c1:';

/** Opaque to clients, so what a cursor holds can change without a new contract. */
function encodeCursor(id: string): string {
  return Buffer.from(`${CURSOR_PREFIX}${id}`).toString('base64url');
}

/** Longer than any id a list of ours is keyed by. */
const CURSOR_ID_MAX = 256;

function decodeCursor(cursor: string, argument: string, locale: Locale): string {
  const text = Buffer.from(cursor, 'base64url').toString();
  const id = text.slice(CURSOR_PREFIX.length);
  if (!text.startsWith(CURSOR_PREFIX) || id.length === 0 || id.length > CURSOR_ID_MAX || unacceptableCharacter(id, true)) {
    throw BadInputError.of([inLocale(ruleInputIssue([argument], 'INVALID_CURSOR', { argument }), locale)]);
  }
  return id;
}

/** The arguments of each paging direction: one page reads one way from one cursor. */
const FORWARDS = ['first', 'after'] as const;
const BACKWARDS = ['last', 'before'] as const;

/**
 * A page reads forwards (`first`/`after`) or backwards (`last`/`before`), never both: a
 * keyset read has one direction and one cursor, so a mix would answer rows from the wrong
 * side of a cursor, or ignore a bound. Relay lets a server refuse what it does not support.
 */
function refuseMixedDirections(args: DefaultConnectionArguments, locale: Locale): void {
  const forward = FORWARDS.find((name) => args[name] != null);
  const backward = BACKWARDS.find((name) => args[name] != null);
  if (forward && backward) throw BadInputError.of([inLocale(ruleInputIssue([backward], 'MIXED_PAGING_DIRECTIONS', { forward, backward }), locale)]);
}

/**
 * A Relay connection over a list read by keyset (`first`/`after` forwards, `last`/`before`
 * backwards): `read` gets the page to fetch, `idOf` names each row's unique id, its cursor.
 * Refusals are worded in `locale`: these arguments are the relay plugin's, which no
 * validation of ours sees.
 */
export async function keysetConnection<Row>(args: DefaultConnectionArguments, read: (page: KeysetPage) => Promise<Row[]>, idOf: (row: Row) => string, locale: Locale) {
  for (const bound of ['first', 'last'] as const) {
    const size = args[bound];
    const path = [bound];
    if (size != null && size < 0) throw badInput([{ path, message: `${bound} must not be negative`, code: 'too_small', minimum: 0, origin: 'number' }], locale);
    if (size != null && size > PAGE_SIZE.maxSize)
      throw badInput([{ path, message: `${bound} must be at most ${PAGE_SIZE.maxSize}`, code: 'too_big', maximum: PAGE_SIZE.maxSize, origin: 'number' }], locale);
  }
  refuseMixedDirections(args, locale);
  const connection = await resolveCursorConnection<Promise<Row[]>>({ args, ...PAGE_SIZE, toCursor: (row) => encodeCursor(idOf(row)) }, ({ after, before, limit, inverted }) => {
    const given = after !== undefined ? { argument: 'after' as const, cursor: after } : before !== undefined ? { argument: 'before' as const, cursor: before } : null;
    return read({ ...(given === null ? {} : { cursor: decodeCursor(given.cursor, given.argument, locale), cursorArgument: given.argument }), take: limit, inverted });
  });
  // An empty page has no cursors (Relay's rule), rather than echoing the one it was asked after.
  return connection.edges.length > 0 ? connection : { ...connection, pageInfo: { ...connection.pageInfo, startCursor: null, endCursor: null } };
}
