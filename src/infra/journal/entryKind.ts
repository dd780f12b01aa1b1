import { z } from 'zod';
import type { JournalDb, JournalEntry, JournalHandler, PersistResult } from './journal.ts';

/** An entry with its fields decoded by its kind's schema. */
export interface DecodedEntry<Fields> {
  entry: JournalEntry;
  fields: Fields;
}

export interface EntryKind<Fields> {
  /** Matches the entry's `kind` field: `<flow>.<change>`, e.g. `redPacket.grab`. */
  kind: string;
  /** The fields its script writes, as strings; the schema coerces them. */
  fields: z.ZodType<Fields>;
  /** As JournalHandler.persist, with the fields decoded. */
  persist(db: JournalDb, entries: DecodedEntry<Fields>[]): Promise<PersistResult>;
}

/**
 * A journal handler whose entries are decoded before it sees them. An entry its schema
 * refuses makes the batch fail, so the journal splits it down to that entry and
 * dead-letters it: nothing a handler reads is unchecked.
 */
export function entryKind<Fields>(spec: EntryKind<Fields>): JournalHandler & { decode(entry: JournalEntry): Fields } {
  const decode = (entry: JournalEntry) => {
    const decoded = spec.fields.safeParse(entry.fields);
    // A TypeError, as for any entry a handler cannot read: the journal dead-letters it.
    if (!decoded.success) throw new TypeError(`journal entry ${entry.id} (${spec.kind}) is unreadable: ${z.prettifyError(decoded.error)}`);
    return decoded.data;
  };
  return {
    kind: spec.kind,
    decode,
    persist: (db, entries) =>
      spec.persist(
        db,
        entries.map((entry) => ({ entry, fields: decode(entry) })),
      ),
  };
}

/**
 * What a handler reports after its insert: the entries whose unique id is not among
 * `inserted` are replays when durable already (written by an earlier commit, a
 * sweeper's), conflicts otherwise.
 */
export async function conflictingEntries<Fields>(
  entries: DecodedEntry<Fields>[],
  idOf: (fields: Fields) => string,
  inserted: Iterable<string>,
  durableAmong: (ids: string[]) => Promise<string[]>,
): Promise<PersistResult> {
  const fresh = new Set(inserted);
  const missing = entries.filter(({ fields }) => !fresh.has(idOf(fields)));
  const durable = new Set(missing.length > 0 ? await durableAmong(missing.map(({ fields }) => idOf(fields))) : []);
  const result: PersistResult = { conflicts: [], replayed: [] };
  for (const { entry, fields } of missing) (durable.has(idOf(fields)) ? result.replayed : result.conflicts).push(entry);
  return result;
}
