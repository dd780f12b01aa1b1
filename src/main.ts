import { ConfigError, loadConfig } from './config.ts';
import { createLogger } from './infra/logger.ts';
import { StartupError } from './infra/startupError.ts';
import { startServer } from './server.ts';

async function main(): Promise<void> {
  const config = loadConfig();
  const log = createLogger(config.LOG_LEVEL);
  if (config.jwtSecretGenerated) {
    log.warn('JWT_SECRET is not set: using the development secret kept in .data/jwt-secret. Mint a token with `npm run token -- <userId> [--admin]`.');
  }
  const server = await startServer(config, log);
  log.info({ url: server.url, database: server.app.db.kind }, `listening on ${server.url}`);

  const shutdown = (signal: string) => {
    log.info({ signal }, 'shutting down');
    server.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError || error instanceof StartupError) {
    process.stderr.write(`cannot start: ${error.message}\n`);
  } else {
    process.stderr.write(`cannot start: ${(error as Error).stack ?? String(error)}\n`);
  }
  process.exit(1);
});
