import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { getCORSHeadersByRequestAndOptions } from '@whatwg-node/server';
import { BREAK, type DocumentNode, type ExecutionResult, GraphQLError, Kind, visit } from 'graphql';
import { type Plugin, processRegularResult } from 'graphql-yoga';
import type { Config } from './config.ts';
import type { Context } from './context.ts';
import { retryAfterSeconds } from './errorMasking.ts';
import { ErrorCode, graphqlError, rebuiltError } from './errors.ts';
import { errorMessage } from './i18n/messages.ts';
import { isOperator } from './infra/auth/tokens.ts';

/** What both HTTP lanes can read of a request: a WHATWG Request, or the fast lane's view of a Node one. */
interface RequestHeaders {
  headers: { get(name: string): string | null };
}

/** The header a browser client sends to pass CSRF prevention when its content type is a "simple" one. */
export const CSRF_HEADER = 'x-graphql-yoga-csrf';

function isLocalOrigin(origin: URL): boolean {
  return ['localhost', '127.0.0.1', '[::1]'].includes(origin.hostname);
}

/**
 * CORS headers for a response, the same on both lanes: an allowed origin is answered
 * with itself (credentials allowed, Retry-After readable); any other origin gets no
 * Access-Control-* headers, so the browser keeps the response from its page.
 * Allowed: CORS_ORIGINS when set; otherwise, outside production, the server's own
 * origin and localhost on any port; in production, no cross-origin caller.
 */
export function createCorsPolicy(config: Config) {
  const listed = config.CORS_ORIGINS
    ? new Set(
        config.CORS_ORIGINS.split(',')
          .map((origin) => origin.trim())
          .filter(Boolean),
      )
    : undefined;
  function allowed(origin: string, request: RequestHeaders): boolean {
    if (listed) return listed.has(origin);
    if (config.NODE_ENV === 'production') return false;
    try {
      const url = new URL(origin);
      return isLocalOrigin(url) || url.host === request.headers.get('host');
    } catch {
      return false;
    }
  }
  return function corsHeaders(request: RequestHeaders): Record<string, string> {
    const origin = request.headers.get('origin');
    if (!origin) return {};
    if (!allowed(origin, request)) return { Vary: 'Origin' };
    const headers = getCORSHeadersByRequestAndOptions(request as Request, {
      origin,
      credentials: true,
      // A browser client reads the request's id for a support ticket (src/requestId.ts).
      exposedHeaders: ['Retry-After', 'X-Request-Id'],
      // Without it a browser keeps a preflight for 5 s: a shop page on another origin would
      // pay one before nearly every grab of a flash sale. 2 h is Chromium's cap.
      maxAge: PREFLIGHT_MAX_AGE_SECONDS,
    }) as Record<string, string>;
    return { ...headers, Vary: headers.Vary ? `Origin, ${headers.Vary}` : 'Origin' };
  };
}

type CorsPolicy = ReturnType<typeof createCorsPolicy>;

const PREFLIGHT_MAX_AGE_SECONDS = 7_200;

/** Yoga's own CORS plugin with the allow-list: preflights answered 204, headers on every response. */
function useCorsAllowList(corsHeaders: CorsPolicy): Plugin {
  return {
    onRequest({ request, fetchAPI, endResponse }) {
      // Safari waits for a body on a 204 without Content-Length.
      if (request.method === 'OPTIONS') endResponse(new fetchAPI.Response(null, { status: 204, headers: { 'Content-Length': '0' } }));
    },
    onResponse({ request, response }) {
      for (const [name, value] of Object.entries(corsHeaders(request))) response.headers.set(name, value);
    },
  };
}

/**
 * A refusal of a request that is no GraphQL request: a BAD_REQUEST error whose message says
 * what to send. Yoga and graphql-sse answer some of these with an empty body and no code.
 */
export function refusal(fetchAPI: { Response: typeof Response }, status: number, message: string): Response {
  return new fetchAPI.Response(JSON.stringify({ errors: [{ message, extensions: { code: ErrorCode.badRequest } }] }), {
    status,
    headers: { 'content-type': 'application/json; charset=utf-8' },
  });
}

/**
 * The media type Yoga picks among `offered` for a request's Accept, or null when it would
 * pick none. Parsed exactly as graphql-yoga's result processor does: only utf-8 (the
 * default) is served, and the last acceptable entry wins.
 */
export function acceptedMediaType<Offered extends string>(accept: string | null | undefined, offered: readonly Offered[]): Offered | null {
  let chosen: Offered | null = null;
  const asked = (accept || '*/*').replace(/\s/g, '').toLowerCase().split(',').reverse();
  for (const entry of asked) {
    const [mediaType = '', ...params] = entry.split(';');
    if ((params.find((param) => param.includes('charset=')) ?? 'charset=utf-8') !== 'charset=utf-8') continue;
    const [type, subtype] = mediaType.split('/');
    for (const candidate of offered) {
      const [candidateType, candidateSubtype] = candidate.split('/');
      if ((type === '*' || type === candidateType) && (subtype === '*' || subtype === candidateSubtype)) chosen = candidate;
    }
  }
  return chosen;
}

/** Every media type Yoga answers an operation with (multipart/mixed: a query's, not a subscription's). */
const ANSWERED_MEDIA_TYPES = ['application/graphql-response+json', 'application/json', 'text/event-stream', 'multipart/mixed'];

const REFUSED_BODIES = ['application/x-www-form-urlencoded', 'multipart/form-data'];

const mediaTypeOf = (request: RequestHeaders) => request.headers.get('content-type')?.split(';')[0]?.trim().toLowerCase() ?? '';

const unreadBody = (mediaType: string) => `${mediaType ? `${mediaType} bodies are` : 'a body without a Content-Type is'} refused; POST the GraphQL request as application/json`;

/**
 * Requests Yoga cannot serve, refused with a code and a message saying what to send, where
 * Yoga would answer 415 or 406 with an empty body:
 * - form and multipart bodies: HTML forms can POST these cross-site without a preflight,
 *   and nothing here takes uploads, so they are refused before any parsing, Yoga's own
 *   parsers for them included;
 * - any other body Yoga has no parser for (after CSRF prevention, which refuses a text/plain
 *   POST without its header with a 403 of its own);
 * - an Accept admitting none of the media types Yoga answers with, refused before anything
 *   runs: Yoga picks the media type after execution, so a mutation would be made, and its
 *   answer lost to a 406;
 * - a subscription under an Accept admitting no event stream: it has started by the time Yoga
 *   finds no media type for it, so it is ended here, giving its subscription slot back.
 *   Yoga would leave it running, holding the slot, for good.
 */
function useRefuseUnservedRequests(): Plugin {
  return {
    onRequest({ request, fetchAPI, endResponse }) {
      if (request.method !== 'POST') return;
      const mediaType = mediaTypeOf(request);
      if (REFUSED_BODIES.includes(mediaType)) endResponse(refusal(fetchAPI, 415, unreadBody(mediaType)));
    },
    onRequestParse({ request, requestParser, fetchAPI, endResponse }) {
      // Other methods are Yoga's to refuse (405, with a code).
      if (request.method !== 'POST' && request.method !== 'GET') return;
      if (!requestParser) return endResponse(refusal(fetchAPI, 415, unreadBody(mediaTypeOf(request))));
      if (!acceptedMediaType(request.headers.get('accept'), ANSWERED_MEDIA_TYPES)) {
        endResponse(refusal(fetchAPI, 406, 'Accept names nothing this endpoint answers with: accept application/json, and text/event-stream for a subscription'));
      }
    },
    onResultProcess({ result, resultProcessor, setResultProcessor }) {
      if (resultProcessor) return;
      // Not a stream: a refusal Yoga threw (a method it does not serve, say) or a subscription
      // refused before it started, answered as JSON all the same, its errors carrying the codes.
      if (!(Symbol.asyncIterator in (result as object))) return setResultProcessor(processRegularResult, 'application/json');
      void (result as AsyncGenerator).return?.(undefined);
      setResultProcessor(
        (_result, fetchAPI) => refusal(fetchAPI, 406, 'a subscription over HTTP is answered as an event stream: send Accept: text/event-stream, or subscribe over graphql-ws'),
        'application/json',
      );
    },
  };
}

/**
 * Yoga's GET parser throws on a `variables` or `extensions` parameter that is not JSON,
 * and the throw is answered 500 with an error logged: refuse it first, as a POST body
 * that is not JSON is refused.
 */
function useRefuseMalformedGetParameters(): Plugin {
  return {
    onRequest({ request, url, fetchAPI, endResponse }) {
      if (request.method !== 'GET') return;
      for (const name of ['variables', 'extensions']) {
        const value = url.searchParams.get(name);
        // Empty, Yoga reads it as absent.
        if (value === null || value === '' || isJsonObjectOrNull(value)) continue;
        endResponse(refusal(fetchAPI, 400, `the ${name} parameter must be a JSON object`));
        return;
      }
    },
  };
}

function isJsonObjectOrNull(text: string): boolean {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && !Array.isArray(value);
  } catch {
    return false;
  }
}

/**
 * Headers no page can make a browser send cross-site without a preflight (which CORS then
 * refuses): the service's own, Authorization (its only credential, so a request without it
 * is anonymous anyway), and Apollo's two, which its clients send for this very check.
 */
const PREFLIGHTED_HEADERS = [CSRF_HEADER, 'authorization', 'apollo-require-preflight', 'x-apollo-operation-name'];

/**
 * Yoga's CSRF prevention: a request must have a non-simple content type (a JSON POST,
 * what every GraphQL client sends) or one of PREFLIGHTED_HEADERS. One exemption:
 * a browser's EventSource (GET, Accept: text/event-stream) can set no header at all.
 * It is safe to let through: a GET cannot run a mutation, and the service reads
 * credentials only from the Authorization header, which EventSource cannot send, so
 * such a request is always anonymous.
 */
function useCsrfPrevention(): Plugin {
  const { onRequestParse } = useCSRFPrevention({ requestHeaders: PREFLIGHTED_HEADERS }) as Required<Pick<Plugin, 'onRequestParse'>>;
  return {
    onRequestParse(payload) {
      const { request } = payload;
      if (request.method === 'GET' && request.headers.get('accept') === 'text/event-stream') return;
      try {
        return onRequestParse(payload);
      } catch (error) {
        // Its refusal carries no code, and does not say what to send; every other refusal of a request does.
        if (error instanceof GraphQLError) {
          throw rebuiltError(error, {
            message: `CSRF prevention: send a JSON body, or one of the headers ${PREFLIGHTED_HEADERS.join(', ')} (${CSRF_HEADER}: 1 will do)`,
            extensions: { ...error.extensions, code: ErrorCode.badRequest },
          });
        }
        throw error;
      }
    },
  };
}

const SUGGESTION = /\s*Did you mean [\s\S]*$/;

function withoutSuggestion(error: GraphQLError): GraphQLError {
  if (!SUGGESTION.test(error.message)) return error;
  return rebuiltError(error, { message: error.message.replace(SUGGESTION, '') });
}

function resultWithoutSuggestions(result: ExecutionResult): ExecutionResult | undefined {
  if (!result.errors?.some((error) => SUGGESTION.test(error.message))) return undefined;
  return { ...result, errors: result.errors.map(withoutSuggestion) };
}

/**
 * No "Did you mean" in any environment: graphql-js suggests field, argument, type and
 * enum names in validation errors, and enum values and input fields when it coerces
 * variables, which hands the schema out piece by piece with introspection off.
 */
function useNoSuggestions(): Plugin {
  const onResult = ({ result, setResult }: { result: unknown; setResult(result: ExecutionResult): void }) => {
    if (Symbol.asyncIterator in (result as object)) return;
    const cleaned = resultWithoutSuggestions(result as ExecutionResult);
    if (cleaned) setResult(cleaned);
  };
  return {
    onValidate:
      () =>
      ({ result, setResult }) => {
        if (result.some((error) => SUGGESTION.test(error.message))) {
          setResult(result.map((error) => (error instanceof GraphQLError ? withoutSuggestion(error) : error)));
        }
      },
    onExecute: () => ({ onExecuteDone: onResult as never }),
    onSubscribe: () => ({ onSubscribeResult: onResult as never }),
  };
}

function withoutOriginal(error: GraphQLError): GraphQLError {
  if (error.extensions?.originalError === undefined) return error;
  const { originalError: _dropped, ...extensions } = error.extensions;
  return rebuiltError(error, { extensions });
}

/**
 * Yoga answers a body that is not JSON with the parser's own error in
 * `extensions.originalError`, which the masking never sees: it names the parser and echoes
 * the body. Kept only with GRAPHQL_EXPOSE_ERRORS=1, as every original error is. Yoga also
 * reads that field to answer 400 rather than 200, so the status goes on the result.
 */
function useNoRequestParserDetails(exposeErrors: boolean): Plugin {
  const cleaned = (result: ExecutionResult): ExecutionResult => {
    const detailed = result.errors?.filter((error) => error.extensions?.originalError !== undefined) ?? [];
    if (detailed.length === 0) return result;
    const status = Math.max(0, ...detailed.map((error) => Number((error.extensions.http as { status?: number } | undefined)?.status ?? 0)));
    const http = { ...(result.extensions?.http as object | undefined), ...(status > 0 ? { status } : {}) };
    return { ...result, errors: result.errors!.map(withoutOriginal), extensions: { ...result.extensions, http } };
  };
  return {
    onResultProcess({ result, setResult }) {
      if (exposeErrors || Symbol.asyncIterator in (result as object)) return;
      setResult(Array.isArray(result) ? result.map((single) => cleaned(single as ExecutionResult)) : cleaned(result as ExecutionResult));
    },
  };
}

const introspective = new WeakMap<DocumentNode, boolean>();

/** Whether the document selects __schema or __type anywhere (fragments included); __typename is fine. */
function asksForIntrospection(document: DocumentNode): boolean {
  let asks = introspective.get(document);
  if (asks === undefined) {
    asks = false;
    visit(document, {
      [Kind.FIELD]: (field) => {
        if (field.name.value === '__schema' || field.name.value === '__type') {
          asks = true;
          return BREAK;
        }
        return undefined;
      },
    });
    introspective.set(document, asks);
  }
  return asks;
}

/**
 * In production only operators (the admin role) may introspect. Checked at execution,
 * where the caller is known: validation runs before the context is built, and its
 * results are cached per document, not per caller.
 */
function useOperatorIntrospection(config: Config): Plugin<Context> {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      if (config.NODE_ENV !== 'production' || !asksForIntrospection(args.document)) return;
      const { viewer, locale } = args.contextValue as Context;
      if (isOperator(viewer)) return;
      setResultAndStopExecution({
        errors: [graphqlError(ErrorCode.forbidden, errorMessage('INTROSPECTION_FOR_OPERATORS', locale))],
      });
    },
  };
}

const retryAfterByRequest = new WeakMap<Request, number>();

/** Retry-After on HTTP answers whose errors carry a retry hint (SERVICE_UNAVAILABLE, RATE_LIMITED). */
function useRetryAfterHeader(): Plugin {
  return {
    onResultProcess({ request, result }) {
      if (Symbol.asyncIterator in (result as object)) return;
      const seconds = retryAfterSeconds(result as ExecutionResult);
      if (seconds !== undefined) retryAfterByRequest.set(request, seconds);
    },
    onResponse({ request, response }) {
      const seconds = retryAfterByRequest.get(request);
      if (seconds !== undefined) response.headers.set('Retry-After', String(seconds));
    },
  };
}

/**
 * GraphiQL's page may not be framed by another site: framed, a page could put a mutation
 * in its editor (`?query=`) under an operator's saved headers and have one click run it.
 * Its own script is inline, so only the framing part of a policy fits it.
 */
function useNoFramingOfPages(): Plugin {
  return {
    onResponse({ response }) {
      if (!response.headers.get('content-type')?.startsWith('text/html')) return;
      response.headers.set('content-security-policy', "frame-ancestors 'none'");
      response.headers.set('x-frame-options', 'DENY');
    },
  };
}

/**
 * A GET's answer may be cached (a persisted query's URL is stable), but one for a signed-in
 * caller is theirs alone: a cache keyed by URL would hand one user's `me` to the next.
 * POSTs are not cached by anyone.
 */
function useNoSharedCachingOfSignedInGets(): Plugin {
  return {
    onResponse({ request, response }) {
      if (request.method !== 'GET') return;
      const vary = response.headers.get('vary');
      response.headers.set('vary', vary ? `${vary}, Authorization` : 'Authorization');
      if (request.headers.has('authorization')) response.headers.set('cache-control', 'private, no-store');
    },
  };
}

/** Request and error hygiene (CORS, CSRF, bodies and Accept headers it cannot serve, suggestions, parser details, introspection, Retry-After, no framing, caching), for Yoga's plugin list; the fast lane shares `corsHeaders`. */
export function hygienePlugins(config: Config, corsHeaders: CorsPolicy): Plugin[] {
  return [
    useCorsAllowList(corsHeaders),
    useRefuseMalformedGetParameters(),
    useCsrfPrevention(),
    // After CSRF prevention, whose refusal comes first; its onRequest (forms) runs before any parsing all the same.
    useRefuseUnservedRequests(),
    useNoSuggestions(),
    useNoRequestParserDetails(config.GRAPHQL_EXPOSE_ERRORS === '1'),
    useOperatorIntrospection(config) as Plugin,
    useRetryAfterHeader(),
    useNoFramingOfPages(),
    useNoSharedCachingOfSignedInGets(),
  ];
}
