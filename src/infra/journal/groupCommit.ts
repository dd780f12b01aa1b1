import { BadInputError, ServiceUnavailableError } from '../../domain/errors.ts';
import { type Logger, logRepeating } from '../logger.ts';
import { journalDeadLetters } from '../metrics.ts';
import type { RedisClient } from '../redis/connection.ts';
import { classifyFailure, failureMessage, recordDeadLetter, sqlState } from './deadLetters.ts';
import type { AnnounceEntry, ForgetEntry, JournalDb, JournalEntry, JournalHandler, PersistResult } from './journal.ts';

export class JournalCommitError extends ServiceUnavailableError {}

/**
 * PostgreSQL refused the entry for its own data: it was dead-lettered and its Redis effect
 * undone. Not SERVICE_UNAVAILABLE: the same request would be refused again.
 */
export class JournalEntryRefusedError extends BadInputError {
  constructor() {
    super('the request was refused by the database; nothing was changed');
  }
}

export interface Registered {
  handler: JournalHandler;
  forget: ForgetEntry;
  announce?: AnnounceEntry;
}

/** How the entries of one batch ended, by entry key; an entry in none of these was persisted. */
export interface BatchResult {
  conflicts: Set<string>;
  /** Entries PostgreSQL already held: persisted by an earlier commit. */
  replayed: Set<string>;
  /** What the entry's waiters are rejected with. */
  failures: Map<string, Error>;
  /** Persisted or conflicting: to be deleted from their streams. */
  finished: JournalEntry[];
}

interface Batch {
  db: JournalDb;
  redis: RedisClient;
  log: Logger;
  result: BatchResult;
}

const COMMIT_ATTEMPTS = 3;

/** An entry's identity: its id is unique only within its stream. */
export const entryKey = (entry: Pick<JournalEntry, 'stream' | 'id'>) => `${entry.stream}\u0000${entry.id}`;

/** Persists a batch of one kind. */
export async function persistBatch(deps: Omit<Batch, 'result'>, registered: Registered, entries: JournalEntry[]): Promise<BatchResult> {
  const batch: Batch = { ...deps, result: { conflicts: new Set(), replayed: new Set(), failures: new Map(), finished: [] } };
  await persistSplitting(batch, registered, entries);
  return batch.result;
}

/**
 * Persists entries of one kind. Only after a failure that is not the database's absence
 * does it split them in two and try each half, down to single entries, so the healthy
 * ones commit beside a poisoned one at a cost of about 2·log2(n) statements.
 */
async function persistSplitting(batch: Batch, registered: Registered, entries: JournalEntry[]): Promise<void> {
  let persisted: PersistResult;
  try {
    persisted = await persistWithRetry(batch.db, registered.handler, entries);
  } catch (error) {
    const failure = classifyFailure(error);
    if (failure === 'transient') return leaveInStreams(batch, entries, error);
    if (entries.length > 1) {
      const half = Math.ceil(entries.length / 2);
      await persistSplitting(batch, registered, entries.slice(0, half));
      await persistSplitting(batch, registered, entries.slice(half));
      return;
    }
    return deadLetter(batch, registered, entries[0]!, error);
  }
  const { conflicts, replayed } = persisted;
  for (const entry of replayed) batch.result.replayed.add(entryKey(entry));
  if (conflicts.length > 0) {
    await Promise.all(conflicts.map(registered.forget)).catch((error: unknown) =>
      batch.log.warn({ err: error, kind: registered.handler.kind, entries: conflicts.length }, 'could not drop the Redis keys of conflicting journal entries; they stay stale until rebuilt'),
    );
    for (const entry of conflicts) batch.result.conflicts.add(entryKey(entry));
  }
  batch.result.finished.push(...entries);
}

/** Retries only what may pass on a second try: a refusal or a bug would fail again. */
async function persistWithRetry(db: JournalDb, handler: JournalHandler, entries: JournalEntry[]): Promise<PersistResult> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await handler.persist(db, entries);
    } catch (error) {
      if (attempt >= COMMIT_ATTEMPTS || classifyFailure(error) !== 'transient') throw error;
      await new Promise((resolve) => setTimeout(resolve, 20 * 2 ** attempt));
    }
  }
}

/** The entries stay in their streams; the sweeper retries them later. Logged held back: every batch fails while PostgreSQL is away. */
function leaveInStreams({ log, result }: Batch, entries: JournalEntry[], error: unknown): void {
  const [only] = entries;
  if (entries.length === 1 && only) {
    logRepeating(log, 'error', { err: error, stream: only.stream, entryId: only.id, kind: only.fields.kind }, 'journal entry could not be committed; it stays in its stream');
  } else {
    logRepeating(log, 'error', { err: error, entries: entries.length }, 'group commit failed');
  }
  const failure = new JournalCommitError('the grant could not be confirmed in the database; it may still be applied');
  for (const entry of entries) result.failures.set(entryKey(entry), failure);
}

/** Keeps the entry PostgreSQL refused, deletes it from its stream and undoes its Redis effect. */
async function deadLetter(batch: Batch, registered: Registered, entry: JournalEntry, error: unknown): Promise<void> {
  const { log } = batch;
  let recorded: boolean;
  try {
    recorded = await recordDeadLetter(batch.db.prisma, entry, error);
  } catch (recordError) {
    return leaveInStreams(batch, [entry], recordError);
  }
  if (recorded) {
    journalDeadLetters.inc();
    log.error(
      { stream: entry.stream, entryId: entry.id, kind: entry.fields.kind, code: sqlState(error), error: failureMessage(error) },
      'a journal entry could not be committed on its own; it is dead-lettered and its Redis keys are rebuilt',
    );
  }
  // Deleted before its keys are dropped: the rebuild that follows commits the stream first.
  await batch.redis.xdel(entry.stream, entry.id).catch((xdelError: unknown) => {
    log.warn({ err: xdelError, stream: entry.stream, entryId: entry.id }, 'could not delete a dead-lettered journal entry; a sweeper will dead-letter it again harmlessly');
  });
  await registered.forget(entry).catch((forgetError: unknown) => {
    log.warn({ err: forgetError, stream: entry.stream, entryId: entry.id }, 'could not drop the Redis keys of a dead-lettered journal entry; they stay stale until rebuilt');
  });
  batch.result.failures.set(entryKey(entry), new JournalEntryRefusedError());
}
