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

/** A cursor's id for a table whose ids are numbers (a BIGSERIAL); null for a client's garbage, which names no row rather than crashing the query. */
export function numericId(id: string): bigint | null {
  const value = /^\d{1,19}$/.test(id) ? BigInt(id) : null;
  return value === null || value > BIGINT_MAX ? null : value;
}

/** PostgreSQL's bigint: a larger number is an out-of-range error there, not a cursor. */
const BIGINT_MAX = 2n ** 63n - 1n;

/** Of a Prisma model's delegate, what a keyset page needs: whether a row of the list has the cursor's id. */
interface Rows<Where> {
  findFirst(args: { where: Where; select: { id: true } }): PromiseLike<unknown>;
}

/** How a list reads its rows: a page of the rows of `where` in `orderBy`. */
interface KeysetList<Where, Id> {
  where: Where;
  /**
   * The rows a cursor may name: those of the list's owner (a user's, a packet's), which may
   * be more than `where` (a row that has left a status since; one of a wider list the client
   * narrowed). By default, `where`.
   */
  cursorScope?: Where;
  /**
   * Ends with the id: Prisma places a cursor in SQL only in an order it knows is unique;
   * in any other it reads every row past the cursor and places it in memory.
   */
  orderBy: Order;
  /** The id a cursor names, as the table types it (null: none); by default the cursor itself. */
  idOf?: (cursor: string) => Id | null;
}

/** What keysetPageArgs answers, to spread into findMany (with a select, if any). */
interface KeysetPageArgs<Where, Id> {
  where: Where;
  orderBy: Order;
  take: number;
  cursor?: { id: Id };
}

/**
 * Prisma findMany arguments for a page of `list`, after one lookup by id (only with a
 * cursor) that the cursor names a row of `cursorScope`. Anything else, another user's row
 * or none, is refused (INVALID_CURSOR): a page placed by it would tell the caller that the
 * row exists and when it was written. Prisma's cursor continues the order from the cursor
 * row's values, so a page never skips or repeats rows written in the meantime; the cursor
 * row is left out by id rather than by Prisma's `skip: 1`, which skips the next row instead
 * once the cursor row is not in `where`.
 */
export async function keysetPageArgs<Where, Id = string>(rows: Rows<Where>, page: KeysetPage, list: KeysetList<Where, Id>): Promise<KeysetPageArgs<Where, Id>> {
  const flip = (direction: Direction): Direction => (direction === 'asc' ? 'desc' : 'asc');
  const orderBy = page.inverted ? list.orderBy.map((key) => Object.fromEntries(Object.entries(key).map(([field, direction]) => [field, flip(direction)]))) : list.orderBy;
  if (page.cursor === undefined) return { where: list.where, orderBy, take: page.take };
  const id = list.idOf ? list.idOf(page.cursor) : (page.cursor as Id);
  const atCursor = { id } as Where;
  if (id === null || !(await rows.findFirst({ where: { AND: [list.cursorScope ?? list.where, atCursor] } as Where, select: { id: true } }))) throw notACursorOfTheList(page);
  return { where: { AND: [list.where, { NOT: atCursor }] } as Where, orderBy, take: page.take, cursor: { id } };
}

/** A cursor that names no row of its list (forged, or of another list): bad input, worded in English until error masking words it (badInputInLocale). */
function notACursorOfTheList(page: KeysetPage): BadInputError {
  const argument = page.cursorArgument ?? (page.inverted ? 'before' : 'after');
  return BadInputError.of([ruleInputIssue([argument], 'INVALID_CURSOR', { argument })]);
}
