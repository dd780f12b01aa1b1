import { outsideRequests } from '../../requestId.ts';
import { groupBy, pairsToRecord } from '../collections.ts';
import type { Database } from '../db/database.ts';
import { type Logger, logRepeating } from '../logger.ts';
import { journalBatchSize, journalCommitDuration } from '../metrics.ts';
import type { RedisClient } from '../redis/connection.ts';
import { type Scripts, defineScript } from '../redis/scripts.ts';
import { redisTimeMs } from '../redis/time.ts';
import { type DeadLetter, listDeadLetters } from './deadLetters.ts';
import { type BatchResult, JournalEntryRefusedError, type Registered, entryKey, persistBatch } from './groupCommit.ts';

/** What handlers write with: Prisma, and the driver for their batch statements (Database.query). */
export type JournalDb = Pick<Database, 'prisma' | 'query'>;

/** One entry of a campaign's journal stream, as the allocating script wrote it. */
export interface JournalEntry {
  stream: string;
  /** The stream id; its first part is the Redis time in ms when the script ran. */
  id: string;
  fields: Record<string, string>;
}

export interface JournalHandler {
  /** Matches the entry's `kind` field. */
  kind: string;
  /**
   * Writes a batch of entries. Each statement must be atomic on its own and
   * idempotent (unique keys), because a sweeper may persist the same entry again;
   * batches of different kinds are not one transaction.
   */
  persist(db: JournalDb, entries: JournalEntry[]): Promise<PersistResult>;
}

/** What a handler's batch came to; an entry in neither list was persisted by this call. (Entries, not ids: two streams can mint the same id.) */
export interface PersistResult {
  /** Entries that clash with a different durable grant: dropped and their callers told, never acknowledged. */
  conflicts: JournalEntry[];
  /** Entries PostgreSQL already held as they are: persisted by an earlier commit (a sweeper, a retry, a rebuild). */
  replayed: JournalEntry[];
}

/**
 * Drops the Redis keys an entry's script changed, for a rebuild from PostgreSQL. An entry
 * PostgreSQL turned down (a conflict, or a dead letter) was decided by Redis keys that
 * disagree with PostgreSQL, and its script already changed them. The journal calls this
 * whoever commits the entry, its caller or a sweeper after the caller died, so the keys
 * are mended even when no caller is left.
 */
export type ForgetEntry = (entry: JournalEntry) => Promise<unknown>;

/**
 * Tells subscribers of an entry's change, as its caller would have once it was committed:
 * the journal calls it for the entries it commits on a caller's behalf (a sweep, or a
 * stream committed before a rebuild or a retry's answer), whose caller may be dead.
 */
export type AnnounceEntry = (entry: JournalEntry) => unknown;

export type PersistOutcome = 'persisted' | 'conflict';

export interface JournalOptions {
  batchMax: number;
  batchWaitMs: number;
  /** Batches of one kind committing at once. More than one hides database round trips behind each other. */
  maxInFlight: number;
  sweepAfterMs: number;
}

interface Waiter {
  entry: JournalEntry;
  resolve(outcome: PersistOutcome): void;
  reject(error: Error): void;
}

/** One kind's entries waiting for a batch, and how many of its batches are committing. */
interface Lane {
  queue: Waiter[];
  inFlight: number;
}

const STREAM_REGISTRY = 'journal:streams';

const journalDelete = defineScript('journalDelete', ['stream', 'deletedByOthers'], {
  deleted: (values) => ({ missing: values.strings(0) }),
});
const SWEEP_BATCH = 1000;
/**
 * Streams a sweep looks into at once. Every campaign's stream stays registered until a day
 * after its end, so a busy day leaves thousands, each looked into every round: one round
 * trip each took 28% of a core for 3,236 idle streams. Sent together, the looks go out
 * auto-pipelined (per node on a cluster).
 */
const SWEEP_LOOKS_AT_ONCE = 256;

/** Streams a sweep round's log line names, of all it swept: enough to look into. */
const SWEPT_STREAMS_NAMED = 10;

/** The ids of a stream's entries that a committer other than the first deleted, for a while (lua/journalDelete.lua). */
const deletedByOthersKey = (stream: string) => `${stream}:deletedByOthers`;

/** Turns the flat [field, value, ...] list that XADD and XRANGE use into an entry. */
export function journalEntry(stream: string, id: string, flatFields: string[]): JournalEntry {
  return { stream, id, fields: pairsToRecord(flatFields) };
}

/**
 * The bridge from Redis allocations to PostgreSQL. Scripts XADD an entry to their
 * campaign's stream; `commit` queues it for a group commit (one statement for up to
 * `batchMax` entries of its kind, or whatever waited `batchWaitMs`), deletes it from
 * the stream once durable, and resolves. `sweep` persists entries that a dead
 * process left behind.
 *
 * No entry can block the others: a batch PostgreSQL refuses is split until its healthy
 * entries commit, and an entry refused on its own is dead-lettered (kept in
 * `journal_dead_letter`, deleted from its stream, its Redis effect forgotten) and its
 * caller gets a JournalEntryRefusedError. A batch that failed for want of a database
 * stays in its streams for the sweeper, and its callers get SERVICE_UNAVAILABLE. Nor can
 * a kind block the others: each kind queues and batches apart, in `maxInFlight` slots of
 * its own, so statements of one kind waiting on a lock (a table being migrated, say) do
 * not hold the commits of every flow.
 */
export class Journal {
  private readonly handlers = new Map<string, Registered>();
  private readonly lanes = new Map<string, Lane>();
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
    private readonly db: JournalDb,
    private readonly log: Logger,
    private readonly options: JournalOptions,
  ) {}

  register(handler: JournalHandler, forget: ForgetEntry, announce?: AnnounceEntry): void {
    this.handlers.set(handler.kind, { handler, forget, announce });
  }

  /** The dead letters, newest first, for operators. */
  deadLetters(limit: number): Promise<DeadLetter[]> {
    return listDeadLetters(this.db.prisma, limit);
  }

  /**
   * Makes the sweeper watch a campaign's stream until `untilMs` (Redis time). Call it
   * before the first allocation can happen, i.e. when the campaign's keys are written.
   */
  async trackStream(stream: string, untilMs: number): Promise<void> {
    await this.redis.zadd(STREAM_REGISTRY, 'GT', untilMs, stream);
  }

  /**
   * Resolves once the entry is committed in PostgreSQL (the durable ack). Rejects with a
   * JournalEntryRefusedError when PostgreSQL refused the entry itself, and with a
   * JournalCommitError when the database could not be reached (the entry stays journaled).
   */
  commit(entry: JournalEntry): Promise<PersistOutcome> {
    return new Promise((resolve, reject) => {
      const lane = this.laneOf(entry.fields.kind ?? '');
      lane.queue.push({ entry, resolve, reject });
      this.schedule(lane);
    });
  }

  /** Waits until everything queued so far is committed or has failed. */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0 || [...this.lanes.values()].some((lane) => lane.queue.length > 0)) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.startBatches();
      await Promise.race(this.inFlight);
    }
  }

  /**
   * Persists entries older than `sweepAfterMs`; returns how many it handled. A round that
   * found any logs one line for all its streams, held back while rounds repeat it: with
   * PostgreSQL down every round (each SWEEP_INTERVAL_MS) finds the same entries again, and
   * a line per stream would come for every stream, every round.
   */
  async sweep(): Promise<number> {
    const nowMs = await redisTimeMs(this.redis);
    const registered = await this.redis.zrange(STREAM_REGISTRY, 0, -1, 'WITHSCORES');
    const olderThan = String(nowMs - this.options.sweepAfterMs);
    let handled = 0;
    const swept: string[] = [];
    try {
      for (let first = 0; first < registered.length; first += 2 * SWEEP_LOOKS_AT_ONCE) {
        const streams = registered.slice(first, first + 2 * SWEEP_LOOKS_AT_ONCE);
        const looks = [];
        for (let i = 0; i < streams.length; i += 2) looks.push(this.redis.xrange(streams[i]!, '-', olderThan, 'COUNT', SWEEP_BATCH));
        const staleOf = await Promise.all(looks);
        for (let i = 0; i < streams.length; i += 2) {
          const entries = await this.sweepStream(streams[i]!, Number(streams[i + 1]), staleOf[i / 2]!, nowMs);
          if (entries > 0) swept.push(streams[i]!);
          handled += entries;
        }
      }
    } finally {
      // Also for a round Redis cut short: what it swept before is told.
      if (swept.length > 0) {
        const fields = { streams: swept.length, entries: handled, firstStreams: swept.slice(0, SWEPT_STREAMS_NAMED) };
        logRepeating(this.log, 'warn', fields, 'sweeping journal entries left behind');
      }
    }
    return handled;
  }

  /** Commits a stream's stale entries, or forgets the stream once its campaign's tracking ran out and it is empty. */
  private async sweepStream(stream: string, trackedUntil: number, stale: [string, string[]][], nowMs: number): Promise<number> {
    if (stale.length > 0) {
      await Promise.allSettled(this.commitForOthers(stale.map(([id, flat]) => journalEntry(stream, id, flat))));
      return stale.length;
    }
    if (trackedUntil < nowMs && (await this.redis.xlen(stream)) === 0) {
      // Two commands, not a MULTI: on a cluster the registry and the stream lie in other
      // slots. Stopped between them, an empty stream is left, which expires with its campaign.
      await this.redis.zrem(STREAM_REGISTRY, stream);
      await this.redis.del(stream, deletedByOthersKey(stream));
    }
    return 0;
  }

  /** For the metrics, on a scrape: entries in the tracked streams and the age of the oldest. */
  async backlog(): Promise<{ depth: number; lagMs: number }> {
    const streams = await this.redis.zrange(STREAM_REGISTRY, 0, -1);
    // Not one pipeline: on a cluster the streams lie on several nodes (auto-pipelining batches per node).
    const [ofStreams, nowMs] = await Promise.all([
      Promise.all(streams.map((stream) => Promise.all([this.redis.xlen(stream), this.redis.xrange(stream, '-', '+', 'COUNT', 1)]))),
      redisTimeMs(this.redis),
    ]);
    let depth = 0;
    let oldestMs = nowMs;
    for (const [length, [first]] of ofStreams) {
      depth += length;
      if (first) oldestMs = Math.min(oldestMs, Number(first[0].split('-')[0]));
    }
    return { depth, lagMs: nowMs - oldestMs };
  }

  /**
   * Persists now, whatever their age, the entries a stream holds: all of them, or those
   * `belongs` picks (a stream several campaigns share, when one of them is rebuilt).
   * Entries appended meanwhile are left to their writers. An entry PostgreSQL refuses is
   * dead-lettered on the way, so a poisoned stream never blocks a rebuild.
   */
  async commitStream(stream: string, belongs: (entry: JournalEntry) => boolean = () => true): Promise<void> {
    const [newest] = await this.redis.xrevrange(stream, '+', '-', 'COUNT', 1);
    if (!newest) return;
    let start = '-';
    for (;;) {
      const page = await this.redis.xrange(stream, start, newest[0], 'COUNT', SWEEP_BATCH);
      if (page.length === 0) return;
      const entries = page.map(([id, flat]) => journalEntry(stream, id, flat)).filter(belongs);
      await Promise.all(this.commitForOthers(entries).map((commit) => commit.catch(unlessRefused)));
      start = `(${page.at(-1)![0]}`;
    }
  }

  /**
   * Commits entries whose callers may be gone, and announces each one persisted: a caller
   * killed between its script and its commit published nothing, and its subscribers
   * would otherwise wait on the state before it for good. Announced twice, when the
   * caller lives, is harmless: subscribers drop what they have had.
   */
  private commitForOthers(entries: JournalEntry[]): Promise<PersistOutcome>[] {
    return entries.map(async (entry) => {
      const outcome = await this.commit(entry);
      if (outcome === 'persisted') void this.announce(entry);
      return outcome;
    });
  }

  private async announce(entry: JournalEntry): Promise<void> {
    try {
      await this.handlers.get(entry.fields.kind ?? '')?.announce?.(entry);
    } catch (error) {
      this.log.warn({ err: error, stream: entry.stream, entryId: entry.id }, 'could not announce a journal entry committed for another caller');
    }
  }

  /**
   * A full batch starts at once; a partial one waits up to `batchWaitMs` for company.
   * When every slot of its kind is busy, entries simply queue and the next free one takes them.
   */
  private schedule(lane: Lane): void {
    if (lane.queue.length >= this.options.batchMax) {
      this.startBatches();
    } else {
      this.timer ??= setTimeout(() => {
        this.timer = undefined;
        this.startBatches();
      }, this.options.batchWaitMs);
    }
  }

  private laneOf(kind: string): Lane {
    let lane = this.lanes.get(kind);
    if (!lane) {
      lane = { queue: [], inFlight: 0 };
      this.lanes.set(kind, lane);
    }
    return lane;
  }

  private startBatches(): void {
    for (const lane of this.lanes.values()) {
      while (lane.queue.length > 0 && lane.inFlight < this.options.maxInFlight) this.startBatch(lane, lane.queue.splice(0, this.options.batchMax));
    }
  }

  private startBatch(lane: Lane, waiting: Waiter[]): void {
    // A batch commits many requests' entries: its lines, and the work it starts, are none's.
    const batch: Promise<void> = outsideRequests(() =>
      this.commitBatch(waiting)
        .catch((error: unknown) => {
          // A bug here must not leave callers waiting for good; the entries stay in their streams.
          this.log.error({ err: error, entries: waiting.length }, 'group commit failed unexpectedly');
          for (const waiter of waiting) waiter.reject(error instanceof Error ? error : new Error(String(error)));
        })
        .finally(() => {
          lane.inFlight--;
          this.inFlight.delete(batch);
          // Whatever queued meanwhile has waited long enough.
          this.startBatches();
        }),
    );
    lane.inFlight++;
    this.inFlight.add(batch);
  }

  /** Commits a batch of entries of one kind (a lane's). */
  private async commitBatch(batch: Waiter[]): Promise<void> {
    const kind = batch[0]!.entry.fields.kind;
    const registered = this.handlers.get(kind ?? '');
    // An entry nothing here can persist (a kind from a newer release, swept by an older
    // instance) stays in its stream for an instance that can.
    if (!registered) {
      for (const waiter of batch) waiter.reject(new Error(`no journal handler for kind "${kind}"`));
      return;
    }
    const unique = new Map<string, JournalEntry>();
    for (const { entry } of batch) unique.set(entryKey(entry), entry);
    const entries = [...unique.values()];
    const started = performance.now();
    const result = await persistBatch({ db: this.db, redis: this.redis, log: this.log }, registered, entries);
    journalBatchSize.observe(entries.length);
    journalCommitDuration.observe((performance.now() - started) / 1000);
    if (result.finished.length > 0) {
      const lost = await this.deleteFromStreams(result).catch((error: unknown) => {
        this.log.warn({ err: error }, 'could not delete persisted journal entries; the sweeper will re-persist them harmlessly');
        return new Set<string>();
      });
      await this.forgetLost(result, lost);
    }
    for (const waiter of batch) {
      const key = entryKey(waiter.entry);
      const failure = result.failures.get(key);
      if (failure) waiter.reject(failure);
      else waiter.resolve(result.conflicts.has(key) ? 'conflict' : 'persisted');
    }
  }

  /**
   * Deletes the batch's finished entries from their streams; returns the keys of those it
   * persisted first that a stream had lost (lua/journalDelete.lua tells a loss from
   * another committer's delete).
   */
  private async deleteFromStreams(result: BatchResult): Promise<Set<string>> {
    const persistedFirst = (entry: JournalEntry) => !result.conflicts.has(entryKey(entry)) && !result.replayed.has(entryKey(entry));
    // Not one pipeline: on a cluster the streams lie on several nodes. Auto-pipelining
    // still sends the commands of this tick in one write per node.
    const byStream = [...groupBy(result.finished, (entry) => entry.stream)];
    const replies = await Promise.all(
      byStream.map(([stream, ofStream]) => {
        const first = ofStream.filter(persistedFirst);
        const others = ofStream.filter((entry) => !persistedFirst(entry));
        return this.scripts.call(journalDelete, { stream, deletedByOthers: deletedByOthersKey(stream) }, [
          first.length,
          ...first.map((entry) => entry.id),
          ...others.map((entry) => entry.id),
        ]);
      }),
    );
    return new Set(byStream.flatMap(([stream], i) => replies[i]!.missing.map((id) => entryKey({ stream, id }))));
  }

  /**
   * An entry this batch persisted first that its stream had lost was journaled before
   * Redis lost the stream and the keys its script changed: a rebuild may have read
   * PostgreSQL without it, and nothing else would mend that (a balance would stay too
   * high for good). Its keys are dropped as a conflict's are.
   */
  private async forgetLost(result: BatchResult, lostKeys: Set<string>): Promise<void> {
    const lost = result.finished.filter((entry) => lostKeys.has(entryKey(entry)));
    if (lost.length === 0) return;
    this.log.warn({ entries: lost.length }, 'committed journal entries whose stream Redis had lost; their keys are rebuilt');
    await Promise.all(lost.map((entry) => this.handlers.get(entry.fields.kind!)!.forget(entry))).catch((error: unknown) => {
      this.log.warn({ err: error, entries: lost.length }, 'could not drop the Redis keys of lost journal entries; they stay stale until rebuilt');
    });
  }
}

/** A refused entry was dead-lettered: for a stream being committed, it is done with. */
function unlessRefused(error: unknown): void {
  if (!(error instanceof JournalEntryRefusedError)) throw error;
}
