import type { IncomingMessage } from 'node:http';
import type { Context as WsContext } from 'graphql-ws';
import type { WebSocket, WebSocketServer } from 'ws';
import type { App } from '../app.ts';
import { errorMessage, localeOf } from '../i18n/messages.ts';
import { logRepeating } from '../infra/logger.ts';
import { type RateLimit, rateLimited as rateLimitedRequests } from '../infra/metrics.ts';
import { budgetOf, clientAddress } from './clientAddress.ts';
import { rateLimited } from './rateLimits.ts';

type Verdict = (allowed: boolean, code?: number, message?: string, headers?: Record<string, string>) => void;

/** How often every socket is looked at, for idleness and for a backlog: a few thousand checks, each a few property reads. */
const SWEEP_INTERVAL_MS = 1_000;

/**
 * Bytes a socket may have queued for its client for WS_BACKLOG_GRACE_MS: past that it is
 * cut, so a client that asks and never reads cannot grow the server's memory with the
 * answers. A client that reads may still fall behind for a moment: one state of a
 * 10,000-share packet is 1.3 MB, and a socket's first states arrive in one burst.
 */
export const WS_MAX_BUFFERED_BYTES = 1024 * 1024;
export const WS_BACKLOG_GRACE_MS = 5_000;
/** Queued past this, a socket is cut at once. */
export const WS_MAX_BURST_BYTES = 8 * WS_MAX_BUFFERED_BYTES;

export interface HeldSocket {
  context: WsContext | null;
  busyAtMs: number;
  /** Since when more than WS_MAX_BUFFERED_BYTES have been queued, if they are. */
  backloggedSinceMs?: number;
}

/**
 * What bounds the graphql-ws sockets of one process:
 * - at most RATE_LIMIT_WS_CONNECTIONS new connections per client address per window;
 * - at most WS_CONNECTIONS_PER_ADDRESS open at once per client address, since a rate alone
 *   lets one address pile sockets up until the process runs out of file descriptors;
 * - a socket without a live operation for WS_IDLE_TIMEOUT_MS is closed (1000: the
 *   graphql-ws client opens a new one when it next subscribes);
 * - a socket with more than WS_MAX_BUFFERED_BYTES queued for its client for
 *   WS_BACKLOG_GRACE_MS, or more than WS_MAX_BURST_BYTES at all, is cut, checked on every
 *   message the client sends and on every sweep.
 * A refused upgrade is an HTTP 429 before any socket is set up, with Retry-After and the
 * same RATE_LIMITED error a GraphQL response carries.
 */
export class WebSocketLimits {
  private readonly openPerAddress = new Map<string, number>();
  private readonly sockets = new Map<WebSocket, HeldSocket>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(private readonly app: App) {}

  /** Counts the server's sockets from their upgrade to their close, and closes idle ones. */
  watch(wsServer: WebSocketServer): void {
    const idleMs = this.app.config.WS_IDLE_TIMEOUT_MS;
    wsServer.on('connection', (socket, req) => {
      const address = this.addressOf(req);
      this.openPerAddress.set(address, (this.openPerAddress.get(address) ?? 0) + 1);
      const held: HeldSocket = { context: null, busyAtMs: Date.now() };
      this.sockets.set(socket, held);
      socket.on('message', () => cutIfBacklogged(socket, held));
      socket.once('close', () => {
        this.sockets.delete(socket);
        const open = this.openPerAddress.get(address)! - 1;
        if (open === 0) this.openPerAddress.delete(address);
        else this.openPerAddress.set(address, open);
      });
    });
    this.sweeper = setInterval(() => this.sweep(idleMs), SWEEP_INTERVAL_MS).unref();
  }

  /** graphql-ws's onConnect: the socket's operations tell whether it is idle. */
  connected(context: WsContext): void {
    const socket = (context.extra as { socket: WebSocket }).socket;
    const held = this.sockets.get(socket);
    if (held) held.context = context;
  }

  /**
   * graphql-ws's onSubscribe: an operation came. A query or a mutation is live only while it
   * runs, often between two sweeps, so a socket used for them alone would look idle, and be
   * closed the instant its next operation arrives: run, but unanswered.
   */
  operationArrived(context: WsContext): void {
    const held = this.sockets.get((context.extra as { socket: WebSocket }).socket);
    if (held) held.busyAtMs = Date.now();
  }

  stop(): void {
    clearInterval(this.sweeper);
  }

  /** The `verifyClient` of the graphql-ws server; undefined when neither limit is on. */
  verifyClient(): ((info: { req: IncomingMessage }, verdict: Verdict) => void) | undefined {
    const limiter = this.app.rateLimits.wsConnections;
    const perAddress = this.app.config.WS_CONNECTIONS_PER_ADDRESS;
    if (!limiter.enabled && perAddress === 0) return undefined;
    const refuse = (verdict: Verdict, limit: RateLimit, message: string, retryAfterMs: number) => {
      rateLimitedRequests.inc({ limit });
      const body = JSON.stringify({ errors: [rateLimited(message, retryAfterMs).toJSON()] });
      verdict(false, 429, body, { 'Content-Type': 'application/json', 'Retry-After': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) });
    };
    return ({ req }, verdict) => {
      const address = this.addressOf(req);
      const locale = localeOf(req.headers['accept-language']);
      if (perAddress > 0 && (this.openPerAddress.get(address) ?? 0) >= perAddress) {
        return refuse(verdict, 'ws-open', errorMessage('TOO_MANY_OPEN_CONNECTIONS', locale, { max: perAddress }), this.app.config.RATE_LIMIT_WINDOW_MS);
      }
      if (!limiter.enabled) return verdict(true);
      limiter.consume('ws-connection', address).then(
        ({ allowed, retryAfterMs }) => (allowed ? verdict(true) : refuse(verdict, 'ws-connection', errorMessage('TOO_MANY_NEW_CONNECTIONS', locale), retryAfterMs)),
        (error: unknown) => {
          logRepeating(this.app.log, 'warn', { err: error }, 'cannot count a new WebSocket connection; refusing it');
          verdict(false, 503, undefined, { 'Retry-After': '1' });
        },
      );
    };
  }

  private addressOf(req: IncomingMessage): string {
    return budgetOf(clientAddress(req, this.app.config.TRUST_PROXY));
  }

  private sweep(idleMs: number): void {
    const now = Date.now();
    for (const [socket, held] of this.sockets) {
      if (cutIfBacklogged(socket, held, now) || idleMs === 0) continue;
      if (held.context && Object.keys(held.context.subscriptions).length > 0) held.busyAtMs = now;
      else if (now - held.busyAtMs >= idleMs) socket.close(1000, 'idle: no live operation');
    }
  }
}

/** Cuts the socket when its client has not kept up (see WS_MAX_BUFFERED_BYTES); true if it did. */
export function cutIfBacklogged(socket: Pick<WebSocket, 'bufferedAmount' | 'terminate'>, held: HeldSocket, now = Date.now()): boolean {
  const queued = socket.bufferedAmount;
  if (queued <= WS_MAX_BUFFERED_BYTES) {
    held.backloggedSinceMs = undefined;
    return false;
  }
  held.backloggedSinceMs ??= now;
  if (queued <= WS_MAX_BURST_BYTES && now - held.backloggedSinceMs < WS_BACKLOG_GRACE_MS) return false;
  socket.terminate();
  return true;
}
