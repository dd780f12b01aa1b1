import { timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Config } from './config.ts';
import type { Context } from './context.ts';
import { answersUnavailable } from './errorMasking.ts';
import { operationOf } from './guards/operation.ts';
import { type Viewer, isOperator } from './infra/auth/tokens.ts';
import { graphqlDuration, graphqlRequests, registry, storeErrors } from './infra/metrics.ts';

export const METRICS_PATH = '/metrics';

/**
 * Operation names are the client's to choose, so a name is a label of its own only when
 * it is one of the app's (its persisted documents) or an operator sent it; any other is
 * `other`. Slots given to the first signed-in callers once let one customer's 250 made-up
 * names take all of them, and the app's own operations were counted as `other`. Operators'
 * names are capped still: MAX_OPERATION_NAMES in all, of MAX_NAME_LENGTH characters at most.
 */
const MAX_OPERATION_NAMES = 200;
const MAX_NAME_LENGTH = 64;

function operationLabels(appOperations: ReadonlySet<string>): (name: string | undefined, viewer: Viewer | null) => string {
  const knownNames = new Set(appOperations);
  return (name, viewer) => {
    if (name === undefined) return 'anonymous';
    if (knownNames.has(name)) return name;
    if (!isOperator(viewer) || name.length > MAX_NAME_LENGTH || knownNames.size >= MAX_OPERATION_NAMES) return 'other';
    knownNames.add(name);
    return name;
  };
}

type Hook = { args: { contextValue: unknown; document: Parameters<typeof operationOf>[0]['document']; operationName?: string | null } };

/**
 * Counts and times every operation, whatever the transport (the fast lane runs the same
 * hooks), and the outages it was answered SERVICE_UNAVAILABLE for. Synchronous hooks:
 * envelop awaits a hook that returns a promise. With LOG_LEVEL=debug, each operation
 * also gets a log line with its request id.
 */
export function useMetrics(appOperations: ReadonlySet<string>): Plugin<Context> {
  const operationLabel = operationLabels(appOperations);
  const observe = ({ args }: Hook) => {
    const started = performance.now();
    const operation = operationOf(args);
    const context = args.contextValue as Context;
    const labels = { operation: operationLabel(operation?.name?.value, context.viewer), type: operation?.operation ?? 'unknown' };
    return (result: ExecutionResult | AsyncIterable<unknown>) => {
      const seconds = (performance.now() - started) / 1000;
      graphqlRequests.inc(labels);
      graphqlDuration.observe(labels, seconds);
      const errors = Symbol.asyncIterator in result ? undefined : result.errors;
      // Before masking on the Yoga lane: a store's own error is not SERVICE_UNAVAILABLE yet.
      if (errors?.some(answersUnavailable)) storeErrors.inc({ source: 'request' });
      // A log line is not a series: it names the operation as sent, whoever sent it.
      if (context.app.log.isLevelEnabled('debug')) {
        const operationName = operation?.name?.value.slice(0, MAX_NAME_LENGTH) ?? 'anonymous';
        context.app.log.debug({ ...labels, operation: operationName, ms: Math.round(seconds * 1000) }, 'graphql operation done');
      }
    };
  };
  return {
    onExecute: (hook) => {
      const done = observe(hook);
      return { onExecuteDone: ({ result }) => done(result) };
    },
    onSubscribe: (hook) => {
      const done = observe(hook);
      return { onSubscribeResult: ({ result }) => done(result) };
    },
  };
}

/** Whether /metrics is served, and the bearer token it then needs (none: open). */
export function metricsAccess(config: Config): { enabled: boolean; token: string | undefined } {
  const enabled = config.METRICS ? config.METRICS === 'on' : config.NODE_ENV !== 'production' || config.METRICS_TOKEN !== undefined;
  return { enabled, token: config.METRICS_TOKEN };
}

function sameToken(sent: string | undefined, token: string): boolean {
  const match = /^Bearer\s+(\S+)$/i.exec(sent ?? '');
  if (!match) return false;
  const a = Buffer.from(match[1]!);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** GET /metrics in Prometheus text format; a request without the token (when one is set) gets 401. */
export function serveMetrics(token: string | undefined, req: IncomingMessage, res: ServerResponse): void {
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD' }).end();
    return;
  }
  if (token !== undefined && !sameToken(req.headers.authorization, token)) {
    res.writeHead(401, { 'www-authenticate': 'Bearer realm="metrics"', 'content-type': 'text/plain; charset=utf-8' }).end('send Authorization: Bearer <METRICS_TOKEN>\n');
    return;
  }
  registry.metrics().then(
    (text) => {
      res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : text);
    },
    (error: unknown) => {
      res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`cannot collect metrics: ${(error as Error).message}\n`);
    },
  );
}
