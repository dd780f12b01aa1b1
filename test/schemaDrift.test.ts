import { readFile, readdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils';
import * as engineModule from '@prisma/schema-engine-wasm/schema_engine_bg';
import { PrismaPGlite } from 'pglite-prisma-adapter';
import { expect, it } from 'vitest';
import { MIGRATIONS_DIR } from '../src/infra/db/migrations.ts';
import { projectFile } from '../src/projectFiles.ts';

/**
 * The package's own entry imports the .wasm as an ES module, which Node 20 only does behind
 * --experimental-wasm-modules: instantiate it from its bytes and hand it to the bindings.
 */
async function loadSchemaEngine(): Promise<typeof engineModule.SchemaEngine> {
  const bindings = createRequire(import.meta.url).resolve('@prisma/schema-engine-wasm/schema_engine_bg');
  const { instance } = await WebAssembly.instantiate(await readFile(bindings.replace(/\.js$/, '.wasm')), { './schema_engine_bg.js': engineModule });
  engineModule.__wbg_set_wasm(instance.exports);
  (instance.exports.__wbindgen_start as () => void)();
  // What the bindings report an engine panic to before throwing.
  Object.assign(globalThis, { PRISMA_WASM_PANIC_REGISTRY: { set_message: (message: string) => console.error(message) } });
  return engineModule.SchemaEngine;
}

/** A throwaway in-memory PostgreSQL for the engine, as the shadow database `prisma migrate` replays migrations into. */
async function inMemoryPostgres() {
  const db = new PGlite();
  const adapter = await new PrismaPGlite(db).connect();
  // The adapter does not await the script, so a migration that fails would pass unnoticed.
  adapter.executeScript = async (script) => {
    await db.exec(script).catch((error: unknown) => (adapter as unknown as { onError(error: unknown): never }).onError(error));
  };
  const dispose = adapter.dispose.bind(adapter);
  adapter.dispose = async () => {
    await dispose();
    await db.close();
  };
  return adapter;
}

async function migrationsList() {
  const names = (await readdir(MIGRATIONS_DIR, { withFileTypes: true }))
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  return {
    baseDir: MIGRATIONS_DIR,
    lockfile: { path: 'migration_lock.toml', content: await readFile(join(MIGRATIONS_DIR, 'migration_lock.toml'), 'utf8') },
    shadowDbInitScript: '',
    migrationDirectories: await Promise.all(
      names.map(async (name) => ({
        path: name,
        migrationFile: { path: 'migration.sql', content: { tag: 'ok' as const, value: await readFile(join(MIGRATIONS_DIR, name, 'migration.sql'), 'utf8') } },
      })),
    ),
  };
}

// A team that takes the migrations over with `prisma migrate` (docs/operations.md) has its
// first `migrate dev` or `db push` change the database by whatever the schema and the
// migrations disagree on: an index missing from schema.prisma would be dropped.
it('schema.prisma describes the database the migrations build', { timeout: 60_000 }, async () => {
  const SchemaEngine = await loadSchemaEngine();
  const schemaPath = projectFile('schema.prisma');
  const files = [{ path: schemaPath, content: await readFile(schemaPath, 'utf8') }];
  const adapterFactory = bindMigrationAwareSqlAdapterFactory({
    provider: 'postgres',
    adapterName: 'pglite',
    connect: inMemoryPostgres,
    connectToShadowDb: inMemoryPostgres,
  });
  const engine = await SchemaEngine.new({ datamodels: files.map(({ path, content }) => [path, content]) }, () => undefined, adapterFactory);
  try {
    const diff = await engine.diff({
      from: { tag: 'migrations', ...(await migrationsList()) },
      to: { tag: 'schemaDatamodel', files },
      script: true,
      exitCode: true,
      filters: { externalTables: [], externalEnums: [] },
    });
    // 2 when they differ: the script says what a `migrate dev` would do to the database.
    expect(diff.exitCode, diff.stdout ?? '').toBe(0);
  } finally {
    engine.free();
  }
});
