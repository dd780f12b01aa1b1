import { createHash, randomUUID } from 'node:crypto';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { type Database, openDatabase } from '../src/infra/db/database.ts';
import { MIGRATIONS_DIR, applyMigrations } from '../src/infra/db/migrations.ts';
import { createLogger } from '../src/infra/logger.ts';
import { testEnv } from './support/env.ts';
import { waitFor } from './support/poll.ts';
import { openStores } from './support/stores.ts';

const env = testEnv('migrations');
const stores = openStores(env);
const log = createLogger('silent');
let db: Database;
/** A copy of migrations/ that each test adds its own pending migrations to. */
let dir: string;

beforeAll(async () => {
  db = await openDatabase(loadConfig(env.vars));
  await applyMigrations(db, log);
  dir = await mkdtemp(join(tmpdir(), 'migrations-'));
  await cp(MIGRATIONS_DIR, dir, { recursive: true });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await db?.close();
  await stores.cleanup();
});

async function addMigration(name: string, sql: string): Promise<void> {
  await mkdir(join(dir, name));
  await writeFile(join(dir, name, 'migration.sql'), sql);
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('alongside prisma migrate deploy', () => {
  // The lock Prisma's schema engine holds for the whole of a `migrate deploy` (its number is fixed).
  const PRISMA_MIGRATE_LOCK_ID = 72707369;

  it('waits for a migration Prisma is still running, then goes on with the next one', async () => {
    const byPrisma = { name: '29990101000000_slow_by_prisma', sql: 'CREATE TABLE by_prisma (id INT PRIMARY KEY);\n' };
    const afterIt = { name: '29990101000001_after_it', sql: 'CREATE TABLE after_it (id INT PRIMARY KEY);\n' };
    await addMigration(byPrisma.name, byPrisma.sql);
    await addMigration(afterIt.name, afterIt.sql);
    const waitingForPrismaLock = async () =>
      (await stores.sql.query(`SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND objid = $1 AND NOT granted`, [PRISMA_MIGRATE_LOCK_ID])).rowCount! > 0;

    // What `prisma migrate deploy` holds while it runs a migration: its lock, and the row it
    // wrote before starting, unfinished until the migration's script returns.
    const prisma = await stores.sql.connect();
    let outcome: unknown = 'pending';
    let applying: Promise<unknown> | undefined;
    try {
      await prisma.query('SELECT pg_advisory_lock($1)', [PRISMA_MIGRATE_LOCK_ID]);
      await prisma.query('INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at) VALUES ($1, $2, $3, now())', [randomUUID(), sha256(byPrisma.sql), byPrisma.name]);
      applying = applyMigrations(db, log, dir).then(
        () => {
          outcome = 'applied';
        },
        (error: unknown) => {
          outcome = error;
        },
      );
      await waitFor('the app to wait for the lock, or to give up', async () => outcome !== 'pending' || (await waitingForPrismaLock()));
      expect(outcome, 'the app did not wait for Prisma').toBe('pending');
      await prisma.query(byPrisma.sql);
      await prisma.query('UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE migration_name = $1', [byPrisma.name]);
    } finally {
      await prisma.query('SELECT pg_advisory_unlock_all()');
      prisma.release();
    }
    await applying;
    expect(outcome).toBe('applied');
    const { rows } = await stores.sql.query<{ migration_name: string }>(
      'SELECT migration_name FROM "_prisma_migrations" WHERE migration_name = ANY ($1) AND finished_at IS NOT NULL ORDER BY migration_name',
      [[byPrisma.name, afterIt.name]],
    );
    expect(rows.map((row) => row.migration_name)).toEqual([byPrisma.name, afterIt.name]);
  });
});
