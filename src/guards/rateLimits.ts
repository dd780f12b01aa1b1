import type { DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { App } from '../app.ts';
import type { Context } from '../context.ts';
import { ErrorCode, graphqlError, unavailableError, wholeRefusal } from '../errors.ts';
import { errorMessage } from '../i18n/messages.ts';
import { isOperator } from '../infra/auth/tokens.ts';
import { logRepeating } from '../infra/logger.ts';
import { type RateLimit, rateLimited as rateLimitedRequests } from '../infra/metrics.ts';
import type { RateLimiter } from '../infra/rateLimit.ts';
import { budgetOf, clientAddress, requestOf } from './clientAddress.ts';
import { operationOf, rootFieldCount } from './operation.ts';

/** The per-window limits of one instance's callers, counted in Redis across every instance. */
export interface RateLimits {
  /** Root mutation fields per signed-in user (RATE_LIMIT_MUTATIONS). */
  mutations: RateLimiter;
  /** Operations without a valid token, per client address (RATE_LIMIT_ANONYMOUS). */
  anonymous: RateLimiter;
  /** Cost units of costly operations, per signed-in user or anonymous address (RATE_LIMIT_COST; see operationCost.ts). */
  cost: RateLimiter;
  /** New graphql-ws connections per client address (RATE_LIMIT_WS_CONNECTIONS). */
  wsConnections: RateLimiter;
}

export function rateLimited(message: string, retryAfterMs: number) {
  return graphqlError(ErrorCode.rateLimited, message, { retryAfterMs });
}

type Payload = { args: { contextValue: unknown; document: DocumentNode; operationName?: string | null }; setResultAndStopExecution(result: unknown): void };
type RateLimitLabel = Extract<RateLimit, 'mutation' | 'anonymous' | 'cost'>;

/** Stops the operation with RATE_LIMITED if its caller's budget refused it, or SERVICE_UNAVAILABLE if the budget could not be read. */
export async function refuseOverBudget(
  payload: { args: { contextValue?: unknown }; setResultAndStopExecution(result: unknown): void },
  limit: RateLimitLabel,
  decided: Promise<{ allowed: boolean; retryAfterMs: number }>,
  message: string,
) {
  const context = payload.args.contextValue as Context;
  try {
    const decision = await decided;
    if (!decision.allowed) {
      rateLimitedRequests.inc({ limit });
      payload.setResultAndStopExecution({ errors: [wholeRefusal(rateLimited(message, decision.retryAfterMs))] });
    }
  } catch (error) {
    // Without Redis the budget cannot be counted; the request would fail at Redis next anyway.
    logRepeating(context.app.log, 'warn', { err: error }, 'cannot count a request against its rate limit');
    payload.setResultAndStopExecution({ errors: [wholeRefusal(unavailableError(errorMessage('BRIEFLY_UNAVAILABLE', context.locale)))] });
  }
}

/**
 * Signed-in users: every root mutation field takes one unit of the user's budget (an
 * operation with 15 aliased grabs takes 15, all or none). Operators are not counted: their
 * scripts set up a campaign (goods, codes, credits) by the thousand. Callers without a valid
 * token: every operation takes one unit of their address's budget. Reads of signed-in
 * users are not limited. The hook stays synchronous when there is nothing to count:
 * envelop awaits a hook that returns a promise, on every request.
 */
export function useRateLimits(app: App): Plugin<Context> {
  const { mutations, anonymous } = app.rateLimits;
  const trustedProxies = app.config.TRUST_PROXY;
  const limit = (payload: Payload): Promise<void> | undefined => {
    const { args } = payload;
    const context = args.contextValue as Context;
    if (context.viewer) {
      if (!mutations.enabled || isOperator(context.viewer)) return undefined;
      const operation = operationOf(args);
      if (operation?.operation !== 'mutation') return undefined;
      const count = rootFieldCount(args.document, operation);
      if (count === 0) return undefined;
      const message = count > mutations.limit ? errorMessage('TOO_MANY_MUTATIONS', context.locale, { count, limit: mutations.limit }) : errorMessage('SLOW_DOWN', context.locale);
      return refuseOverBudget(payload, 'mutation', mutations.consume('mutation', context.viewer.userId, count), message);
    }
    if (!anonymous.enabled) return undefined;
    const address = budgetOf(clientAddress(requestOf(context), trustedProxies));
    return refuseOverBudget(payload, 'anonymous', anonymous.consume('anonymous', address), errorMessage('SLOW_DOWN_OR_SIGN_IN', context.locale));
  };
  return { onExecute: limit, onSubscribe: limit };
}
