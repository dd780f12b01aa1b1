import { createHash, randomUUID } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { projectFile } from '../../projectFiles.ts';
import type { Logger } from '../logger.ts';
import { StartupError } from '../startupError.ts';
import type { Database, SqlSession } from './database.ts';

export const MIGRATIONS_DIR = projectFile('migrations');

// The same table `prisma migrate` keeps, so a team that has the schema engine can take over.
const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
);`;

interface MigrationFile {
  name: string;
  sql: string;
  checksum: string;
}

interface AppliedRow {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/**
 * Whether an applied migration's recorded checksum is this file's, judged as `prisma
 * migrate` does: git may check the file out with other line endings than the machine that
 * applied it had (CRLF on Windows with core.autocrlf), which changes no statement.
 */
function matchesChecksum(sql: string, checksum: string): boolean {
  return [sql, sql.replaceAll('\r\n', '\n'), sql.replaceAll('\n', '\r\n')].some((variant) => sha256(variant) === checksum);
}

async function readMigrations(dir = MIGRATIONS_DIR): Promise<MigrationFile[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(join(dir, name, 'migration.sql'), 'utf8');
      return { name, sql, checksum: sha256(sql) };
    }),
  );
}

/** Applies pending migrations in order; `createdNow` when the database had none before (this start created it). */
export async function applyMigrations(db: Database, log: Logger, dir = MIGRATIONS_DIR): Promise<{ createdNow: boolean }> {
  const migrations = await readMigrations(dir);
  return db.withMigrationSession(async (session) => {
    await session.exec(CREATE_MIGRATIONS_TABLE);
    const before = await session.query<AppliedRow>('SELECT migration_name, checksum, finished_at FROM "_prisma_migrations" WHERE rolled_back_at IS NULL');
    const failed = before.find((row) => row.finished_at === null);
    if (failed) {
      throw new StartupError(`migration ${failed.migration_name} failed earlier and is marked unfinished in _prisma_migrations; fix the database by hand, then delete that row`);
    }
    const appliedByName = new Map(before.map((row) => [row.migration_name, row]));
    for (const migration of migrations) {
      const previous = appliedByName.get(migration.name);
      if (previous) {
        if (!matchesChecksum(migration.sql, previous.checksum)) {
          log.warn({ migration: migration.name }, 'an applied migration was edited after it ran; not applying it again');
        }
        continue;
      }
      await applyOne(session, migration);
      log.info({ migration: migration.name }, 'applied migration');
    }
    return { createdNow: before.length === 0 };
  });
}

async function applyOne(session: SqlSession, migration: MigrationFile): Promise<void> {
  const id = randomUUID();
  await session.query('INSERT INTO "_prisma_migrations" (id, checksum, migration_name, started_at) VALUES ($1, $2, $3, now())', [id, migration.checksum, migration.name]);
  try {
    await session.exec(`BEGIN;\n${migration.sql}\nCOMMIT;`);
  } catch (error) {
    await session.exec('ROLLBACK').catch(() => undefined);
    await session.query('UPDATE "_prisma_migrations" SET logs = $2 WHERE id = $1', [id, String(error)]);
    throw new StartupError(`migration ${migration.name} failed: ${(error as Error).message}`);
  }
  await session.query('UPDATE "_prisma_migrations" SET finished_at = now(), applied_steps_count = 1 WHERE id = $1', [id]);
}
