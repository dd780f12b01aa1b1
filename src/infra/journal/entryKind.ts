import { z } from 'zod';
import type { PrismaClient } from '../../generated/prisma/client.ts';
import type { JournalEntry, JournalHandler } from './journal.ts';

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
  /** As JournalHandler.persist, with the fields decoded; returns the entries that conflict. */
  persist(db: PrismaClient, entries: DecodedEntry<Fields>[]): Promise<JournalEntry[]>;
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
 * What a handler reports after its insert: the entries whose unique id is neither among
 * `inserted` nor durable already (written by an earlier commit, a sweeper's replay).
 */
export async function conflictingEntries<Fields>(
  entries: DecodedEntry<Fields>[],
  idOf: (fields: Fields) => string,
  inserted: Iterable<string>,
  durableAmong: (ids: string[]) => Promise<string[]>,
): Promise<JournalEntry[]> {
  const durable = new Set(inserted);
  const missing = entries.map(({ fields }) => idOf(fields)).filter((id) => !durable.has(id));
  if (missing.length > 0) for (const id of await durableAmong(missing)) durable.add(id);
  return entries.filter(({ fields }) => !durable.has(idOf(fields))).map(({ entry }) => entry);
}
