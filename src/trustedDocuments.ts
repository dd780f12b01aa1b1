/*
 * Persisted ("trusted") documents: a client sends `documentId`, the sha256 of a document
 * graphql-codegen listed in the web app's manifest, instead of the document's text.
 * GRAPHQL_TRUSTED_DOCUMENTS says what the server takes: `off` only text, `allow` both,
 * `only` ids alone, except from operators (GraphiQL, scripts), who may send any text.
 * Every transport asks this module: HTTP through Yoga's persisted-operations plugin,
 * graphql-ws, graphql-sse and the fast lane through `queryOf` and `documentOf`.
 */
import { readFileSync } from 'node:fs';
import { usePersistedOperations } from '@graphql-yoga/plugin-persisted-operations';
import { GraphQLError, Kind, parse } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { App } from './app.ts';
import type { Config } from './config.ts';
import { type TransportContext, authorizationOf } from './context.ts';
import { ErrorCode } from './errors.ts';
import { StartupError, describeCause } from './infra/startupError.ts';
import { projectFile } from './projectFiles.ts';

/**
 * The web app's manifest, which its build (web/vite.config.ts) copies next to the bundle
 * whose hashes it lists, so the ids the served app sends are always the ones loaded here.
 * Under .vite/ like Vite's own manifest: the web app's file server serves no dotfiles.
 */
export const MANIFEST_FILE = projectFile('dist', 'web', '.vite', 'persisted-documents.json');

export type TrustedDocumentsMode = Config['GRAPHQL_TRUSTED_DOCUMENTS'];

/** What a request names its document by: the text, or the id of a persisted one. */
export interface DocumentParams {
  query?: unknown;
  documentId?: unknown;
  extensions?: unknown;
}

export interface TrustedDocuments {
  mode: TrustedDocumentsMode;
  /** The text of the persisted document `id`, if this server takes it. */
  documentOf(id: string): string | undefined;
  /** The text to run for `params`, or a GraphQLError refusing them (thrown). */
  queryOf(params: DocumentParams, transport: TransportContext): Promise<string>;
  /** The same rules for Yoga's HTTP transports (POST, GET, SSE). */
  plugin: Plugin;
  /** The names of the manifest's operations, whatever the mode: the app's own operations. */
  operationNames: ReadonlySet<string>;
}

/** The manifest as codegen writes it, `{ "<sha256>": "<document text>" }`; null when the web app is not built. */
export function loadManifest(file = MANIFEST_FILE): Map<string, string> | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new StartupError(`cannot read the persisted documents in ${file}: ${describeCause(error)}`);
  }
  let manifest: unknown;
  try {
    manifest = JSON.parse(text);
  } catch (error) {
    throw new StartupError(`the persisted documents in ${file} are not JSON (${describeCause(error)}); run npm run build:web -- --force`);
  }
  const entries = typeof manifest === 'object' && manifest !== null && !Array.isArray(manifest) ? Object.entries(manifest) : [];
  if (entries.length === 0 || entries.some(([, document]) => typeof document !== 'string')) {
    throw new StartupError(`the persisted documents in ${file} are not an object of documents by hash; run npm run build:web -- --force`);
  }
  return new Map(entries as [string, string][]);
}

/**
 * The operation names of the app's own documents: the names the metrics count as their
 * own whoever sends them (src/metrics.ts).
 */
function operationNamesOf(manifest: Map<string, string> | null): Set<string> {
  const names = new Set<string>();
  for (const [id, document] of manifest ?? []) {
    let definitions: ReturnType<typeof parse>['definitions'];
    try {
      definitions = parse(document).definitions;
    } catch (error) {
      throw new StartupError(`the persisted document ${id} in ${MANIFEST_FILE} does not parse (${describeCause(error)}); run npm run build:web -- --force`);
    }
    for (const definition of definitions) if (definition.kind === Kind.OPERATION_DEFINITION && definition.name) names.add(definition.name.value);
  }
  return names;
}

/** An error refusing the request before anything runs; `status` for the HTTP answer (Yoga reads and drops `http`). */
function refusal(code: string, message: string, status?: number): GraphQLError {
  return new GraphQLError(message, { extensions: status ? { code, http: { status } } : { code } });
}

/** A request as Apollo's persisted-query link first sends it: `extensions.persistedQuery`, no query. */
function isApolloHashOnly(params: DocumentParams): boolean {
  const extensions = params.extensions as { persistedQuery?: unknown } | null | undefined;
  return typeof extensions === 'object' && extensions !== null && typeof extensions.persistedQuery === 'object' && extensions.persistedQuery !== null;
}

export function createTrustedDocuments(app: App, mode: TrustedDocumentsMode, manifest: Map<string, string> | null): TrustedDocuments {
  const documents = mode === 'off' ? new Map<string, string>() : (manifest ?? new Map<string, string>());
  // One code for every id the server cannot run, off or unknown: a client then sends the text instead.
  const notFound = (status?: number) =>
    refusal(ErrorCode.persistedQueryNotFound, mode === 'off' ? 'this server takes no persisted documents; send the query text' : 'no persisted document has this documentId', status);
  const onlyPersisted = (status?: number) => refusal(ErrorCode.persistedQueryOnly, 'this server runs persisted documents only: send a documentId from the app', status);
  // Apollo's automatic persisted queries (a hash in extensions.persistedQuery, no text) are not
  // registered here; told so, Apollo's link stops sending hashes and sends the text.
  const missing = (params: DocumentParams, status?: number) =>
    isApolloHashOnly(params)
      ? refusal(ErrorCode.persistedQueryNotSupported, 'PersistedQueryNotSupported: send the query text, or a documentId', status)
      : refusal(ErrorCode.badUserInput, 'send a query or a documentId', status);

  const fromOperator = (transport: TransportContext) => app.tokens.fromOperator(authorizationOf(transport));

  const idOf = (params: DocumentParams) => (typeof params.documentId === 'string' ? params.documentId : null);

  return {
    mode,
    operationNames: operationNamesOf(manifest),
    documentOf: (id) => documents.get(id),
    async queryOf(params, transport) {
      if (typeof params.query === 'string' && params.query !== '') {
        if (mode === 'only' && !(await fromOperator(transport))) throw onlyPersisted();
        return params.query;
      }
      const id = idOf(params);
      if (id === null) throw missing(params);
      const document = documents.get(id);
      if (document === undefined) throw notFound();
      return document;
    },
    plugin: usePersistedOperations({
      // Yoga's GET parser keeps only the standard parameters: a GET's documentId is read from its URL.
      extractPersistedOperationId: (params, request) =>
        idOf(params as DocumentParams) ?? (request.method === 'GET' ? new URL(request.url, 'http://localhost').searchParams.get('documentId') : null),
      getPersistedOperation: (id) => documents.get(id) ?? null,
      allowArbitraryOperations: mode === 'only' ? (request) => fromOperator({ request }) : true,
      customErrors: { notFound: () => notFound(400), persistedQueryOnly: () => onlyPersisted(403), keyNotFound: ({ params }) => missing(params as DocumentParams, 400) },
    }) as Plugin,
  };
}
