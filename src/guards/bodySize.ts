import type { IncomingMessage } from 'node:http';
import type { Plugin } from 'graphql-yoga';
import type { App } from '../app.ts';
import { ErrorCode } from '../errors.ts';
import { errorMessage, localeOf } from '../i18n/messages.ts';

/** How long the connection of an oversized body stays open after its 413. */
const LINGER_MS = 2_000;

/**
 * Closes the connection a moment after a 413 if the body is still coming: closed at once,
 * with bytes unread, the socket is reset, and the reset can reach the client before the
 * answer does. A body that did arrive whole leaves the connection as HTTP keeps it,
 * serving the client's next requests: closing it then would cut one of them.
 */
export function closeSoonUnlessComplete(req: IncomingMessage): void {
  setTimeout(() => req.complete || req.socket.destroy(), LINGER_MS).unref();
}

export interface BodyLimits {
  /** Anyone's: every user operation fits (the fast lane and a graphql-ws frame take 64 KiB). */
  callerBytes: number;
  /** An operator's: a goods item's pool of 10,000 voucher codes of 128 characters is about 1.3 MB. */
  operatorBytes: number;
}

/**
 * Refuses a body over the caller's limit before anything reads it, graphql-sse's stream
 * included. Yoga alone would read and parse up to 25 MB from anyone: one anonymous body
 * of a million variable keys held the event loop for seconds. The declared length decides,
 * so a chunked body (no Content-Length) is refused outright, as no client of this API
 * needs to stream one.
 */
export function useBodyLimits(app: App, limits: BodyLimits): Plugin {
  return {
    // Synchronous unless a body past the caller's limit needs the token read: every request on
    // Yoga's lane passes here.
    onRequest({ request, serverContext, fetchAPI, endResponse }) {
      if (request.method !== 'POST') return;
      const refuse = (status: number, code: string, wording: 'LENGTH_REQUIRED' | 'BODY_TOO_LARGE', values = {}) => {
        const message = errorMessage(wording, localeOf(request.headers.get('accept-language')), values);
        endResponse(
          new fetchAPI.Response(JSON.stringify({ errors: [{ message, extensions: { code } }] }), {
            status,
            headers: { 'content-type': 'application/json; charset=utf-8' },
          }),
        );
        // Yoga's node adapter serves with the Node request as the server context.
        const { req } = serverContext as { req?: IncomingMessage };
        if (req) closeSoonUnlessComplete(req);
      };
      const declared = request.headers.get('content-length');
      if (declared === null) {
        if (request.headers.has('transfer-encoding')) refuse(411, ErrorCode.badRequest, 'LENGTH_REQUIRED');
        return;
      }
      const length = Number(declared);
      if (length <= limits.callerBytes) return;
      return app.tokens.fromOperator(request.headers.get('authorization')).then((operator) => {
        const maxBytes = operator ? limits.operatorBytes : limits.callerBytes;
        if (!(length <= maxBytes)) refuse(413, ErrorCode.requestTooLarge, 'BODY_TOO_LARGE', { maxBytes });
      });
    },
  };
}
