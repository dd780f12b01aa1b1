import { type Server, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import costLimit from '@escape.tech/graphql-armor-cost-limit';
import blockFieldSuggestions from '@escape.tech/graphql-armor-block-field-suggestions';
import maxAliases from '@escape.tech/graphql-armor-max-aliases';
import maxDepth from '@escape.tech/graphql-armor-max-depth';
import maxTokens from '@escape.tech/graphql-armor-max-tokens';
import { renderGraphiQL } from '@graphql-yoga/render-graphiql';
import type { ExecutionArgs, GraphQLError } from 'graphql';
import { type Plugin, createYoga } from 'graphql-yoga';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';
import { type App, createApp } from './app.ts';
import type { Config } from './config.ts';
import { type Context, buildContext } from './context.ts';
import { createFastLane } from './fastLane.ts';
import { useInputErrorCodes, useMutationRateLimit, useReadiness } from './graphqlPlugins.ts';
import type { Logger } from './infra/logger.ts';
import { StartupError, describeCause } from './infra/startupError.ts';
import { schema } from './schema/index.ts';

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
  const plugins: Plugin[] = [
    maxDepth.maxDepthPlugin({ n: config.GRAPHQL_MAX_DEPTH, ...rejection }),
    costLimit.costLimitPlugin({ maxCost: config.GRAPHQL_MAX_COST, ...rejection }),
    maxAliases.maxAliasesPlugin({ n: config.GRAPHQL_MAX_ALIASES, ...rejection }),
    maxTokens.maxTokensPlugin({ n: config.GRAPHQL_MAX_TOKENS }),
  ];
  if (config.NODE_ENV === 'production') plugins.push(blockFieldSuggestions.blockFieldSuggestionsPlugin());
  return plugins;
}

function createGraphqlServer(app: App) {
  const { config } = app;
  return createYoga<{ connectionParams?: Record<string, unknown> }, Context>({
    schema,
    graphqlEndpoint: GRAPHQL_PATH,
    healthCheckEndpoint: '/health',
    landingPage: false,
    graphiql: config.NODE_ENV === 'production' ? false : { subscriptionsProtocol: 'WS', title: 'Campaign backend' },
    renderGraphiQL,
    logging: {
      debug: (...args) => app.log.debug(args.join(' ')),
      info: (...args) => app.log.info(args.join(' ')),
      warn: (...args) => app.log.warn(args.join(' ')),
      error: (...args) => app.log.error(args.map(String).join(' ')),
    },
    context: ({ request, connectionParams }) =>
      buildContext(app, request?.headers.get('authorization') ?? connectionParams?.authorization),
    plugins: [...armorPlugins(config), useInputErrorCodes(), useMutationRateLimit(app), useReadiness(app)],
  });
}

type EnvelopedRoot = { execute: (args: ExecutionArgs) => unknown; subscribe: (args: ExecutionArgs) => unknown };

/** HTTP (POST, GET, SSE) and graphql-ws on one port and one path. */
export async function startServer(config: Config, log: Logger): Promise<RunningServer> {
  const app = await createApp(config, log);
  const yoga = createGraphqlServer(app);
  const fastLane = config.GRAPHQL_FAST_LANE === '1' ? createFastLane(yoga, GRAPHQL_PATH, log) : undefined;
  const httpServer: Server = createServer((req, res) => {
    if (!fastLane?.(req, res)) void yoga(req, res);
  });
  const wsServer = new WebSocketServer({ server: httpServer, path: GRAPHQL_PATH });

  useServer<Record<string, unknown>>(
    {
      execute: (args) => (args.rootValue as EnvelopedRoot).execute(args) as never,
      subscribe: (args) => (args.rootValue as EnvelopedRoot).subscribe(args) as never,
      onSubscribe: async (ctx, _id, params) => {
        const { schema: enveloped, execute, subscribe, contextFactory, parse, validate } = yoga.getEnveloped({
          ...ctx,
          req: ctx.extra.request,
          socket: ctx.extra.socket,
          params,
          connectionParams: ctx.connectionParams ?? {},
        });
        const document = parse(params.query);
        const errors = validate(enveloped, document);
        if (errors.length > 0) return errors;
        return {
          schema: enveloped,
          operationName: params.operationName,
          document,
          variableValues: params.variables,
          contextValue: await contextFactory(),
          rootValue: { execute, subscribe },
        };
      },
    },
    wsServer,
  );

  try {
    await new Promise<void>((resolve, reject) => {
      httpServer.once('error', reject);
      httpServer.listen(config.PORT, config.HOST, resolve);
    });
  } catch (error) {
    await app.close();
    throw new StartupError(`cannot listen on ${config.HOST}:${config.PORT} (${describeCause(error)}); set PORT or HOST`);
  }
  const { port } = httpServer.address() as AddressInfo;
  const host = config.HOST === '0.0.0.0' || config.HOST === '::' ? 'localhost' : config.HOST;

  let stopping: Promise<void> | undefined;
  return {
    app,
    port,
    url: `http://${host}:${port}${GRAPHQL_PATH}`,
    stop: (graceMs = config.SHUTDOWN_TIMEOUT_MS) =>
      (stopping ??= (async () => {
        const closed = new Promise<void>((resolve) => httpServer.close(() => resolve()));
        httpServer.closeIdleConnections();
        for (const socket of wsServer.clients) socket.close(1001, 'server shutting down');
        const deadline = setTimeout(() => httpServer.closeAllConnections(), graceMs);
        await closed;
        clearTimeout(deadline);
        wsServer.close();
        await yoga.dispose();
        await app.close();
      })()),
  };
}
