import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function projectRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

/**
 * The folder that holds package.json. The server runs from src/ (tests in process, tsx)
 * and from its bundle in dist/server/ (`npm start`, started servers in tests), so the
 * files it reads (Lua scripts, migrations, the web app) are found from here, not from
 * the module's own place.
 */
const PROJECT_ROOT = projectRoot(dirname(fileURLToPath(import.meta.url)));

/** A path inside the project, from its root. */
export const projectFile = (...parts: string[]): string => join(PROJECT_ROOT, ...parts);
