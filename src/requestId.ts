import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Locale, localeOf } from './i18n/messages.ts';

export const REQUEST_ID_HEADER = 'x-request-id';

/** What a proxy's or client's id may look like to be kept: short, printable, no spaces (log injection). */
const SANE_ID = /^[\w.:/+=@-]{1,128}$/;

/** A request being served: its id, and the language its caller reads (an Accept-Language value). */
export interface ServedRequest {
  id: string;
  language: string | undefined;
}

/**
 * The request being served, wherever its work goes: the logger stamps its id on every line
 * (src/infra/logger.ts), so a service's lines need no logger handed down, and error masking
 * words an outage in its caller's language (src/errorMasking.ts), which Yoga does not pass.
 */
const serving = new AsyncLocalStorage<ServedRequest>();

/**
 * Gives an HTTP request its id: the caller's X-Request-Id when it looks sane (a proxy's,
 * so one id follows the request across services), a new UUID otherwise. The id is echoed
 * in the response header (Node merges it into whatever writeHead sends later).
 */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const incoming = req.headers[REQUEST_ID_HEADER];
  const id = typeof incoming === 'string' && SANE_ID.test(incoming) ? incoming : randomUUID();
  res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/** Runs `serve` (and all the work it starts) as `request`. */
export function servingRequest<T>(request: ServedRequest, serve: () => T): T {
  return serving.run(request, serve);
}

/**
 * Runs `work` as no request's: work shared by many requests (a group commit's batch, the
 * deliveries it starts) would otherwise carry the id of whichever request happened to
 * start it, and its lines would name the wrong request.
 */
export function outsideRequests<T>(work: () => T): T {
  return serving.exit(work);
}

/** The id of the request being served, if any. */
export function currentRequestId(): string | undefined {
  return serving.getStore()?.id;
}

/** The language of the request being served (English outside any). */
export function currentLocale(): Locale {
  return localeOf(serving.getStore()?.language);
}

/** The id of the request being served, or a new one (a graphql-ws operation, say, which gets its own when it starts). */
export function requestIdOrNew(): string {
  return serving.getStore()?.id ?? randomUUID();
}

/**
 * A subscription's events are resolved when graphql-ws pulls them, outside the run that
 * started the operation: each pull runs as the operation's request again.
 */
export function pulledAs<T>(request: ServedRequest, events: AsyncIterable<T>): AsyncIterableIterator<T> {
  const iterator = events[Symbol.asyncIterator]();
  return {
    next: () => serving.run(request, () => iterator.next()),
    return: (value?: unknown) => serving.run(request, () => iterator.return?.(value) ?? Promise.resolve({ done: true, value: undefined })),
    throw: (error?: unknown) => serving.run(request, () => iterator.throw?.(error) ?? Promise.reject(error)),
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
