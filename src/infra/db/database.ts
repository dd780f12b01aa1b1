import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import type { Config } from '../../config.ts';
import { isStoreOutage } from '../../errorMasking.ts';
import { type Prisma, PrismaClient } from '../../generated/prisma/client.ts';
import { storeErrors } from '../metrics.ts';
import { StartupError, StoreUnreachableError, describeCause } from '../startupError.ts';
import { type DataDirLock, lockDataDir } from './dataDirLock.ts';

/** A connection that can run multi-statement SQL; what the migration runner needs. */
export interface SqlSession {
  exec(sql: string): Promise<void>;
  query<Row>(sql: string, params?: unknown[]): Promise<Row[]>;
}

/** How busy a pg pool is, as /metrics shows it. */
export type PoolCounts = Pick<pg.Pool, 'totalCount' | 'idleCount' | 'waitingCount'>;

export interface Database {
  readonly prisma: PrismaClient;
  readonly kind: 'postgresql' | 'pglite';
  /** The pool every query goes through, Prisma's included; PGlite has none (one connection, in process). */
  readonly pool?: PoolCounts;
  /**
   * One raw statement through the driver itself, for what runs with every request of a
   * flash crowd (the journal's batch statements, the payment notify's lookup): on
   * PostgreSQL, Prisma's raw path cost 494 µs of CPU per 30-row batch statement, the pg
   * driver 135. Rows as the driver gives them, so only text, int4, bool and timestamptz
   * columns read the same on both databases (PGlite goes through Prisma): cast others in SQL.
   */
  query<Row>(sql: Prisma.Sql): Promise<Row[]>;
  /** Runs fn on one connection that holds the migration locks, the app's and `prisma migrate`'s, for its duration. */
  withMigrationSession<T>(fn: (session: SqlSession) => Promise<T>): Promise<T>;
  ping(): Promise<void>;
  close(): Promise<void>;
}

// Any constant works; it only has to be the same for every instance of the app.
const MIGRATION_LOCK_ID = 7_281_546_021;
/**
 * The lock `prisma migrate` holds while it reads and applies migrations (a constant of
 * Prisma's schema engine). Held too, so that neither the app nor Prisma takes a migration
 * the other is still running for a failed one, nor applies it a second time.
 */
const PRISMA_MIGRATE_LOCK_ID = 72_707_369;
/** PostgreSQL's SQLSTATE for a duplicate key. */
const UNIQUE_VIOLATION = '23505';

export async function openDatabase(config: Config): Promise<Database> {
  return config.DATABASE_URL ? openPostgres(config, config.DATABASE_URL) : openPglite(config.PGLITE_DIR);
}

/**
 * Prisma's default 2 s wait for a connection to start a transaction in is shorter than
 * a burst keeps the pool busy (a wave of late seat payments, a storm of openTeam): the
 * requests past it failed while plain statements, which wait on the pool as long as it
 * takes, went through. 5 s is the patience of a Redis command (REDIS_COMMAND_TIMEOUT_MS);
 * past it the caller is told SERVICE_UNAVAILABLE, and a retry is safe.
 */
const TRANSACTION_OPTIONS = { maxWait: 5_000 };

/**
 * Every wait on PostgreSQL is bounded, so a table locked by hand or a pool held by stuck
 * statements answers SERVICE_UNAVAILABLE (see errorMasking.ts) instead of holding requests
 * as long as it lasts: a lock wait by DATABASE_LOCK_TIMEOUT_MS, a statement by
 * DATABASE_STATEMENT_TIMEOUT_MS, a wait for a pooled connection by the lesser of that and
 * 10 s. A journaled change that timed out stays in its stream for the sweeper, as in an outage.
 */
function sessionOptions(config: Config, schema: string | undefined): string {
  const settings = [`lock_timeout=${config.DATABASE_LOCK_TIMEOUT_MS}`, `statement_timeout=${config.DATABASE_STATEMENT_TIMEOUT_MS}`];
  // Raw SQL (migrations, the hand-written queries) must see the same schema Prisma targets.
  if (schema) settings.push(`search_path="${schema}"`);
  return settings.map((setting) => `-c ${setting}`).join(' ');
}

const MAX_CONNECT_WAIT_MS = 10_000;

async function openPostgres(config: Config, databaseUrl: string): Promise<Database> {
  const url = new URL(databaseUrl);
  url.searchParams.delete('schema');
  const schema = config.databaseSchema;
  const pool = new pg.Pool({
    connectionString: url.toString(),
    max: config.DATABASE_POOL_SIZE,
    connectionTimeoutMillis: Math.min(config.DATABASE_STATEMENT_TIMEOUT_MS, MAX_CONNECT_WAIT_MS),
    options: sessionOptions(config, schema),
  });
  // Idle clients that lose their server are dropped by pg; queries report the error.
  pool.on('error', () => storeErrors.inc({ source: 'postgres' }));
  try {
    const client = await pool.connect();
    try {
      if (schema) await createSchema(client, schema);
    } finally {
      // Unreleased, it would hold pool.end() below forever.
      client.release();
    }
  } catch (error) {
    await pool.end().catch(() => undefined);
    const where = `DATABASE_URL (${url.host}${url.pathname})`;
    // A missing database or a refused login is a setting to fix; anything else may pass with the outage.
    if (!isStoreOutage(error)) throw new StartupError(`PostgreSQL refused ${where}: ${(error as Error).message ?? describeCause(error)}. Fix DATABASE_URL.`);
    throw new StoreUnreachableError(
      `PostgreSQL is unreachable at ${where}: ${describeCause(error)}. Set DATABASE_URL to a reachable server, or unset it to use the embedded PGlite database.`,
    );
  }
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool, schema ? { schema } : undefined), transactionOptions: TRANSACTION_OPTIONS });
  return {
    prisma,
    kind: 'postgresql',
    pool,
    query: async <Row>(sql: Prisma.Sql) => (await pool.query(sql.text, sql.values)).rows as Row[],
    async withMigrationSession(fn) {
      const client = await pool.connect();
      try {
        // A migration may wait for another instance's, and rewrite a large table: no limits
        // for this session, back to the pool's once it is done.
        await client.query('SET lock_timeout = 0; SET statement_timeout = 0');
        try {
          // The app's first, then Prisma's: only the instance holding the app's lock queues
          // for Prisma's, so a `prisma migrate deploy` (which gives up after 10 s) waits for
          // one instance's migrations, not for each instance's turn; and as Prisma takes no
          // other lock, no two sessions can each wait for the other's.
          await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
          await client.query('SELECT pg_advisory_lock($1)', [PRISMA_MIGRATE_LOCK_ID]);
          return await fn({
            exec: async (sql) => void (await client.query(sql)),
            query: async (sql, params) => (await client.query(sql, params)).rows,
          });
        } finally {
          // Both, or the app's alone if waiting for Prisma's failed.
          await client.query('SELECT pg_advisory_unlock_all()');
          await client.query('RESET lock_timeout; RESET statement_timeout');
        }
      } finally {
        client.release();
      }
    },
    async ping() {
      await pool.query('SELECT 1');
    },
    async close() {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

/**
 * Instances of a new deployment start together: PostgreSQL lets two concurrent
 * `CREATE SCHEMA IF NOT EXISTS` race on its catalog, and the loser fails with a unique
 * violation although the schema exists by then.
 */
async function createSchema(client: pg.PoolClient, schema: string): Promise<void> {
  try {
    await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
  } catch (error) {
    if ((error as { code?: string }).code !== UNIQUE_VIOLATION) throw error;
  }
}

async function openPglite(dir: string): Promise<Database> {
  let client: PGlite;
  let lock: DataDirLock;
  try {
    mkdirSync(dir, { recursive: true });
    lock = lockDataDir(dir);
  } catch (error) {
    throw new StartupError(`cannot open the embedded database in PGLITE_DIR=${dir}: ${describeCause(error)}`);
  }
  if ('heldBy' in lock) {
    throw new StartupError(`the embedded database in PGLITE_DIR=${dir} is open in process ${lock.heldBy}, and PGlite serves one process: stop that one, or give this one another PGLITE_DIR`);
  }
  const { release } = lock;
  try {
    client = await PGlite.create(dir);
  } catch (error) {
    release();
    throw new StartupError(`cannot open the embedded database in PGLITE_DIR=${dir}: ${describeCause(error)}`);
  }
  const prisma = new PrismaClient({ adapter: new PrismaPGlite(client), transactionOptions: TRANSACTION_OPTIONS });
  return {
    prisma,
    kind: 'pglite',
    query: <Row>(sql: Prisma.Sql) => prisma.$queryRaw<Row[]>(sql),
    // PGlite is one connection owned by this process, so no lock is needed.
    withMigrationSession: (fn) =>
      fn({
        exec: async (sql) => void (await client.exec(sql)),
        query: async <Row>(sql: string, params?: unknown[]) => (await client.query<Row>(sql, params)).rows,
      }),
    async ping() {
      await client.query('SELECT 1');
    },
    async close() {
      try {
        await prisma.$disconnect();
        await client.close();
      } finally {
        release();
      }
    },
  };
}
