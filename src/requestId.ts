import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export const REQUEST_ID_HEADER = 'x-request-id';

/** What a proxy's or client's id may look like to be kept: short, printable, no spaces (log injection). */
const SANE_ID = /^[\w.:/+=@-]{1,128}$/;

/**
 * The id of the request being served, wherever its work goes: the logger stamps it on
 * every line (src/infra/logger.ts), so a service's lines need no logger handed down.
 */
const serving = new AsyncLocalStorage<string>();

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

/** Runs `serve` (and all the work it starts) as the request `id`. */
export function servingRequest<T>(id: string, serve: () => T): T {
  return serving.run(id, serve);
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
  return serving.getStore();
}

/** The id of the request being served, or a new one (a graphql-ws operation, say, which gets its own when it starts). */
export function requestIdOrNew(): string {
  return serving.getStore() ?? randomUUID();
}

/**
 * A subscription's events are resolved when graphql-ws pulls them, outside the run that
 * started the operation: each pull runs as the operation's request again.
 */
export function pulledAs<T>(id: string, events: AsyncIterable<T>): AsyncIterableIterator<T> {
  const iterator = events[Symbol.asyncIterator]();
  return {
    next: () => serving.run(id, () => iterator.next()),
    return: (value?: unknown) => serving.run(id, () => iterator.return?.(value) ?? Promise.resolve({ done: true, value: undefined })),
    throw: (error?: unknown) => serving.run(id, () => iterator.throw?.(error) ?? Promise.reject(error)),
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
