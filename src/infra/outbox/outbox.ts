/*
 * A durable outbox in PostgreSQL, delivered at least once and recorded exactly once:
 * what voucher delivery and refund delivery share. A table of the outbox has `id`,
 * `status` ('PENDING' until done), `created_at`, `next_attempt_at`, `locked_until` (a
 * worker's lease), `last_error`, a count of attempts, and a partial index on
 * next_attempt_at WHERE status = 'PENDING', so the claim, and the backlog /metrics shows,
 * read only what is pending, however long the history.
 *
 * A worker claims due rows (PENDING, due, unleased or whose lease ran out) with FOR UPDATE
 * SKIP LOCKED under a lease, so one worker at a time holds a row; delivers them; marks the
 * successes done in one statement and schedules retries of the failures with exponential
 * backoff, each only under its own lease (one that ran out may belong to another worker by
 * now). A worker that dies leaves leases that run out; another worker takes over with the
 * same row id, which is what the destination dedupes by. Times are the database's, so
 * every instance agrees on leases and due dates.
 */
import { Prisma, type PrismaClient } from '../../generated/prisma/client.ts';
import { type Logger, logRepeating } from '../logger.ts';

export interface OutboxOptions {
  /** A lease lasts this long; it must outlast a delivery with room to record its outcome. */
  leaseMs: number;
  /** The first retry waits this long, each later one twice as long as the one before. */
  retryBaseMs: number;
}

/** A row in the hands of one worker; what a claim returns has at least these columns. */
export interface LeasedRow {
  id: string;
  /** The lease's end as PostgreSQL wrote it: what this worker writes later checks the lease is still its own. */
  locked_until: Date;
}

/** A delivery's fulfilled value when it marked its row done itself, in its own transaction. */
export const RECORDED = 'recorded';

/**
 * What a delivery of one row came to: fulfilled (the outbox marks it done, unless the
 * value is RECORDED), or rejected (retried later).
 */
export type DeliveryOutcome = PromiseSettledResult<unknown>;

export interface OutboxTable<Row extends LeasedRow> {
  /** For logs: 'voucher delivery'. */
  name: string;
  table: string;
  /** The column counting attempts; a claim adds one. */
  attemptsColumn: string;
  /** The columns a claim returns (id and locked_until among them). */
  columns: readonly string[];
  /** The assignments that mark a delivered row done, besides clearing its lease and error. */
  doneSet: string;
  attemptOf(row: Row): number;
  /** One outcome per row, in order; a throw fails them all. */
  deliver(rows: Row[]): Promise<DeliveryOutcome[]>;
  /** After the outcomes of a batch are recorded (done, or a retry scheduled): to tell watchers, fire and forget. */
  recorded?(ids: string[]): void;
}

const CLAIM_BATCH = 50;
const MAX_RETRY_DELAY_MS = 10 * 60 * 1000;

/**
 * A backlog is counted up to this many rows: each row counted is read from the table, on
 * every scrape of every instance (10,000 take about 10 ms).
 */
export const BACKLOG_COUNT_MAX = 10_000;

/** What waits in an outbox: PENDING rows, counted up to BACKLOG_COUNT_MAX, and the age of the oldest of those counted. */
export interface OutboxBacklog {
  pending: number;
  oldestAgeMs: number;
}

/** The n-th attempt failed: wait base, 2 × base, 4 × base … before the next, at most ten minutes. */
export function retryDelayMs(retryBaseMs: number, attempt: number): number {
  return Math.min(MAX_RETRY_DELAY_MS, retryBaseMs * 2 ** (attempt - 1));
}

/** Claims a batch of due rows of `spec.table` under a lease of `leaseMs`. Kept on the table's partial due index. */
export function dueClaim(spec: Pick<OutboxTable<LeasedRow>, 'table' | 'attemptsColumn' | 'columns'>, leaseMs: number): Prisma.Sql {
  const table = Prisma.raw(spec.table);
  const attempts = Prisma.raw(spec.attemptsColumn);
  const columns = Prisma.raw(spec.columns.map((column) => `o.${column}`).join(', '));
  return Prisma.sql`
    UPDATE ${table} o
    SET locked_until = now() + ${leaseMs}::int * interval '1 millisecond', ${attempts} = o.${attempts} + 1
    WHERE o.id IN (
      SELECT id FROM ${table}
      WHERE status = 'PENDING' AND next_attempt_at <= now() AND (locked_until IS NULL OR locked_until <= now())
      ORDER BY next_attempt_at
      LIMIT ${CLAIM_BATCH}
      FOR UPDATE SKIP LOCKED)
    RETURNING ${columns}`;
}

/**
 * Marks delivered rows done, those still PENDING only; returns the ids it moved. A
 * delivery that records its rows itself (RECORDED) calls it too, so done means one thing.
 */
export async function markDone(prisma: PrismaClient, spec: Pick<OutboxTable<LeasedRow>, 'table' | 'doneSet'>, ids: string[]): Promise<string[]> {
  const moved = await prisma.$queryRaw<{ id: string }[]>`
    UPDATE ${Prisma.raw(spec.table)} SET ${Prisma.raw(spec.doneSet)}, locked_until = NULL, last_error = NULL
    WHERE id = ANY(${ids}::text[]) AND status = 'PENDING'
    RETURNING id`;
  return moved.map((row) => row.id);
}

export class Outbox<Row extends LeasedRow> {
  constructor(
    private readonly prisma: PrismaClient,
    private readonly spec: OutboxTable<Row>,
    readonly options: OutboxOptions,
    private readonly log: Logger,
  ) {}

  /**
   * Delivers everything due, a batch at a time, until `stopping` is aborted (then after the
   * batch in hand: the rest waits for the next worker); returns how many deliveries it attempted.
   */
  async deliverDue(stopping?: AbortSignal): Promise<number> {
    let attempted = 0;
    while (!stopping?.aborted) {
      const claimed = await this.prisma.$queryRaw<Row[]>(dueClaim(this.spec, this.options.leaseMs));
      if (claimed.length > 0) await this.deliver(claimed);
      attempted += claimed.length;
      if (claimed.length < CLAIM_BATCH) break;
    }
    return attempted;
  }

  /**
   * What waits for delivery, read from the partial due index in one statement: the
   * BACKLOG_COUNT_MAX most due rows at most, so past that many the oldest age is a lower bound.
   */
  async backlog(): Promise<OutboxBacklog> {
    const counted = await this.prisma.$queryRaw<{ pending: number; oldest: Date | null; now: Date }[]>`
      SELECT count(*)::int AS pending, min(created_at) AS oldest, now() AS now
      FROM (SELECT created_at FROM ${Prisma.raw(this.spec.table)} WHERE status = 'PENDING' ORDER BY next_attempt_at LIMIT ${BACKLOG_COUNT_MAX}) AS counted`;
    // An aggregate: always one row.
    const { pending, oldest, now } = counted[0]!;
    return { pending, oldestAgeMs: oldest ? now.getTime() - oldest.getTime() : 0 };
  }

  /** Delivers rows this worker leased, marks the successes done and schedules retries of the failures. */
  async deliver(leased: Row[]): Promise<void> {
    const outcomes = await this.spec.deliver(leased).catch((error: unknown) => leased.map((): DeliveryOutcome => ({ status: 'rejected', reason: error })));
    const failed: { row: Row; error: Error | undefined }[] = [];
    const delivered: string[] = [];
    leased.forEach((row, i) => {
      const outcome = outcomes[i] ?? { status: 'rejected', reason: new Error('the delivery gave no outcome for this row') };
      if (outcome.status === 'rejected') failed.push({ row, error: outcome.reason as Error | undefined });
      else if (outcome.value !== RECORDED) delivered.push(row.id);
    });
    if (delivered.length > 0) await markDone(this.prisma, this.spec, delivered);
    if (failed.length > 0) await this.scheduleRetries(failed);
    this.spec.recorded?.(leased.map((row) => row.id));
  }

  private async scheduleRetries(failed: { row: Row; error: Error | undefined }[]): Promise<void> {
    const table = Prisma.raw(this.spec.table);
    const retries = failed.map(({ row, error }) => {
      const attempt = this.spec.attemptOf(row);
      const delayMs = retryDelayMs(this.options.retryBaseMs, attempt);
      // Held back: a destination that is down fails every row of every round.
      logRepeating(this.log, 'warn', { err: error, id: row.id, attempt, retryInMs: delayMs }, `${this.spec.name} failed; will retry`);
      return { ...row, delayMs, error: String(error?.message ?? error) };
    });
    // One statement for the batch: an outage of the destination fails every delivery at once.
    await this.prisma.$executeRaw`
      UPDATE ${table} o
      SET next_attempt_at = now() + f.delay_ms * interval '1 millisecond', locked_until = NULL, last_error = f.error
      FROM unnest(${retries.map((retry) => retry.id)}::text[], ${retries.map((retry) => retry.locked_until)}::timestamptz[],
                  ${retries.map((retry) => retry.delayMs)}::int[], ${retries.map((retry) => retry.error)}::text[]) AS f(id, lease, delay_ms, error)
      WHERE o.id = f.id AND o.status = 'PENDING' AND o.locked_until = f.lease`.catch((error: unknown) =>
      // Their leases run out and the due rounds take them then. Held back: PostgreSQL down fails every batch.
      logRepeating(this.log, 'warn', { err: error, rows: retries.length }, `could not schedule ${this.spec.name} retries`),
    );
  }

  /**
   * Gives up leases before they run out, as if never claimed: nothing was delivered. A
   * lease that ran out and was claimed by another worker is left alone.
   */
  async handBack(rows: Row[]): Promise<void> {
    if (rows.length === 0) return;
    const attempts = Prisma.raw(this.spec.attemptsColumn);
    await this.prisma.$executeRaw`
      UPDATE ${Prisma.raw(this.spec.table)} o SET locked_until = NULL, next_attempt_at = now(), ${attempts} = o.${attempts} - 1
      FROM unnest(${rows.map((row) => row.id)}::text[], ${rows.map((row) => row.locked_until)}::timestamptz[]) AS mine(id, lease)
      WHERE o.id = mine.id AND o.locked_until = mine.lease AND o.status = 'PENDING'`.catch((error: unknown) =>
      logRepeating(this.log, 'warn', { err: error, rows: rows.length }, `could not hand back rows of ${this.spec.name}; their leases will run out`),
    );
  }
}
