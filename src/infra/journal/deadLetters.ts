import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { LONE_SURROGATES } from '../../domain/text.ts';
import type { PrismaClient } from '../../generated/prisma/client.ts';
import type { JournalEntry } from './journal.ts';

/**
 * Why a group commit failed, which decides what the journal does with its entries:
 * - `refused`: PostgreSQL turned the data down (SQLSTATE class 22 data exception, 23
 *   integrity violation, 54000 a value too large for its index). Retrying cannot help; the
 *   batch is split, and an entry refused on its own is dead-lettered.
 * - `transient`: the database could not be reached, gave up (connection, resources,
 *   shutdown, serialization; pool timeouts) or cannot run the statement at all (a missing
 *   table, missing grants). The entries stay in their streams for later.
 * - `other`: anything else (a handler that could not read an entry, say). The batch is
 *   split so that the healthy entries commit; an entry that fails alone is dead-lettered
 *   too, since left in its stream it would fail every sweep and every rebuild of its
 *   campaign. The dead letter keeps it whole for an operator to replay once fixed.
 */
export type CommitFailure = 'refused' | 'transient' | 'other';

const REFUSED_CLASSES = new Set(['22', '23']);
const REFUSED_STATES = new Set(['54000']);
// 28, 3D, 3F and 42 (no such table, permission denied...) are the deployment's, not an
// entry's: every entry of the kind fails alike until the schema or grants are mended.
const TRANSIENT_CLASSES = new Set(['08', '28', '3D', '3F', '40', '42', '53', '55', '57', '58']);
const TRANSIENT_ADAPTER_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections', 'TransactionWriteConflict', 'TlsConnectionError']);
const REFUSED_ADAPTER_KINDS = new Set(['UniqueConstraintViolation', 'NullConstraintViolation', 'ForeignKeyConstraintViolation', 'ValueOutOfRange', 'InvalidInputValue', 'LengthMismatch']);
/** Prisma's own codes for a database out of reach, a pool timeout, a closed or conflicting transaction. */
const TRANSIENT_PRISMA_CODE = /^P1\d{3}$|^P20(24|28|34)$/;

interface AdapterCause {
  kind?: string;
  code?: string;
  originalCode?: string;
  originalMessage?: string;
  message?: string;
}

type ErrorLike = { name?: string; code?: unknown; message?: string; meta?: { driverAdapterError?: { cause?: AdapterCause } }; cause?: unknown; clientVersion?: unknown };

/** What Prisma's driver adapter (pg or PGlite) reports under a Prisma error, or the DriverAdapterError's own cause. */
function adapterCause(error: ErrorLike): AdapterCause | undefined {
  if (error.meta?.driverAdapterError?.cause) return error.meta.driverAdapterError.cause;
  if (error.name === 'DriverAdapterError' && typeof error.cause === 'object' && error.cause) return error.cause as AdapterCause;
  return undefined;
}

/** The SQLSTATE of a database error, whichever layer reports it. */
export function sqlState(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const failure = error as ErrorLike;
  const cause = adapterCause(failure);
  if (cause) return cause.originalCode ?? (cause.kind === 'postgres' ? cause.code : undefined);
  return error instanceof pg.DatabaseError ? error.code : undefined;
}

export function classifyFailure(error: unknown): CommitFailure {
  const state = sqlState(error);
  if (state) {
    if (REFUSED_CLASSES.has(state.slice(0, 2)) || REFUSED_STATES.has(state)) return 'refused';
    return TRANSIENT_CLASSES.has(state.slice(0, 2)) ? 'transient' : 'other';
  }
  if (typeof error !== 'object' || error === null) return 'other';
  const failure = error as ErrorLike;
  const kind = adapterCause(failure)?.kind;
  if (kind && TRANSIENT_ADAPTER_KINDS.has(kind)) return 'transient';
  if (kind && REFUSED_ADAPTER_KINDS.has(kind)) return 'refused';
  if (typeof failure.code === 'string' && failure.clientVersion !== undefined) return TRANSIENT_PRISMA_CODE.test(failure.code) ? 'transient' : 'other';
  // Prisma refusing the shape of what a handler passed (no code): the entry, not the database.
  if (failure.name === 'PrismaClientValidationError') return 'other';
  // A handler tripping over an entry it cannot read.
  if (error instanceof TypeError || error instanceof RangeError || error instanceof SyntaxError || error instanceof ReferenceError) return 'other';
  // Socket errors, pg's "Connection terminated", pool timeouts: plain errors with no SQLSTATE.
  return 'transient';
}

/** The database's own words, without Prisma's invocation preamble. */
export function failureMessage(error: unknown): string {
  if (typeof error !== 'object' || error === null) return String(error);
  const failure = error as ErrorLike;
  const cause = adapterCause(failure);
  return cause?.originalMessage ?? cause?.message ?? failure.message ?? String(error);
}

/** Text PostgreSQL accepts whatever it holds: NUL written out as \u0000, lone surrogates replaced. */
const storable = (text: string) => text.replaceAll('\u0000', '\\u0000').replace(LONE_SURROGATES, '\ufffd');

export interface DeadLetter {
  id: string;
  stream: string;
  entryId: string;
  kind: string;
  /** The entry's fields as JSON; `JSON.parse` gives them back exactly, NULs and lone surrogates included. */
  fields: string;
  code: string;
  error: string;
  createdAt: Date;
}

/**
 * Keeps a refused entry; idempotent per (stream, entry id), since two sweepers may both
 * get there. True when this call recorded it.
 */
export async function recordDeadLetter(prisma: PrismaClient, entry: JournalEntry, error: unknown): Promise<boolean> {
  const { count } = await prisma.journalDeadLetter.createMany({
    data: {
      id: randomUUID(),
      stream: storable(entry.stream),
      entryId: entry.id,
      kind: storable(entry.fields.kind ?? ''),
      // JSON.stringify escapes control characters and lone surrogates, so the text always fits.
      fields: JSON.stringify(entry.fields),
      errorCode: sqlState(error) ?? 'unknown',
      errorMessage: storable(failureMessage(error)),
    },
    skipDuplicates: true,
  });
  return count > 0;
}

/** The newest dead letters first. */
export async function listDeadLetters(prisma: PrismaClient, limit: number): Promise<DeadLetter[]> {
  const rows = await prisma.journalDeadLetter.findMany({ orderBy: [{ createdAt: 'desc' }, { id: 'asc' }], take: limit });
  return rows.map(({ errorCode, errorMessage, ...row }) => ({ ...row, code: errorCode, error: errorMessage }));
}
