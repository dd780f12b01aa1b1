import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { type DocumentNode, type ExecutionResult, GraphQLError, getOperationAST } from 'graphql';
import { type Response as SseResponse, TOKEN_HEADER_KEY, TOKEN_QUERY_KEY } from 'graphql-sse';
import { createHandler } from 'graphql-sse/lib/use/fetch';
import type { Plugin } from 'graphql-yoga';
import type { App } from './app.ts';
import { buildContext, unauthenticated } from './context.ts';
import { ErrorCode, graphqlError, resultWithoutHttpStatus, withoutHttpStatus } from './errors.ts';
import { asRequestError } from './graphqlPlugins.ts';
import { rateLimited } from './guards/rateLimits.ts';
import { refusal } from './httpHygiene.ts';
import { type ErrorWording, errorMessage, localeOf } from './i18n/messages.ts';
import { AuthFailure } from './infra/auth/tokens.ts';
import type { TrustedDocuments } from './trustedDocuments.ts';

/** Where the graphql-sse protocol is served. */
export const GRAPHQL_SSE_PATH = '/graphql/stream';

/**
 * Streams a user may hold at once, reserved or connected: a client needs one, a reconnect race
 * two. Each connected one holds a socket for as long as its client keeps it open.
 */
export const STREAMS_PER_USER = 4;

/**
 * Operations a stream takes before it is connected. graphql-sse queues their results in memory
 * until the stream is connected or dropped; its own client posts only once connected, so this
 * is room for another client's race, and bounds what a stream may queue (16 results of a few
 * hundred KB at most) to a few MB per user.
 */
export const OPERATIONS_BEFORE_CONNECT = 16;

const STATUS_TEXT = { 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 429: 'Too Many Requests', 503: 'Service Unavailable' };

function errorAnswer(status: keyof typeof STATUS_TEXT, errors: readonly GraphQLError[], headers: Record<string, string> = {}): SseResponse {
  return [JSON.stringify({ errors }), { status, statusText: STATUS_TEXT[status], headers: { 'content-type': 'application/json; charset=utf-8', ...headers } }];
}

const badRequest = (errors: readonly GraphQLError[]) => errorAnswer(400, withoutHttpStatus(errors));

/**
 * graphql-sse's answer to a request on a stream its owner reserved that is gone (dropped
 * unconnected, or closed): "Missing query" (400) to a connect, as it reads one for a stream
 * of its own, and "Stream not found" (404) to an operation, neither with a code. The
 * client's fix is a new reservation, which its own answer says instead.
 */
function isStreamGone(request: Request, url: URL, response: Response): boolean {
  if (request.method === 'PUT' || !(request.headers.get(TOKEN_HEADER_KEY) ?? url.searchParams.get(TOKEN_QUERY_KEY))) return false;
  return response.status === 404 || (request.method === 'GET' && response.status === 400);
}

/**
 * What to send instead, for graphql-sse's own refusals that do not say it: some have no
 * body (405, 406, 415), the 409s only name the conflict.
 */
function sseRefusalMessage(method: string, status: number): string | undefined {
  switch (status) {
    case 405:
      return 'PUT reserves a stream, GET with Accept: text/event-stream connects it, POST runs an operation on it, DELETE stops one';
    case 406:
      return method === 'PUT'
        ? 'a reservation answers its token as text/plain: send Accept: text/plain, or none'
        : 'Accept is matched exactly: send text/event-stream alone to connect a stream, and application/json (or none) with an operation';
    case 409:
      return method === 'POST'
        ? 'an operation with this extensions.operationId is still running on the stream: give each operation its own id'
        : 'the stream is connected already: reserve another (PUT) for another connection';
    case 415:
      return 'POST the GraphQL request as application/json';
    default:
      return undefined;
  }
}

/**
 * graphql-sse's 4xx with a JSON body whose errors all carry a code, as every refusal of a
 * request does: BAD_REQUEST where graphql-sse gave none (its 400s keep their own message).
 * Those answered here carry their codes already and are passed on as they are.
 */
async function withCodes(method: string, response: Response, fetchAPI: { Response: typeof Response }): Promise<Response> {
  const text = await response.text();
  const errors = text ? ((JSON.parse(text) as { errors?: { extensions?: { code?: unknown } }[] }).errors ?? []) : [];
  if (errors.length > 0 && errors.every((error) => error.extensions?.code !== undefined)) {
    return new fetchAPI.Response(text, { status: response.status, statusText: response.statusText, headers: response.headers });
  }
  const message = sseRefusalMessage(method, response.status) ?? (errors[0] as { message?: string } | undefined)?.message ?? 'not a graphql-sse request';
  const answer = refusal(fetchAPI, response.status, message);
  // A 405's methods, as graphql-sse names them.
  const allow = response.headers.get('allow');
  if (allow) answer.headers.set('allow', allow);
  return answer;
}

/**
 * The streams of single connection mode, reserved or connected, each held for a signed-in
 * user, a few per user, until it is dropped or its connection ends. graphql-sse keeps a
 * reserved stream until it is connected and closed, so one never connected would stay for
 * good: it is dropped when it is not connected in time, and takes a few operations meanwhile.
 *
 * A token carries a MAC of its owner, so every later request on the stream (connecting it,
 * operations, stops) must come from that user, checked without state: a token seen in a
 * log or a URL is of no use to anyone else. Streams live in one process, and so does the key.
 */
class UserStreams {
  /** `waiting` while not connected yet: its drop timer and the operations posted to it. */
  private readonly held = new Map<string, { userId: string; waiting?: { timer: NodeJS.Timeout; operations: number } }>();
  private readonly perUser = new Map<string, number>();
  private readonly ownerKey = randomBytes(32);

  constructor(
    private readonly timeoutMs: number,
    private readonly drop: (token: string) => void,
  ) {}

  /** A new stream token for the user, or null when they already hold as many as allowed. */
  reserve(userId: string): string | null {
    const held = this.perUser.get(userId) ?? 0;
    if (held >= STREAMS_PER_USER) return null;
    const id = randomUUID();
    const token = `${id}.${this.ownerMac(id, userId)}`;
    const timer = setTimeout(() => {
      this.release(token);
      this.drop(token);
    }, this.timeoutMs).unref();
    this.held.set(token, { userId, waiting: { timer, operations: 0 } });
    this.perUser.set(userId, held + 1);
    return token;
  }

  /** True when the token was reserved for this user. */
  isOwner(token: string, userId: string): boolean {
    const [id = '', mac = ''] = token.split('.');
    const expected = Buffer.from(this.ownerMac(id, userId));
    const given = Buffer.from(mac);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }

  private ownerMac(id: string, userId: string): string {
    return createHmac('sha256', this.ownerKey).update(`${id}\n${userId}`).digest('base64url');
  }

  /** The stream is being connected: true if it was waiting. It stays held until released. */
  connect(token: string): boolean {
    const stream = this.held.get(token);
    if (!stream?.waiting) return false;
    clearTimeout(stream.waiting.timer);
    stream.waiting = undefined;
    return true;
  }

  /** False when the stream is not connected yet and has taken as many operations as it may. */
  admitOperation(token: string): boolean {
    const waiting = this.held.get(token)?.waiting;
    if (!waiting) return true;
    if (waiting.operations >= OPERATIONS_BEFORE_CONNECT) return false;
    waiting.operations++;
    return true;
  }

  /** The stream is gone (dropped, or its connection ended): its place frees. */
  release(token: string): void {
    const stream = this.held.get(token);
    if (!stream) return;
    if (stream.waiting) clearTimeout(stream.waiting.timer);
    this.held.delete(token);
    const held = this.perUser.get(stream.userId)! - 1;
    if (held === 0) this.perUser.delete(stream.userId);
    else this.perUser.set(stream.userId, held);
  }
}

/**
 * A stream's connection, calling `end` when its event stream ends, however: the client goes
 * away (the request aborts, on which graphql-sse ends the stream, whether its body is read
 * or not), graphql-sse ends it (an operation failed), or the body is cancelled.
 */
function untilEnded(request: Request, response: Response, end: () => void, fetchAPI: { Response: typeof Response; ReadableStream: typeof ReadableStream }): Response {
  if (request.signal.aborted) end();
  else request.signal.addEventListener('abort', end, { once: true });
  const reader = response.body!.getReader();
  const body = new fetchAPI.ReadableStream<Uint8Array>({
    async pull(controller) {
      const { done, value } = await reader.read().catch((error: unknown) => {
        end();
        throw error;
      });
      if (!done) return controller.enqueue(value);
      end();
      controller.close();
    },
    cancel(reason) {
      end();
      return reader.cancel(reason);
    },
  });
  return new fetchAPI.Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
}

/**
 * The graphql-sse protocol (single connection mode included, which browsers' 6 connections
 * per origin call for): graphql-sse's own handler, run through Yoga's envelop, so the
 * plugins, context and sign-in are those of /graphql. The glue of
 * @graphql-yoga/plugin-graphql-sse, rewritten for two answers it gets wrong: a syntax error
 * (500 there; 400 with the errors here, as graphql-sse answers it itself), and a result
 * refused before execution, such as a refused token (400 "Unable to detect operation AST"
 * there, as graphql-sse takes a result only with a `data` key; an event with `data: null` here).
 * graphql-sse passes on no `documentId`: this transport takes query text, where `trusted` lets it.
 */
export function useGraphqlSse(app: App, trusted: TrustedDocuments): Plugin {
  const serverContexts = new WeakMap<Request, object>();
  /** A request connecting a reserved stream, and how to free its place when it ends. */
  const connections = new WeakMap<Request, () => void>();
  let handler: (request: Request) => Promise<Response>;
  return {
    onYogaInit({ yoga }) {
      // graphql-sse drops a stream whose event stream ends: one connected by a request
      // already aborted ends at once. Such a request is the server's own, and needs no owner.
      const drops = new WeakSet<Request>();
      const streams = new UserStreams(app.config.SSE_RESERVATION_TIMEOUT_MS, (token) => {
        const url = `http://localhost${GRAPHQL_SSE_PATH}`;
        const drop = new yoga.fetchAPI.Request(url, { headers: { accept: 'text/event-stream', [TOKEN_HEADER_KEY]: token }, signal: AbortSignal.abort() });
        drops.add(drop);
        void handler(drop);
      });
      /** 429 for a limit on a user's streams, retried once a reservation could have dropped. */
      function tooMany(request: Request, wording: ErrorWording, values: Record<string, number>): SseResponse {
        const retryAfterMs = app.config.SSE_RESERVATION_TIMEOUT_MS;
        const message = errorMessage(wording, localeOf(request.headers.get('accept-language')), values);
        return errorAnswer(429, [rateLimited(message, retryAfterMs)], { 'retry-after': String(Math.ceil(retryAfterMs / 1000)) });
      }
      /** The caller's user id, or the answer refusing them: 401, or 503 when tokens cannot be checked right now. */
      async function signedIn(request: Request, why: ErrorWording): Promise<string | SseResponse> {
        const locale = localeOf(request.headers.get('accept-language'));
        const { viewer, credentialError } = await buildContext(app, request.headers.get('authorization') ?? undefined, locale);
        if (viewer) return viewer.userId;
        const outage = credentialError?.extensions.code === ErrorCode.unavailable;
        return errorAnswer(outage ? 503 : 401, [credentialError ?? unauthenticated(AuthFailure.missing, why, locale)]);
      }
      handler = createHandler(
        {
          // A reservation (PUT) needs a signed-in caller and gets a token minted here, never
          // one the caller chose. Every other request naming a token must come from the user
          // who reserved it; one naming none is a stream of its own (distinct connection mode).
          async authenticate(req) {
            if (req.method === 'PUT') {
              const userId = await signedIn(req.raw, 'SIGN_IN_TO_RESERVE_STREAM');
              if (typeof userId !== 'string') return userId;
              return streams.reserve(userId) ?? tooMany(req.raw, 'TOO_MANY_STREAMS_OF_USER', { max: STREAMS_PER_USER });
            }
            const named = req.headers.get(TOKEN_HEADER_KEY) ?? new URL(req.url).searchParams.get(TOKEN_QUERY_KEY);
            if (!named || drops.has(req.raw)) return named || randomUUID();
            const userId = await signedIn(req.raw, 'SIGN_IN_TO_RESERVED_STREAM');
            if (typeof userId !== 'string') return userId;
            if (!streams.isOwner(named, userId)) {
              return errorAnswer(403, [graphqlError(ErrorCode.forbidden, errorMessage('STREAM_OF_ANOTHER', localeOf(req.headers.get('accept-language'))))]);
            }
            if (req.headers.get('accept') === 'text/event-stream') {
              if (streams.connect(named)) connections.set(req.raw, () => streams.release(named));
            } else if (req.method !== 'DELETE' && !streams.admitOperation(named)) {
              // An operation (POST, or GET without text/event-stream) queues its results until the stream connects.
              return tooMany(req.raw, 'TOO_MANY_OPERATIONS_BEFORE_CONNECT', { max: OPERATIONS_BEFORE_CONNECT });
            }
            return named;
          },
          async onSubscribe(req, params) {
            const enveloped = yoga.getEnveloped({ ...serverContexts.get(req.raw), request: req.raw, params });
            let document: DocumentNode;
            try {
              document = enveloped.parse(await trusted.queryOf(params, { request: req.raw, params }));
            } catch (error) {
              // Yoga's parse hooks also refuse an operationName the document lacks.
              if (error instanceof GraphQLError) return badRequest([asRequestError(error)]);
              throw error;
            }
            const errors = enveloped.validate(enveloped.schema, document);
            if (errors.length > 0) return badRequest(errors);
            const args = {
              schema: enveloped.schema,
              document,
              contextValue: await enveloped.contextFactory(),
              variableValues: params.variables,
              operationName: params.operationName,
            };
            const subscription = getOperationAST(document, params.operationName)?.operation === 'subscription';
            const result = (await (subscription ? enveloped.subscribe(args) : enveloped.execute(args))) as ExecutionResult | AsyncIterable<ExecutionResult>;
            if (Symbol.asyncIterator in result) return result;
            // A refusal or an input error carries Yoga's HTTP status, which an event stream has no use for.
            return resultWithoutHttpStatus('data' in result ? result : { data: null, ...result });
          },
        },
        yoga.fetchAPI,
      );
    },
    onRequest({ request, serverContext, endResponse, fetchAPI }) {
      const url = new URL(request.url);
      if (url.pathname !== GRAPHQL_SSE_PATH) return;
      serverContexts.set(request, serverContext as object);
      return handler(request).then(async (response) => {
        const gone = isStreamGone(request, url, response);
        // Without a token and without Accept: text/event-stream, graphql-sse looks for a stream this names: none.
        const unnamed = !gone && response.status === 404 && request.method !== 'PUT';
        if (gone || unnamed) {
          void response.body?.cancel();
          const error = graphqlError(ErrorCode.notFound, errorMessage(gone ? 'STREAM_GONE' : 'NO_STREAM_NAMED', localeOf(request.headers.get('accept-language'))));
          const [body, init] = errorAnswer(404, [error]);
          return endResponse(new fetchAPI.Response(body as string, init));
        }
        const release = connections.get(request);
        if (release) return endResponse(untilEnded(request, response, release, fetchAPI));
        endResponse(response.status >= 400 && response.status < 500 ? await withCodes(request.method, response, fetchAPI) : response);
      });
    },
  };
}
