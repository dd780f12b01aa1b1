import { type Logger, pino } from 'pino';
import { currentRequestId } from '../requestId.ts';

export type { Logger };

/** Every line written while a request is served carries its id (src/requestId.ts), from however deep in a service. */
function requestIdOfLine(): { reqId?: string } {
  const reqId = currentRequestId();
  return reqId === undefined ? {} : { reqId };
}

/** The fields of log lines that hold a user id (the token's sub, which may be personal data such as a phone number). */
const USER_ID_FIELDS = ['userId', 'senderId'];

/**
 * JSON lines, one per event, for log collectors. With `pretty` (npm start in a terminal,
 * outside production: see main.ts) pino-pretty writes them readable instead, in a worker
 * thread so the server's own thread does not pay for the formatting. `aliasUserId`: what
 * a user id becomes in a line (LOG_USER_IDS=alias); unset, ids are written as they are.
 */
export function createLogger(level: string, { pretty = false, aliasUserId }: { pretty?: boolean; aliasUserId?: (userId: string) => string } = {}): Logger {
  const redact = aliasUserId && { paths: USER_ID_FIELDS, censor: (value: unknown) => (typeof value === 'string' ? aliasUserId(value) : value) };
  const options = { level, base: { service: 'campaign-backend' }, mixin: requestIdOfLine, ...(redact ? { redact } : {}) };
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

/** How long a line that an outage repeats is held back after it was written (logRepeating). */
export const REPEATED_LINE_WINDOW_MS = 10_000;

const windowsOf = new WeakMap<Logger, Map<string, ReturnType<typeof oncePerWindow>>>();

/**
 * For a line an outage writes per request, batch, row or tick: written as oncePerWindow
 * does, once per REPEATED_LINE_WINDOW_MS for each `log` and `key` (the message, unless
 * lines of one message are to be held back apart), with `skipped`. A store down at 60
 * requests a second once wrote 858 KB of stacks in 30 s; the first line of a run, with
 * its error, is what tells the cause, and store_errors_total counts every one.
 */
export function logRepeating(log: Logger, level: 'warn' | 'error', fields: object, message: string, key = message): void {
  let windows = windowsOf.get(log);
  if (!windows) {
    windows = new Map();
    windowsOf.set(log, windows);
  }
  let once = windows.get(key);
  if (!once) {
    once = oncePerWindow(REPEATED_LINE_WINDOW_MS);
    windows.set(key, once);
  }
  once((skipped) => log[level]({ ...fields, skipped }, message));
}
