import { type ExecutionResult, GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { App } from './app.ts';
import type { Context } from './context.ts';
import { ErrorCode, rebuiltError, wholeRefusal } from './errors.ts';

function withCode(error: GraphQLError, code: string): GraphQLError {
  if (error.extensions.code) return error;
  return rebuiltError(error, { extensions: { ...error.extensions, code } });
}

/**
 * An error of a well-formed request whose operation cannot run: BAD_USER_INPUT. The
 * executor and Yoga mark variable coercion and operation selection failures 400 without
 * `spec`, which made Yoga answer 400 under application/json too; with `spec` that format
 * keeps 200, as the GraphQL over HTTP spec wants, and application/graphql-response+json 400.
 */
export function asRequestError(error: GraphQLError): GraphQLError {
  const code = error.extensions.code === undefined || error.extensions.code === YOGA_OPERATION_NOT_FOUND ? ErrorCode.badUserInput : error.extensions.code;
  const http = error.extensions.http as { status?: number; spec?: boolean } | undefined;
  // A scalar's own refusal keeps its code, and gets the executor's 400 all the same.
  const unmarked400 = http?.status === 400 && !http.spec;
  if (code === error.extensions.code && !unmarked400) return error;
  return rebuiltError(error, { extensions: { ...error.extensions, code, ...(unmarked400 ? { http: { ...http, spec: true } } : {}) } });
}

/** Yoga's code for a document without the operation operationName names (or with several and no name). */
const YOGA_OPERATION_NOT_FOUND = 'OPERATION_RESOLUTION_FAILURE';

function tagInputErrors(result: ExecutionResult): ExecutionResult | undefined {
  // Errors without data come from variable coercion, before any resolver ran.
  if (result.data !== undefined || !result.errors?.length) return undefined;
  return { ...result, errors: result.errors.map(asRequestError) };
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
    // Yoga picks the operation over HTTP before execution, and answers a failure itself.
    onResultProcess: ({ result, setResult }) => {
      if (Array.isArray(result) || Symbol.asyncIterator in result) return;
      const { errors } = result as ExecutionResult;
      if (errors?.some((error) => error.extensions?.code === YOGA_OPERATION_NOT_FOUND)) setResult({ ...result, errors: errors.map(asRequestError) });
    },
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
