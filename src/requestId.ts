import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export const REQUEST_ID_HEADER = 'x-request-id';

/** What a proxy's or client's id may look like to be kept: short, printable, no spaces (log injection). */
const SANE_ID = /^[\w.:/+=@-]{1,128}$/;

const assigned = new WeakMap<IncomingMessage, string>();

/**
 * Gives an HTTP request its id: the caller's X-Request-Id when it looks sane (a proxy's,
 * so one id follows the request across services), a new UUID otherwise. The id is echoed
 * in the response header (Node merges it into whatever writeHead sends later) and kept
 * for the GraphQL context (requestIdOf).
 */
export function assignRequestId(req: IncomingMessage, res: ServerResponse): string {
  const incoming = req.headers[REQUEST_ID_HEADER];
  const id = typeof incoming === 'string' && SANE_ID.test(incoming) ? incoming : randomUUID();
  assigned.set(req, id);
  res.setHeader(REQUEST_ID_HEADER, id);
  return id;
}

/**
 * The id of the HTTP request behind a context, or a new one: a graphql-ws operation gets
 * its own (its `req` is the socket's upgrade request, which took no id of its own).
 */
export function requestIdOf(req: IncomingMessage | undefined): string {
  return (req && assigned.get(req)) ?? randomUUID();
}
