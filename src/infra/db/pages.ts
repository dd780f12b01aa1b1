import { BadInputError } from '../../domain/errors.ts';
import { ruleInputIssue } from '../../i18n/issues.ts';

/** One page of a list read newest first (or in any fixed order) by keyset: after or before a row. */
export interface KeysetPage {
  /** The unique id of the row the page starts after (or, inverted, before); none for the first page. */
  cursor?: string;
  /** The argument the cursor came in, to name it when the cursor is refused. */
  cursorArgument?: 'after' | 'before';
  /** Rows to read: the page and one more, so the caller knows whether there is a next. */
  take: number;
  /** Read backwards from the cursor (a `last`/`before` request). */
  inverted: boolean;
}

type Direction = 'asc' | 'desc';
type Order = Record<string, Direction>[];

/**
 * Prisma findMany arguments for the page over rows ordered by `orderBy`, whose last key
 * is unique: Prisma's cursor finds the row by `cursorOf(id)` and continues the order from
 * its values, so a page never skips or repeats rows written in the meantime.
 */
export function keysetArgs<Cursor>(page: KeysetPage, orderBy: Order, cursorOf: (id: string) => Cursor) {
  const flip = (direction: Direction): Direction => (direction === 'asc' ? 'desc' : 'asc');
  return {
    orderBy: page.inverted ? orderBy.map((key) => Object.fromEntries(Object.entries(key).map(([field, direction]) => [field, flip(direction)]))) : orderBy,
    take: page.take,
    ...(page.cursor === undefined ? {} : { cursor: cursorOf(page.cursor), skip: 1 }),
  };
}

/** A cursor's id for a table whose ids are numbers (a BIGSERIAL); a client's garbage is bad input, not a crash. */
export function numericId(id: string): bigint {
  const value = /^\d{1,19}$/.test(id) ? BigInt(id) : null;
  if (value === null || value > BIGINT_MAX) throw new BadInputError('the cursor is not one of this list', [{ message: 'not a cursor of this list', code: 'INVALID_CURSOR' }]);
  return value;
}

/** PostgreSQL's bigint: a larger number is an out-of-range error there, not a cursor. */
const BIGINT_MAX = 2n ** 63n - 1n;

/**
 * keysetArgs over rows with a string `id`, for a list whose filter a row may leave while a
 * client pages (a team's status), or that takes the cursor of a wider list (all of an
 * activity's wins, then one prize's). Prisma continues from the cursor row's place in the
 * order whether or not that row matches the filter, but its `skip: 1` then skips the next
 * row instead of the cursor's: so the cursor row is left out by id (`notCursor`, for the
 * where), and nothing is skipped.
 */
export function keysetArgsFromAnyRow(page: KeysetPage, orderBy: Order) {
  return {
    notCursor: page.cursor === undefined ? {} : { NOT: { id: page.cursor } },
    args: { ...keysetArgs(page, orderBy, (id) => ({ id })), skip: 0 },
  };
}

/** A cursor that names no row of its list (forged, or of another list): bad input, worded in English until error masking words it (badInputInLocale). */
export function notACursorOfTheList(page: KeysetPage): BadInputError {
  const argument = page.cursorArgument ?? (page.inverted ? 'before' : 'after');
  return BadInputError.of([ruleInputIssue([argument], 'INVALID_CURSOR', { argument })]);
}
