import cluster from 'node:cluster';
import { type Config, ConfigError, loadConfig } from './config.ts';
import { logAliases } from './domain/privacy.ts';
import { isStoreOutage } from './errorMasking.ts';
import { type Logger, createLogger } from './infra/logger.ts';
import { StartupError, StoreUnreachableError, describeCause } from './infra/startupError.ts';
import { startServer } from './server.ts';
import { VERSION } from './version.ts';

/** The exit code of a process that refused to start (EX_CONFIG); a cluster primary stops on it. */
const CANNOT_START = 78;
/** The exit code of a process that could not reach a store at start (EX_TEMPFAIL): worth starting again. */
const STORE_UNREACHABLE = 75;
/** The longest a cluster primary waits before starting again a worker that could not reach a store. */
const MAX_REFORK_DELAY_MS = 30_000;

/** One server in this process; SIGTERM and SIGINT stop it gracefully. */
async function runServer(config: Config, log: Logger): Promise<void> {
  const server = await startServer(config, log);
  log.info({ url: server.url, database: server.app.db.kind, version: VERSION }, `listening on ${server.url}`);
  let stopping = false;
  const stop = (exitCode: number, graceMs?: number) => {
    if (stopping) return;
    stopping = true;
    // A command racing the close of its connection fails, and a library may leave that
    // rejection unhandled (an UNSUBSCRIBE, say): logged, it must not cut the journal's drain.
    process.on('unhandledRejection', (error) => log.warn({ err: error }, 'a call failed unhandled while stopping'));
    server.stop(graceMs).then(
      () => process.exit(exitCode),
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  // A signal repeated while stopping (a cluster primary stopping its workers, say) must not kill the journal's drain.
  const shutdown = (signal: string) => {
    if (stopping) return;
    log.info({ signal }, 'shutting down');
    stop(0);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // Every request served from here on could mix two databases' state: connections are cut
  // at once. Exits as a refusal to start does, since a restart would only be refused.
  const halt = () => {
    log.fatal({ reason: String(server.app.halted.reason) }, 'stopping: this instance must not serve the key prefix any longer');
    stop(CANNOT_START, 0);
  };
  if (server.app.halted.aborted) halt();
  else server.app.halted.addEventListener('abort', halt, { once: true });
}

/**
 * WEB_CONCURRENCY workers share the port. Instances are stateless (Redis and PostgreSQL
 * hold everything), so workers are just more instances; a worker that dies is replaced.
 */
function runPrimary(config: Config, log: Logger): void {
  let stopping = false;
  for (let i = 0; i < config.WEB_CONCURRENCY; i++) cluster.fork();
  const stopWorkers = () => {
    stopping = true;
    const workers = Object.values(cluster.workers ?? {});
    for (const worker of workers) worker?.process.kill('SIGTERM');
    // Every worker may be waiting to be started again: no exit would come to end on.
    if (workers.length === 0) process.exit();
  };
  // Workers that could not reach a store in a row: each waits twice as long as the last.
  let unreachableInARow = 0;
  cluster.on('listening', () => (unreachableInARow = 0));
  cluster.on('exit', (worker, code, signal) => {
    if (code === STORE_UNREACHABLE && !stopping) {
      // A store down for a moment must not take the workers that serve through it down too.
      const delayMs = Math.min(MAX_REFORK_DELAY_MS, 1000 * 2 ** unreachableInARow++);
      log.warn({ pid: worker.process.pid, code, delayMs }, 'a worker could not reach a store; starting another later');
      setTimeout(() => stopping || cluster.fork(), delayMs);
    } else if (code === CANNOT_START) {
      // Configuration is wrong for every worker alike; replacing it would loop forever.
      if (!stopping) log.error({ pid: worker.process.pid, code }, 'a worker cannot serve; stopping every worker');
      process.exitCode = CANNOT_START;
      if (!stopping) stopWorkers();
    } else if (!stopping) {
      log.error({ pid: worker.process.pid, code, signal }, 'worker died; starting another');
      cluster.fork();
    }
    if (stopping && Object.keys(cluster.workers ?? {}).length === 0) process.exit();
  });
  const shutdown = (signal: NodeJS.Signals) => {
    log.info({ signal }, 'shutting down workers');
    stopWorkers();
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

async function main(): Promise<void> {
  const config = loadConfig();
  // Readable lines for a developer at a terminal; JSON for anything that collects them.
  const log = createLogger(config.LOG_LEVEL, {
    pretty: process.stdout.isTTY === true && config.NODE_ENV !== 'production',
    aliasUserId: config.LOG_USER_IDS === 'alias' ? logAliases(config.userAliasSecret) : undefined,
  });
  if (config.jwtSecretGenerated && cluster.isPrimary) {
    log.warn('JWT_SECRET is not set: using the development secret kept in .data/jwt-secret. Mint a token with `npm run token -- <userId> [--admin]`.');
  }
  // Real secrets in development: most likely a deployment whose NODE_ENV was left unset.
  if (config.NODE_ENV === 'development' && !config.jwtSecretGenerated && cluster.isPrimary) {
    log.warn(
      `NODE_ENV is development with real secrets: GraphiQL is served and introspection is open to all${config.sandboxPayments ? ', and sandboxPay pays with nothing (SANDBOX_PAYMENTS=1)' : ''}. Set NODE_ENV=production for a deployment.`,
    );
  }
  if (config.WEB_CONCURRENCY > 1 && cluster.isPrimary) runPrimary(config, log);
  else await runServer(config, log);
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof StartupError) {
    process.stderr.write(`cannot start: ${error.message}\n`);
    process.exit(error instanceof StoreUnreachableError ? STORE_UNREACHABLE : CANNOT_START);
  }
  // A store lost in the middle of the start (a connection cut while reading the key prefix's
  // claim, say) may be back in a moment. A migration cut halfway is not: its row stays
  // unfinished, and the next start refuses (78) until someone looks at it.
  if (isStoreOutage(error)) {
    process.stderr.write(`cannot start: a store went away while starting: ${describeCause(error)}\n`);
    process.exit(STORE_UNREACHABLE);
  }
  process.stderr.write(`cannot start: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
