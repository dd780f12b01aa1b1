import { createHash, randomUUID } from 'node:crypto';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
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

describe('a migration checked out with other line endings', () => {
  /** Runs the migrations of `dir`; the migrations the app says were edited after they ran. */
  async function editedMigrations(): Promise<string[]> {
    const edited: string[] = [];
    const log = pino({ level: 'warn' }, { write: (line: string) => void edited.push((JSON.parse(line) as { migration: string }).migration) });
    await applyMigrations(db, log, dir);
    return edited;
  }

  // git on Windows with core.autocrlf checks files out with CRLF; another machine applied them with LF, or the other way round.
  it('is not taken for an edited one, either way round, as prisma migrate does not', async () => {
    const lf = { name: '29990201000000_applied_with_lf', sql: '-- Two lines.\nCREATE TABLE applied_with_lf (id INT PRIMARY KEY);\n' };
    const crlf = { name: '29990201000001_applied_with_crlf', sql: '-- Two lines.\r\nCREATE TABLE applied_with_crlf (id INT PRIMARY KEY);\r\n' };
    await addMigration(lf.name, lf.sql);
    await addMigration(crlf.name, crlf.sql);
    expect(await editedMigrations()).toEqual([]);

    await writeFile(join(dir, lf.name, 'migration.sql'), lf.sql.replaceAll('\n', '\r\n'));
    await writeFile(join(dir, crlf.name, 'migration.sql'), crlf.sql.replaceAll('\r\n', '\n'));
    expect(await editedMigrations()).toEqual([]);

    await writeFile(join(dir, lf.name, 'migration.sql'), lf.sql.replace('Two', 'Edited: two'));
    expect(await editedMigrations()).toEqual([lf.name]);
  });
});
