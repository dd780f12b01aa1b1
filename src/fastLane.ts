import type { IncomingMessage, ServerResponse } from 'node:http';
import { sendNodeResponse } from '@whatwg-node/server';
import type { DocumentNode, ExecutionResult, GraphQLError } from 'graphql';
import { type YogaServerInstance, processRegularResult } from 'graphql-yoga';
import type { Context } from './context.ts';
import { type MaskErrorFunction, retryAfterSeconds } from './errorMasking.ts';
import { operationOf } from './guards/operation.ts';
import { acceptedMediaType } from './httpHygiene.ts';
import type { Logger } from './infra/logger.ts';
import type { TrustedDocuments } from './trustedDocuments.ts';

const REGULAR_MEDIA_TYPES = ['application/graphql-response+json', 'application/json'] as const;
type RegularMediaType = (typeof REGULAR_MEDIA_TYPES)[number];
type Yoga = YogaServerInstance<{ connectionParams?: Record<string, unknown> }, Context>;
type RequestView = ReturnType<typeof requestView>;

const MAX_FAST_BODY_BYTES = 64 * 1024;

/**
 * Yoga's choice of media type for a single (non-streamed) result, or null when the
 * client accepts none that Yoga would answer a query or mutation with.
 */
export function regularMediaType(accept: string | undefined): RegularMediaType | null {
  return acceptedMediaType(accept, REGULAR_MEDIA_TYPES);
}

interface Params {
  query: string;
  variables?: Record<string, unknown> | null;
  operationName?: string | null;
}

/**
 * The parameters of a body this lane serves as they are: query text where the server takes
 * it from anyone, or the id of a persisted document it has. Anything else, a refusal
 * included, is Yoga's to answer (src/trustedDocuments.ts).
 */
function asParams(body: unknown, trusted: TrustedDocuments): Params | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const { query, documentId, variables, operationName, ...rest } = body as Record<string, unknown>;
  if (Object.keys(rest).length > 0) return null;
  const text = query === undefined && typeof documentId === 'string' ? trusted.documentOf(documentId) : documentId === undefined && trusted.mode !== 'only' ? query : undefined;
  if (typeof text !== 'string') return null;
  if (variables != null && (typeof variables !== 'object' || Array.isArray(variables))) return null;
  if (operationName != null && typeof operationName !== 'string') return null;
  return { query: text, variables: variables as Params['variables'], operationName: operationName as Params['operationName'] };
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * What Yoga's plugins read of a request (method, url, headers), without building a
 * WHATWG Request: that object, with its AbortController and streams, is much of what
 * the fast lane saves. It has no `signal`: a plugin that needs one (execution
 * cancellation, say) would not see it here, so adding one means checking this lane.
 */
function requestView(req: IncomingMessage) {
  return {
    method: req.method,
    url: req.url,
    headers: { get: (name: string) => (req.headers[name.toLowerCase()] as string | undefined) ?? null },
  };
}

/**
 * Serves the requests a flash crowd is made of, plain JSON POSTs of a query or mutation,
 * without Yoga's fetch layer: on this 2-core machine that layer (a WHATWG Request and
 * Response per request, with their streams and AbortController) costs more than the
 * grab itself (`npm run bench -- http`). What makes the answer stays Yoga's own:
 * `getEnveloped` runs the same plugins (armor limits, auth context, rate limit, error
 * codes, masking) with the same parse and validation caches, and any result with errors
 * goes through Yoga's own result processor and CORS rule. Anything else, and any request
 * whose parameters, document or validation fail, is handed to Yoga whole, so every error
 * answer is Yoga's; test/fastLane.test.ts compares the two lanes answer for answer.
 */
export function createFastLane({
  yoga,
  graphqlPath,
  log,
  maskError,
  corsHeaders,
  trusted,
}: {
  yoga: Yoga;
  graphqlPath: string;
  log: Logger;
  /** Yoga's masking function (src/errorMasking.ts), for errors thrown outside the resolvers. */
  maskError: MaskErrorFunction;
  /** Yoga's CORS rule (src/httpHygiene.ts). */
  corsHeaders: (request: RequestView) => Record<string, string>;
  /** Which documents the server takes (GRAPHQL_TRUSTED_DOCUMENTS). */
  trusted: TrustedDocuments;
}) {
  /** Yoga's fetch handler, given a body this lane has already read. */
  async function viaYoga(req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> {
    const headers = new yoga.fetchAPI.Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
    }
    const request = new yoga.fetchAPI.Request(`http://${req.headers.host ?? 'localhost'}${req.url}`, { method: 'POST', headers, body: new Uint8Array(body) });
    await sendNodeResponse(await yoga.fetch(request, { req, res } as never), res, req, false);
  }

  function send(req: IncomingMessage, request: RequestView, res: ServerResponse, result: ExecutionResult, mediaType: RegularMediaType): Promise<void> | void {
    const cors = corsHeaders(request);
    let json: string | undefined;
    if (!result.errors?.length && !result.extensions) {
      try {
        json = JSON.stringify(result);
      } catch (error) {
        result = { errors: [masked(error)] };
      }
    }
    if (json === undefined) {
      const response = processRegularResult(result, yoga.fetchAPI, mediaType);
      for (const [name, value] of Object.entries(cors)) response.headers.set(name, value);
      const retryAfter = retryAfterSeconds(result);
      if (retryAfter !== undefined) response.headers.set('Retry-After', String(retryAfter));
      return sendNodeResponse(response, res, req, false);
    }
    res.writeHead(200, { ...cors, 'content-type': `${mediaType}; charset=utf-8`, 'content-length': Buffer.byteLength(json) });
    res.end(json);
  }

  /** As Yoga's error masking treats an error thrown outside the resolvers: the original is logged once. */
  function masked(error: unknown): GraphQLError {
    const replacement = maskError(error, 'Unexpected error.') as GraphQLError;
    if (replacement !== error) log.error({ err: error }, 'unexpected error while serving a GraphQL request');
    return replacement;
  }

  async function serve(req: IncomingMessage, res: ServerResponse, mediaType: RegularMediaType): Promise<void> {
    const body = await readBody(req);
    let params: Params | null;
    try {
      params = asParams(JSON.parse(body.toString('utf8')), trusted);
    } catch {
      params = null;
    }
    if (!params) return viaYoga(req, res, body);
    const request = requestView(req);
    // `req` as Yoga's node adapter passes it: the client's address is read from it (src/guards/clientAddress.ts).
    const { parse, validate, execute, contextFactory, schema } = yoga.getEnveloped({ request, params, req } as never);
    let document: DocumentNode;
    try {
      document = parse(params.query);
    } catch {
      return viaYoga(req, res, body);
    }
    const operation = operationOf({ document, operationName: params.operationName });
    if (!operation || operation.operation === 'subscription' || validate(schema, document).length > 0) return viaYoga(req, res, body);
    let result: ExecutionResult;
    try {
      result = (await execute({
        schema,
        document,
        variableValues: params.variables,
        operationName: params.operationName,
        contextValue: await contextFactory(),
      })) as ExecutionResult;
    } catch (error) {
      result = { errors: [masked(error)] };
    }
    return send(req, request, res, result, mediaType);
  }

  /** Takes the request and returns true, or returns false, having read nothing, to leave it to Yoga. */
  return function handle(req: IncomingMessage, res: ServerResponse): boolean {
    if (req.method !== 'POST' || req.url !== graphqlPath) return false;
    // Yoga's own test for a JSON body: the first of a list, exact, parameters allowed.
    const contentType = req.headers['content-type']?.split(',')[0];
    if (contentType !== 'application/json' && !contentType?.startsWith('application/json;')) return false;
    const length = Number(req.headers['content-length']);
    if (!(length <= MAX_FAST_BODY_BYTES)) return false;
    const mediaType = regularMediaType(req.headers.accept);
    if (!mediaType) return false;
    serve(req, res, mediaType).catch((error: unknown) => {
      // A client that hung up mid-request (flaky mobile networks do, by the thousand) is not an error of ours.
      if (req.destroyed || res.destroyed) return;
      log.error({ err: error }, 'fast lane failed');
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
    return true;
  };
}
