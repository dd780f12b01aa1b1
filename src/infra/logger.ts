import { type Logger, pino } from 'pino';

export type { Logger };

/**
 * JSON lines, one per event, for log collectors. With `pretty` (npm start in a terminal,
 * outside production: see main.ts) pino-pretty writes them readable instead, in a worker
 * thread so the server's own thread does not pay for the formatting.
 */
export function createLogger(level: string, { pretty = false } = {}): Logger {
  const options = { level, base: { service: 'campaign-backend' } };
  if (!pretty) return pino(options);
  return pino({
    ...options,
    transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' } },
  });
}
