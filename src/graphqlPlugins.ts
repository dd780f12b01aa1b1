import { type ExecutionResult, GraphQLError, getOperationAST } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { App } from './app.ts';
import type { Context } from './context.ts';
import { ErrorCode, graphqlError } from './errors.ts';

function withCode(error: GraphQLError, code: string): GraphQLError {
  if (error.extensions.code) return error;
  return new GraphQLError(error.message, {
    nodes: error.nodes,
    source: error.source,
    positions: error.positions,
    path: error.path,
    originalError: error.originalError,
    extensions: { ...error.extensions, code },
  });
}

function tagInputErrors(result: ExecutionResult): ExecutionResult | undefined {
  // Errors without data come from variable coercion, before any resolver ran.
  if (result.data !== undefined || !result.errors?.length) return undefined;
  return { ...result, errors: result.errors.map((error) => withCode(error, ErrorCode.badUserInput)) };
}

/**
 * Malformed requests (invalid documents, variables of the wrong type, unknown enum
 * values) carry `extensions.code = BAD_USER_INPUT`, as the contract requires.
 */
export function useInputErrorCodes(): Plugin {
  return {
    // Yoga marks syntax errors (an empty query included) GRAPHQL_PARSE_FAILED.
    onParse: () => ({ result }) => {
      if (result instanceof GraphQLError) (result.extensions as Record<string, unknown>).code = ErrorCode.badUserInput;
    },
    onValidate: () => ({ result, setResult }) => {
      if (result.length > 0) setResult(result.map((error) => withCode(error, ErrorCode.badUserInput)));
    },
    onExecute: () => ({
      onExecuteDone: ({ result, setResult }) => {
        if (!(Symbol.asyncIterator in result)) {
          const tagged = tagInputErrors(result);
          if (tagged) setResult(tagged);
        }
      },
    }),
    onSubscribe: () => ({
      onSubscribeResult: ({ result, setResult }) => {
        if (!(Symbol.asyncIterator in result)) {
          const tagged = tagInputErrors(result);
          if (tagged) setResult(tagged);
        }
      },
    }),
  };
}

/** Limits each signed-in user's mutations per window, across every instance. */
export function useMutationRateLimit(app: App): Plugin<Context> {
  return {
    async onExecute({ args, setResultAndStopExecution }) {
      const viewer = (args.contextValue as Context).viewer;
      if (!app.rateLimiter.enabled || !viewer) return;
      const operation = getOperationAST(args.document, args.operationName);
      if (operation?.operation !== 'mutation') return;
      const decision = await app.rateLimiter.consume('mutation', viewer.userId);
      if (!decision.allowed) {
        setResultAndStopExecution({
          errors: [graphqlError(ErrorCode.rateLimited, 'too many requests; slow down', { retryAfterMs: decision.retryAfterMs })],
        });
      }
    },
  };
}

/** GET /ready: 200 when Redis and the database answer and the key prefix is this database's, 503 otherwise. */
export function useReadiness(app: App): Plugin {
  return {
    async onRequest({ url, endResponse, fetchAPI }) {
      if (url.pathname !== '/ready') return;
      const checks = await app.checkReady();
      const ready = checks.redis && checks.database && checks.keyPrefix;
      endResponse(
        new fetchAPI.Response(JSON.stringify({ ready, ...checks, migrations: true }), {
          status: ready ? 200 : 503,
          headers: { 'content-type': 'application/json' },
        }),
      );
    },
  };
}
