// Builds the web app (web/) into dist/web unless the build is newer than every source:
// `npm start` runs it, so a fresh clone serves /app/ with no step of its own.
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
// Written by the same build as index.html; a build from before persisted documents lacks it.
const built = join(root, 'dist/web/.vite/persisted-documents.json');

/** The newest modification time under `dir`, generated code left out. */
function newest(dir) {
  let latest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'gql' || entry.name === 'node_modules') continue;
    const path = join(dir, entry.name);
    latest = Math.max(latest, entry.isDirectory() ? newest(path) : statSync(path).mtimeMs);
  }
  return latest;
}

const builtAt = (() => {
  try {
    return statSync(built).mtimeMs;
  } catch {
    return 0;
  }
})();
const sources = Math.max(newest(join(root, 'web')), ...['schema.graphql', 'codegen.yml'].map((file) => statSync(join(root, file)).mtimeMs));
if (builtAt > sources && !process.argv.includes('--force')) {
  console.log('web app: dist/web is up to date');
} else {
  execFileSync('npx', ['graphql-codegen', '--config', 'codegen.yml', '--silent'], { cwd: root, stdio: 'inherit' });
  const { build } = await import('vite');
  await build({ configFile: join(root, 'web/vite.config.ts'), logLevel: 'warn' });
  console.log('web app: built into dist/web');
}
