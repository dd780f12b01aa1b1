import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { type DocumentNode, print } from 'graphql';
import { type Client, type SubscribePayload, createClient } from 'graphql-ws';
import { currentSession, endSession } from './session.ts';

const GRAPHQL_PATH = '/graphql';
/** The answer of a server that cannot run a documentId (persisted documents off, or another build's): the text is sent instead. */
const PERSISTED_QUERY_NOT_FOUND = 'PERSISTED_QUERY_NOT_FOUND';

/** One invalid input of a BAD_USER_INPUT error (extensions.issues): where it is and what is wrong, in the app's language. */
export type InputIssue = { path?: (string | number)[]; message: string };

type GraphqlError = { message: string; extensions?: { code?: unknown; reason?: unknown; issues?: unknown } };

export class ApiError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
    readonly issues: InputIssue[] = [],
    /** UNAUTHENTICATED's extensions.reason (EXPIRED, BAD_SIGNATURE…), when the server gave one. */
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** The app's language, whatever the device's: the server's problems come back in the language of the app around them. */
const APP_LANGUAGE = 'zh-CN';

/** What a request that never reached the server (offline, server down) says, and its code. */
export const NETWORK_PROBLEM = '网络连接失败，请检查网络后重试';
export const NETWORK = 'NETWORK';

function headers(token = currentSession()?.token): Record<string, string> {
  return { 'content-type': 'application/json', 'accept-language': APP_LANGUAGE, ...(token ? { authorization: `Bearer ${token}` } : {}) };
}

/**
 * What names the operation: the sha256 codegen put in the document (codegen.yml,
 * persistedDocuments), which the server looks up in the same build's manifest, or the text.
 * graphql-ws insists on a `query` string, hence the empty one beside a documentId.
 */
function operation(document: DocumentNode, variables: unknown, asText = false): SubscribePayload & { documentId?: string } {
  const documentId = (document as { __meta__?: { hash?: string } }).__meta__?.hash;
  const vars = variables as Record<string, unknown>;
  return documentId && !asText ? { query: '', documentId, variables: vars } : { query: print(document), variables: vars };
}

const codeOf = (error: GraphqlError | undefined) => (typeof error?.extensions?.code === 'string' ? error.extensions.code : undefined);

/** What a SERVICE_UNAVAILABLE says here, in the shop's own words, whichever language the browser asked the server for. */
export const UNAVAILABLE_PROBLEM = '服务繁忙，请稍后重试';

/**
 * An ApiError for the first GraphQL error; a refused token (expired, say) ends the session, so
 * the user signs in again, unless the token was one being tried (`ofSession` false).
 */
function apiError(error: GraphqlError | undefined, fallback: string, ofSession = true): ApiError {
  const code = codeOf(error);
  const reason = typeof error?.extensions?.reason === 'string' ? error.extensions.reason : undefined;
  if (code === 'UNAUTHENTICATED' && ofSession && currentSession()) endSession(reason ?? '');
  const issues = Array.isArray(error?.extensions?.issues) ? (error.extensions.issues as InputIssue[]) : [];
  return new ApiError(code === 'SERVICE_UNAVAILABLE' ? UNAVAILABLE_PROBLEM : (error?.message ?? fallback), code, issues, reason);
}

async function post<Result>(payload: SubscribePayload, token?: string): Promise<{ status: number; data?: Result; errors?: GraphqlError[] }> {
  const { query, ...rest } = payload;
  let response: Response;
  try {
    response = await fetch(GRAPHQL_PATH, { method: 'POST', headers: headers(token), body: JSON.stringify(query ? payload : rest) });
  } catch {
    // fetch rejects only when no answer came at all: "Failed to fetch" means nothing to a user.
    throw new ApiError(NETWORK_PROBLEM, NETWORK);
  }
  try {
    return { status: response.status, ...((await response.json()) as { data?: Result; errors?: GraphqlError[] }) };
  } catch {
    // A proxy's error page, or a body cut off: no GraphQL answer to read.
    throw new ApiError(`服务器暂时无法响应（HTTP ${response.status}），请稍后重试`, NETWORK);
  }
}

/**
 * One query or mutation over HTTP; GraphQL errors become an ApiError carrying extensions.code.
 * `token` sends a token being tried (at sign-in) instead of the session's.
 */
export async function request<Result, Variables>(document: TypedDocumentNode<Result, Variables>, variables: Variables, token?: string): Promise<Result> {
  let answer = await post<Result>(operation(document, variables), token);
  if (codeOf(answer.errors?.[0]) === PERSISTED_QUERY_NOT_FOUND) answer = await post<Result>(operation(document, variables, true), token);
  const error = answer.errors?.[0];
  if (error || !answer.data) throw apiError(error, `服务器暂时无法响应（HTTP ${answer.status}），请稍后重试`, token === undefined);
  return answer.data;
}

let socket: { client: Client; token: string | undefined } | null = null;

/**
 * Whether the live updates are interrupted: a page subscribes, and the socket is closed (and
 * being retried) or the device is offline. The pages say so; what they show may be stale.
 */
const live = {
  subscriptions: 0,
  /** idle: not yet connected, or closed with no subscription left (graphql-ws is lazy); closed: lost while subscribed. */
  socket: 'idle' as 'idle' | 'open' | 'closed',
  listeners: new Set<(down: boolean) => void>(),
  down: false,
};

function updateLive(): void {
  const down = live.subscriptions > 0 && (live.socket === 'closed' || !navigator.onLine);
  if (down === live.down) return;
  live.down = down;
  for (const listener of live.listeners) listener(down);
}

/** Calls `listener` with whether the live updates are interrupted, now and on every change; returns the unsubscribe. */
export function watchLiveConnection(listener: (down: boolean) => void): () => void {
  live.listeners.add(listener);
  listener(live.down);
  return () => live.listeners.delete(listener);
}

addEventListener('offline', updateLive);
addEventListener('online', updateLive);

/** The longest wait between two reconnects to a server that is down. */
const RETRY_WAIT_MAX_MS = 10_000;

/**
 * A ping every KEEPALIVE_MS; a socket whose pong does not come within PONG_TIMEOUT_MS is
 * half dead (a phone that changed networks, a proxy that dropped it, no close event ever):
 * it is terminated and retried, and the page says the live updates are interrupted meanwhile.
 */
const KEEPALIVE_MS = 5_000;
const PONG_TIMEOUT_MS = 3_000;

/** One graphql-ws connection per signed-in user, opened on the first subscription. */
function socketClient(): Client {
  const token = currentSession()?.token;
  const open = socket;
  if (open && open.token === token) return open.client;
  open?.client.dispose();
  const url = `${location.protocol === 'https:' ? 'wss' : 'ws'}://${location.host}${GRAPHQL_PATH}`;
  // Retried whatever ended the socket: by default graphql-ws gives up on the first failed
  // reconnect while the server is down (the browser reports an error event, not a close),
  // and the page would stay stale until reloaded. The wait doubles up to RETRY_WAIT_MAX_MS.
  const client = createClient({
    url,
    lazy: true,
    retryAttempts: Number.POSITIVE_INFINITY,
    shouldRetry: () => true,
    retryWait: (retries) => new Promise((resolve) => setTimeout(resolve, Math.min(RETRY_WAIT_MAX_MS, 500 * 2 ** retries) * (0.5 + Math.random() / 2))),
    connectionParams: () => headers(),
    keepAlive: KEEPALIVE_MS,
  });
  // The socket a ping went out on: its pong is awaited, not the next socket's.
  let connected: unknown;
  let pongDue: ReturnType<typeof setTimeout> | undefined;
  client.on('ping', (received) => {
    if (received) return;
    const pinged = connected;
    clearTimeout(pongDue);
    // terminate() retries at once: close() would wait for a closing handshake a dead connection never completes.
    pongDue = setTimeout(() => connected === pinged && client.terminate(), PONG_TIMEOUT_MS);
  });
  client.on('pong', (received) => {
    if (received) clearTimeout(pongDue);
  });
  // A disposed client's events (the user changed) say nothing about the current one.
  client.on('connected', (opened) => {
    connected = opened;
    if (socket?.client !== client) return;
    live.socket = 'open';
    updateLive();
  });
  client.on('closed', () => {
    connected = undefined;
    clearTimeout(pongDue);
    if (socket?.client !== client) return;
    live.socket = live.subscriptions > 0 ? 'closed' : 'idle';
    updateLive();
  });
  socket = { client, token };
  live.socket = 'idle';
  return client;
}

/** Every event of a subscription until it completes or the returned function is called. */
export function subscribe<Result, Variables>(
  document: TypedDocumentNode<Result, Variables>,
  variables: Variables,
  onData: (data: Result) => void,
  onError: (error: ApiError) => void,
): () => void {
  // Counted while it runs: the socket being down matters only while some page subscribes.
  let running = true;
  const finish = () => {
    if (!running) return;
    running = false;
    live.subscriptions--;
    updateLive();
  };
  live.subscriptions++;
  const start = (asText: boolean): (() => void) =>
    socketClient().subscribe<Result>(operation(document, variables, asText), {
      next: (event) => {
        if (event.data) onData(event.data);
        else if (event.errors?.[0]) onError(apiError(event.errors[0], ''));
      },
      // The server refuses an operation with its GraphQL errors; anything else is the socket failing.
      error: (error) => {
        const refusal = Array.isArray(error) ? (error[0] as GraphqlError | undefined) : undefined;
        if (!asText && codeOf(refusal) === PERSISTED_QUERY_NOT_FOUND) {
          stop = start(true);
          return;
        }
        finish();
        onError(refusal ? apiError(refusal, '') : new ApiError('实时连接已断开，请刷新页面', NETWORK));
      },
      complete: finish,
    });
  let stop = start(false);
  updateLive();
  return () => {
    finish();
    stop();
  };
}

/** The offset of the server's clock from this device's, so countdowns agree with the server. */
export function serverOffsetMs(serverTime: string): number {
  return Date.parse(serverTime) - Date.now();
}
