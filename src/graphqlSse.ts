import { type DocumentNode, type ExecutionResult, GraphQLError, getOperationAST } from 'graphql';
import type { Response as SseResponse } from 'graphql-sse';
import { createHandler } from 'graphql-sse/lib/use/fetch';
import type { Plugin } from 'graphql-yoga';
import type { TrustedDocuments } from './trustedDocuments.ts';

/** Where the graphql-sse protocol is served. */
export const GRAPHQL_SSE_PATH = '/graphql/stream';

function badRequest(errors: readonly GraphQLError[]): SseResponse {
  return [JSON.stringify({ errors }), { status: 400, statusText: 'Bad Request', headers: { 'content-type': 'application/json; charset=utf-8' } }];
}

/**
 * The graphql-sse protocol (single connection mode included, which browsers' 6 connections
 * per origin call for): graphql-sse's own handler, run through Yoga's envelop, so the
 * plugins, context and sign-in are those of /graphql. The glue of
 * @graphql-yoga/plugin-graphql-sse, rewritten for two answers it gets wrong: a syntax error
 * (500 there; 400 with the errors here, as graphql-sse answers it itself), and a result
 * refused before execution, such as a refused token (400 "Unable to detect operation AST"
 * there, as graphql-sse takes a result only with a `data` key; an event with `data: null` here).
 * graphql-sse passes on no `documentId`: this transport takes query text, where `trusted` lets it.
 */
export function useGraphqlSse(trusted: TrustedDocuments): Plugin {
  const serverContexts = new WeakMap<Request, object>();
  let handler: (request: Request) => Promise<Response>;
  return {
    onYogaInit({ yoga }) {
      handler = createHandler(
        {
          async onSubscribe(req, params) {
            const enveloped = yoga.getEnveloped({ ...serverContexts.get(req.raw), request: req.raw, params });
            let document: DocumentNode;
            try {
              document = enveloped.parse(await trusted.queryOf(params, { request: req.raw, params }));
            } catch (error) {
              if (error instanceof GraphQLError) return badRequest([error]);
              throw error;
            }
            const errors = enveloped.validate(enveloped.schema, document);
            if (errors.length > 0) return badRequest(errors);
            const args = {
              schema: enveloped.schema,
              document,
              contextValue: await enveloped.contextFactory(),
              variableValues: params.variables,
              operationName: params.operationName,
            };
            const subscription = getOperationAST(document, params.operationName)?.operation === 'subscription';
            const result = (await (subscription ? enveloped.subscribe(args) : enveloped.execute(args))) as ExecutionResult | AsyncIterable<ExecutionResult>;
            return Symbol.asyncIterator in result || 'data' in result ? result : { data: null, ...result };
          },
        },
        yoga.fetchAPI,
      );
    },
    onRequest({ request, serverContext, endResponse }) {
      if (new URL(request.url).pathname !== GRAPHQL_SSE_PATH) return;
      serverContexts.set(request, serverContext as object);
      return handler(request).then(endResponse);
    },
  };
}
