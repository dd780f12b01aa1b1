import { type ExecutionResult, GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { App } from './app.ts';
import type { Context } from './context.ts';
import { ErrorCode, rebuiltError, wholeRefusal } from './errors.ts';

function withCode(error: GraphQLError, code: string): GraphQLError {
  if (error.extensions.code) return error;
  return rebuiltError(error, { extensions: { ...error.extensions, code } });
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
    onParse:
      () =>
      ({ result }) => {
        if (result instanceof GraphQLError) (result.extensions as Record<string, unknown>).code = ErrorCode.badUserInput;
      },
    onValidate:
      () =>
      ({ result, setResult }) => {
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

/** Answers an operation whose Authorization was refused (see buildContext) with that refusal alone. */
export function useCredentialRefusal(): Plugin<Context> {
  type Hook = { args: { contextValue: unknown }; setResultAndStopExecution(result: ExecutionResult): void };
  const refuse = ({ args, setResultAndStopExecution }: Hook) => {
    const { credentialError } = args.contextValue as Context;
    if (credentialError) setResultAndStopExecution({ errors: [wholeRefusal(credentialError)] });
  };
  return { onExecute: refuse, onSubscribe: refuse };
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
