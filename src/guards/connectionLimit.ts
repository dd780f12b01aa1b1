import type { IncomingMessage } from 'node:http';
import type { App } from '../app.ts';
import { rateLimited as rateLimitedRequests } from '../infra/metrics.ts';
import { budgetOf, clientAddress } from './clientAddress.ts';
import { rateLimited } from './rateLimits.ts';

type Verdict = (allowed: boolean, code?: number, message?: string, headers?: Record<string, string>) => void;

/**
 * The `verifyClient` of the graphql-ws server: at most RATE_LIMIT_WS_CONNECTIONS new
 * connections per client address per window. A refusal is an HTTP 429 to the upgrade
 * request, before any socket is set up, with Retry-After and the same RATE_LIMITED
 * error a GraphQL response carries. Undefined when the limit is off.
 */
export function wsConnectionLimit(app: App): ((info: { req: IncomingMessage }, verdict: Verdict) => void) | undefined {
  const limiter = app.rateLimits.wsConnections;
  if (!limiter.enabled) return undefined;
  return ({ req }, verdict) => {
    limiter.consume('ws-connection', budgetOf(clientAddress(req, app.config.TRUST_PROXY))).then(
      ({ allowed, retryAfterMs }) => {
        if (allowed) return verdict(true);
        rateLimitedRequests.inc({ limit: 'ws-connection' });
        const body = JSON.stringify({ errors: [rateLimited('too many new connections from this address; retry later', retryAfterMs).toJSON()] });
        verdict(false, 429, body, { 'Content-Type': 'application/json', 'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) });
      },
      (error: unknown) => {
        app.log.warn({ err: error }, 'cannot count a new WebSocket connection; refusing it');
        verdict(false, 503, undefined, { 'Retry-After': '1' });
      },
    );
  };
}
