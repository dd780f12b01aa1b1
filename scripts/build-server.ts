// Bundles the server (src/main.ts) into dist/server/main.mjs: `npm start` and the servers
// tests and benches start run it with plain node. Through tsx, every start compiled each
// module again and took 2-3 times as long. Most packages go into the bundle too: loading
// them as hundreds of separate modules took 0.6 s of each 2.1 s start.
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Plugin, build } from 'esbuild';
import { projectFile } from '../src/projectFiles.ts';

export const SERVER_BUNDLE = projectFile('dist', 'server', 'main.mjs');

/**
 * graphql's ESM build, for every import of graphql or one of its modules. graphql names its
 * CommonJS build as `main`, which esbuild takes for Node, and a bundled CommonJS module is
 * read through a getter per export: that was 1.4% of the server's CPU, in the executor's
 * every field. Taking `module` for every package instead fails (graphql-armor's ESM builds
 * have no default export), so only graphql, which ships each module as `.js` and `.mjs`.
 */
const graphqlAsEsm: Plugin = {
  name: 'graphql-as-esm',
  setup(builder) {
    builder.onResolve({ filter: /^graphql(\/|$)/ }, ({ path, importer, resolveDir }) => {
      const commonJs = createRequire(importer || `${resolveDir}/`).resolve(path);
      const esm = commonJs.replace(/\.js$/, '.mjs');
      return { path: existsSync(esm) ? esm : commonJs };
    });
  },
};

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
    // Left as imports: packages that read files beside their own modules (Prisma's query
    // compiler, PGlite's wasm, ioredis's package.json), start pino's transports by module
    // path, or must be the very copy another external one imports (pg, for the Prisma
    // adapter's pool), and the GraphiQL page, which the server loads only when asked for.
    external: ['@prisma/*', '@electric-sql/pglite', 'pglite-prisma-adapter', 'pino', 'pino-pretty', 'pg', 'ioredis', '@graphql-yoga/render-graphiql'],
    // The CommonJS packages inside call require() for Node's own modules.
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
    sourcemap: true,
    // Stack traces need the map's lines, not the packages' sources: without them the map is
    // 2 MB instead of 7.5, and --enable-source-maps reads it at every start.
    sourcesContent: false,
    plugins: [graphqlAsEsm],
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
