import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { type Plugin, defineConfig } from 'vite';

/**
 * Copies codegen's persisted-documents.json into the build, where the server loads it
 * (src/trustedDocuments.ts): the ids it takes are then those of the bundle it serves.
 * Under .vite/, like Vite's own manifest, which the server's file handler does not serve.
 */
function persistedDocuments(): Plugin {
  return {
    name: 'persisted-documents',
    apply: 'build',
    generateBundle() {
      const source = readFileSync(fileURLToPath(new URL('src/gql/persisted-documents.json', import.meta.url)), 'utf8');
      this.emitFile({ type: 'asset', fileName: '.vite/persisted-documents.json', source });
    },
  };
}

// The app is served by the GraphQL server itself at /app/ (src/webApp.ts): one origin, no CDN.
export default defineConfig({
  root: fileURLToPath(new URL('.', import.meta.url)),
  base: '/app/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  plugins: [persistedDocuments()],
  build: { outDir: fileURLToPath(new URL('../dist/web', import.meta.url)), emptyOutDir: true, sourcemap: true },
});
