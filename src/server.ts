import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import maxAliases from '@escape.tech/graphql-armor-max-aliases';
import maxDepth from '@escape.tech/graphql-armor-max-depth';
import maxTokens from '@escape.tech/graphql-armor-max-tokens';
import type { DocumentNode, ExecutionArgs, GraphQLError } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { type Plugin, createYoga } from 'graphql-yoga';
import { WebSocketServer } from 'ws';
import { prepareAcceptors } from './acceptors.ts';
import { type App, createApp } from './app.ts';
import type { Config } from './config.ts';
import { type Context, authorizationOf, buildContext, connectionHeaders, localeOfCaller } from './context.ts';
import { type MaskErrorFunction, createErrorMasking, maskedErrorLog } from './errorMasking.ts';
import { resultWithoutHttpStatus, withoutHttpStatus } from './errors.ts';
import { createFastLane } from './fastLane.ts';
import { useCredentialRefusal, useInputErrorCodes, useReadiness } from './graphqlPlugins.ts';
import { useGraphqlSse } from './graphqlSse.ts';
import { useBodyLimits } from './guards/bodySize.ts';
import { WebSocketLimits } from './guards/connectionLimit.ts';
import { useInputCharacters } from './guards/inputCharacters.ts';
import { useOperationCost } from './guards/operationCost.ts';
import { useRateLimits } from './guards/rateLimits.ts';
import { useRepeatedFieldLimit } from './guards/repeatedFields.ts';
import { useSubscriptionLimits } from './guards/subscriptionLimits.ts';
import { useTokenExpiry } from './guards/tokenExpiry.ts';
import { createCorsPolicy, hygienePlugins } from './httpHygiene.ts';
import type { Logger } from './infra/logger.ts';
import { watchJournal, watchOutboxes, watchPool, wsConnections } from './infra/metrics.ts';
import { StartupError, describeCause } from './infra/startupError.ts';
import { METRICS_PATH, metricsAccess, serveMetrics, useMetrics } from './metrics.ts';
import { NOTIFY_PATH, servePaymentNotify } from './paymentNotify.ts';
import { type ServedRequest, assignRequestId, pulledAs, requestIdOrNew, servingRequest } from './requestId.ts';
import { schemaFor } from './schema/index.ts';
import { type DocumentParams, type TrustedDocuments, createTrustedDocuments, loadManifest } from './trustedDocuments.ts';
import { createWebApp } from './webApp.ts';

const GRAPHQL_PATH = '/graphql';

export interface RunningServer {
  app: App;
  url: string;
  port: number;
  /**
   * Graceful: stop accepting, finish in-flight work, commit the journal, close
   * connections. Connections still busy after `graceMs` (SHUTDOWN_TIMEOUT_MS) are cut;
   * what their requests granted is committed all the same.
   */
  stop(graceMs?: number): Promise<void>;
}

function armorPlugins(config: Config): Plugin[] {
  // Report rejections as ordinary validation errors (which carry BAD_USER_INPUT) instead of throwing.
  const rejection = {
    propagateOnRejection: false,
    onReject: [(context: { reportError(error: GraphQLError): void } | null, error: GraphQLError) => context?.reportError(error)],
  };
  return [
    maxDepth.maxDepthPlugin({ n: config.GRAPHQL_MAX_DEPTH, ...rejection }),
    maxAliases.maxAliasesPlugin({ n: config.GRAPHQL_MAX_ALIASES, ...rejection }),
    maxTokens.maxTokensPlugin({ n: config.GRAPHQL_MAX_TOKENS }),
  ];
}

/**
 * The text GraphiQL opens with. Yoga's own puts the page's title where "GraphiQL" belongs
 * ("Campaign backend is an in-browser tool…"); this one also tells how to sign in.
 */
const GRAPHIQL_WELCOME = `# Welcome to GraphiQL, on the campaign backend.
#
# GraphiQL is an in-browser tool for writing, validating and
# testing GraphQL queries. Type them here: fields are suggested
# and errors marked as you type; the Docs button (left) shows
# the schema. Lines that start with # are ignored.
#
# To sign in, mint a token with \`npm run token -- alice\`
# (add --admin for an operator), then put
#   {"authorization": "Bearer <token>"}
# in the Headers tab below.
#
# Keyboard shortcuts:
#   Prettify query:  Shift-Ctrl-P
#      Merge query:  Shift-Ctrl-M
#        Run query:  Ctrl-Enter (or the play button)
#    Auto complete:  Ctrl-Space
`;

function createGraphqlServer(app: App, maskError: MaskErrorFunction, corsHeaders: ReturnType<typeof createCorsPolicy>, trusted: TrustedDocuments) {
  const { config } = app;
  return createYoga<{ connectionParams?: Record<string, unknown> }, Context>({
    schema: schemaFor(config),
    maskedErrors: { maskError, isDev: config.GRAPHQL_EXPOSE_ERRORS === '1' },
    cors: false,
    graphqlEndpoint: GRAPHQL_PATH,
    // A persisted document's id (src/trustedDocuments.ts), sent instead of `query`.
    extraParamNames: ['documentId'],
    healthCheckEndpoint: '/health',
    landingPage: false,
    graphiql: config.NODE_ENV === 'production' ? false : { subscriptionsProtocol: 'WS', title: 'Campaign backend', defaultQuery: GRAPHIQL_WELCOME },
    // The page carries 9 MB of script, which took half a second of every start to parse:
    // loaded when a browser first asks for GraphiQL instead.
    renderGraphiQL: async (options) => (await import('@graphql-yoga/render-graphiql')).renderGraphiQL(options),
    logging: {
      debug: (...args) => app.log.debug(args.join(' ')),
      info: (...args) => app.log.info(args.join(' ')),
      warn: (...args) => app.log.warn(args.join(' ')),
      error: maskedErrorLog(app.log),
    },
    context: (initial) => buildContext(app, authorizationOf(initial), localeOfCaller(initial), requestIdOrNew()),
    plugins: [
      ...hygienePlugins(config, corsHeaders),
      // Before anything reads a body, graphql-sse's stream included.
      useBodyLimits(app, { callerBytes: config.GRAPHQL_MAX_BODY_BYTES, operatorBytes: config.GRAPHQL_MAX_OPERATOR_BODY_BYTES }),
      // Before the limits: a refused operation is counted and timed too.
      useMetrics(trusted.operationNames),
      // Before anything reads the document: it picks the text a documentId names, or refuses.
      trusted.plugin,
      // Before validation, which it skips for a document it refuses.
      useRepeatedFieldLimit(),
      ...armorPlugins(config),
      useInputErrorCodes(),
      // Cheap refusals first: a refused request takes nothing from a rate limit and reaches no resolver.
      useInputCharacters(),
      useOperationCost(app),
      useRateLimits(app),
      // After the limits: a refused token counts as anonymous, so spraying bad tokens is limited by address.
      useCredentialRefusal(),
      useSubscriptionLimits(config.SUBSCRIPTIONS_PER_USER, config.SUBSCRIPTIONS_PER_SOCKET),
      useTokenExpiry(),
      useReadiness(app),
      useGraphqlSse(app, trusted),
    ],
  });
}

/** The largest graphql-ws frame: a subscribe of the longest document the token limit lets through, with room for its variables. */
export const WS_MAX_FRAME_BYTES = 64 * 1024;

type EnvelopedRoot = { execute: (args: ExecutionArgs) => unknown; subscribe: (args: ExecutionArgs) => unknown };

/** A graphql-ws operation as the request it is: its own id, and its caller's language as its context has it. */
const servedOperation = (args: ExecutionArgs): ServedRequest => {
  const { requestId, locale } = args.contextValue as Context;
  return { id: requestId, language: locale };
};

const isAsyncIterable = (value: unknown): value is AsyncIterable<unknown> => typeof value === 'object' && value !== null && Symbol.asyncIterator in value;

/** HTTP (POST, GET, SSE) and graphql-ws on one port and one path. */
export async function startServer(config: Config, log: Logger): Promise<RunningServer> {
  // Read with `off` too: the metrics count the app's operations by their names.
  const manifest = loadManifest();
  if (!manifest && config.GRAPHQL_TRUSTED_DOCUMENTS === 'only') {
    throw new StartupError('GRAPHQL_TRUSTED_DOCUMENTS=only needs the persisted documents of the web app: run npm run build:web (npm start does)');
  }
  if (!manifest && config.GRAPHQL_TRUSTED_DOCUMENTS === 'allow') log.warn('the web app is not built: no persisted documents, every documentId is refused');
  const extraAcceptors = prepareAcceptors(cluster.isPrimary ? config.HTTP_ACCEPTORS - 1 : 0, log);
  const app = await createApp(config, log);
  const trusted = createTrustedDocuments(app, config.GRAPHQL_TRUSTED_DOCUMENTS, manifest);
  const maskError = createErrorMasking(config.GRAPHQL_EXPOSE_ERRORS === '1');
  const corsHeaders = createCorsPolicy(config);
  const yoga = createGraphqlServer(app, maskError, corsHeaders, trusted);
  const fastLane = config.GRAPHQL_FAST_LANE === '1' ? createFastLane({ yoga, graphqlPath: GRAPHQL_PATH, log, maskError, corsHeaders, trusted }) : undefined;
  // Idle keep-alive sockets live longer than a client's or a proxy's own idle timeout (60 s
  // behind most load balancers), so the client, not the server, closes them: a server
  // closing one as a request arrives on it fails that request.
  const webApp = createWebApp(config);
  const metrics = metricsAccess(config);
  if (metrics.enabled) {
    watchJournal(app.journal);
    watchOutboxes({ redemption: () => app.points.deliveryBacklog(), refund: () => app.refunds.deliveryBacklog() });
    watchPool(app.db.pool);
  }
  // While stopping, every response ends its connection (`Connection: close`): a client keeping
  // a busy keep-alive connection would otherwise send request after request on it, the
  // server would never see it idle, and the stop would cut it, answered or not, after the
  // grace period. Responses already in flight when the stop began are told as well.
  let draining = false;
  const inFlight = new Set<ServerResponse>();
  // A request must arrive whole within 70 s (Node's default, 300 s, let a client sending a
  // byte a second hold a connection for five minutes); headers within 66 s, past the
  // keep-alive of load balancers.
  const httpServer: Server = createServer({ keepAliveTimeout: 65_000, headersTimeout: 66_000, requestTimeout: 70_000 }, (req, res) => {
    if (draining) res.setHeader('connection', 'close');
    else {
      inFlight.add(res);
      res.once('close', () => inFlight.delete(res));
    }
    servingRequest({ id: assignRequestId(req, res), language: req.headers['accept-language'] }, () => {
      const path = req.url?.split('?')[0];
      if (path === NOTIFY_PATH) void servePaymentNotify(app, req, res);
      else if (path === METRICS_PATH && metrics.enabled) serveMetrics(metrics.token, req, res);
      else if (!fastLane?.(req, res) && !webApp(req, res)) void yoga(req, res);
    });
  });
  // Node counts a connection that has sent nothing yet as busy (its headers timer runs), so
  // `close()` would wait the whole grace period on a browser's preconnect or a client's
  // spare pooled socket. The stop ends those itself: no byte of a request has come on them.
  const connections = new Set<Socket>();
  httpServer.on('connection', (socket: Socket) => {
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });
  // ws takes frames of up to 100 MiB by default, and graphql-ws keeps connection_init's
  // payload for the life of the socket: a few anonymous frames would fill the heap.
  const wsLimits = new WebSocketLimits(app);
  // Upgrades handed over here rather than with `server: httpServer`: ws would take the HTTP
  // server's errors as its own, and graphql-ws print them with a stack (a port in use, before
  // the one-line refusal below), then close every socket.
  const wsServer = new WebSocketServer({ noServer: true, path: GRAPHQL_PATH, verifyClient: wsLimits.verifyClient(), maxPayload: WS_MAX_FRAME_BYTES });
  httpServer.on('upgrade', (req, socket, head) => wsServer.handleUpgrade(req, socket, head, (ws) => wsServer.emit('connection', ws, req)));
  wsLimits.watch(wsServer);
  wsServer.on('connection', (socket) => {
    wsConnections.inc();
    socket.once('close', () => wsConnections.dec());
  });

  useServer<Record<string, unknown>>(
    {
      onConnect: (ctx) => {
        // Read-only in graphql-ws's types, but only its own field: the rest of the payload goes.
        (ctx as { connectionParams?: Record<string, unknown> }).connectionParams = connectionHeaders(ctx.connectionParams);
        wsLimits.connected(ctx);
      },
      // Each operation is a request of its own: started, executed and pulled as its id.
      // Refusals and input errors carry Yoga's HTTP status, which a socket has no use for.
      execute: async (args) => resultWithoutHttpStatus(await servingRequest(servedOperation(args), () => (args.rootValue as EnvelopedRoot).execute(args))) as never,
      subscribe: async (args) => {
        const operation = servedOperation(args);
        const result = await servingRequest(operation, () => (args.rootValue as EnvelopedRoot).subscribe(args));
        return (isAsyncIterable(result) ? pulledAs(operation, result) : resultWithoutHttpStatus(result)) as never;
      },
      onSubscribe: (ctx, _id, params) => {
        wsLimits.operationArrived(ctx);
        return servingRequest({ id: randomUUID(), language: localeOfCaller({ connectionParams: ctx.connectionParams, params }) }, async () => {
          const connectionParams = ctx.connectionParams ?? {};
          const {
            schema: enveloped,
            execute,
            subscribe,
            contextFactory,
            parse,
            validate,
          } = yoga.getEnveloped({
            ...ctx,
            req: ctx.extra.request,
            socket: ctx.extra.socket,
            params,
            connectionParams,
          });
          // A bad operation (a syntax error, say) is answered on its own: anything thrown here
          // would close the socket with 4500, and every other subscription on it.
          let document: DocumentNode;
          let contextValue: Context;
          try {
            // graphql-ws wants a `query` string: a persisted document comes as `query: ''` with a `documentId`.
            document = parse(await trusted.queryOf(params as typeof params & DocumentParams, { connectionParams, params }));
            const errors = validate(enveloped, document);
            if (errors.length > 0) return withoutHttpStatus(errors);
            contextValue = (await contextFactory()) as Context;
          } catch (error) {
            const answer = maskError(error, 'Unexpected error.') as GraphQLError;
            if (answer !== error) app.log.error({ err: error }, 'unexpected error while starting a graphql-ws operation');
            return withoutHttpStatus([answer]);
          }
          return {
            schema: enveloped,
            operationName: params.operationName,
            document,
            variableValues: params.variables,
            contextValue,
            rootValue: { execute, subscribe },
          };
        });
      },
    },
    wsServer,
  );

  try {
    await new Promise<void>((resolve, reject) => {
      httpServer.once('error', reject);
      httpServer.listen(config.PORT, config.HOST, () => {
        httpServer.off('error', reject);
        resolve();
      });
    });
  } catch (error) {
    await app.close();
    throw new StartupError(`cannot listen on ${config.HOST}:${config.PORT} (${describeCause(error)}); set PORT or HOST`);
  }
  // Listening, the server reports only a failed accept (EMFILE, say), and listens on.
  httpServer.on('error', (error) => log.error({ err: error }, 'the HTTP server could not accept a connection'));
  const acceptors = await extraAcceptors.attach(httpServer);
  const { port } = httpServer.address() as AddressInfo;
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? 'localhost' : config.HOST;

  let stopping: Promise<void> | undefined;
  return {
    app,
    port,
    url: `http://${host}:${port}${GRAPHQL_PATH}`,
    stop: (graceMs = config.SHUTDOWN_TIMEOUT_MS) =>
      (stopping ??= (async () => {
        draining = true;
        app.events.leaveChannelsToClose();
        for (const res of inFlight) {
          if (!res.headersSent) res.setHeader('connection', 'close');
          // An event stream never ends by itself: ended now (SSE has no close code), its
          // client reconnects elsewhere at once, as a graphql-ws client does on 1001,
          // instead of holding the stop for the whole grace period.
          else if (String(res.getHeader('content-type')).startsWith('text/event-stream')) res.destroy();
        }
        const closed = Promise.all([httpServer, ...acceptors].map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
        httpServer.closeIdleConnections();
        for (const socket of connections) if (socket.bytesRead === 0) socket.destroy();
        for (const socket of wsServer.clients) socket.close(1001, 'server shutting down');
        const deadline = setTimeout(() => httpServer.closeAllConnections(), graceMs);
        await closed;
        clearTimeout(deadline);
        wsServer.close();
        wsLimits.stop();
        await yoga.dispose();
        await app.close();
      })()),
  };
}
