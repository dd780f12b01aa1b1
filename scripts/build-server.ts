// Bundles the server (src/main.ts) into dist/server/main.mjs, packages left as imports:
// `npm start` and the servers tests and benches start run it with plain node. Through tsx,
// every start compiled each module again and took 2-3 times as long (issue 17's notes in
// bench/RESULTS.md).
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { projectFile } from '../src/projectFiles.ts';

export const SERVER_BUNDLE = projectFile('dist', 'server', 'main.mjs');

/**
 * Builds the bundle and its source map. Each file is written beside itself and renamed into
 * place, so a server starting meanwhile reads the old bundle or the new one, never half.
 */
export async function buildServer(): Promise<void> {
  const { outputFiles } = await build({
    entryPoints: [projectFile('src', 'main.ts')],
    outfile: SERVER_BUNDLE,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: true,
    write: false,
    logLevel: 'warning',
  });
  mkdirSync(dirname(SERVER_BUNDLE), { recursive: true });
  for (const file of outputFiles) {
    const partial = `${file.path}.${process.pid}.partial`;
    writeFileSync(partial, file.contents);
    renameSync(partial, file.path);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await buildServer();
  console.log('server: built into dist/server');
}
