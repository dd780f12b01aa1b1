import { type Logger, pino } from 'pino';
import { currentRequestId } from '../requestId.ts';

export type { Logger };

/** Every line written while a request is served carries its id (src/requestId.ts), from however deep in a service. */
function requestIdOfLine(): { reqId?: string } {
  const reqId = currentRequestId();
  return reqId === undefined ? {} : { reqId };
}

/**
 * JSON lines, one per event, for log collectors. With `pretty` (npm start in a terminal,
 * outside production: see main.ts) pino-pretty writes them readable instead, in a worker
 * thread so the server's own thread does not pay for the formatting.
 */
export function createLogger(level: string, { pretty = false } = {}): Logger {
  const options = { level, base: { service: 'campaign-backend' }, mixin: requestIdOfLine };
  if (!pretty) return pino(options);
  return pino({
    ...options,
    transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' } },
  });
}

/**
 * Writes the first of a run of like events, then at most one per window, saying how many it
 * left out. For events anyone can cause (a forged payment notify): a line each would let them
 * fill the disk. A metric counts every one.
 */
export function oncePerWindow(windowMs: number): (write: (skipped: number) => void) => void {
  let writtenAtMs = Number.NEGATIVE_INFINITY;
  let skipped = 0;
  return (write) => {
    const nowMs = Date.now();
    if (nowMs - writtenAtMs < windowMs) {
      skipped += 1;
      return;
    }
    writtenAtMs = nowMs;
    write(skipped);
    skipped = 0;
  };
}
