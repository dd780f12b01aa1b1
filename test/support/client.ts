import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { type ExecutionResult, print } from 'graphql';
import { createClient } from 'graphql-ws';
import { Agent, fetch } from 'undici';
import WebSocket from 'ws';
import { type As, tokenOf } from './tokens.ts';

/** A new token for each call: the benches sign their users with it. */

// Bounded so a storm of hundreds of requests queues in the client instead of
// overflowing the server's accept backlog.
const agent = new Agent({ connections: 256, pipelining: 1 });

export interface GraphqlResponse<T> {
  status: number;
  body: ExecutionResult<T> & { errors?: { message: string; extensions?: Record<string, unknown> }[] };
}

/** POST a typed document over HTTP. */
export async function gql<T, V>(url: string, document: TypedDocumentNode<T, V> | string, variables?: V, token?: string, headers: Record<string, string> = {}): Promise<GraphqlResponse<T>> {
  const response = await fetch(url, {
    method: 'POST',
    dispatcher: agent,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers },
    body: JSON.stringify({ query: typeof document === 'string' ? document : print(document), variables }),
  });
  return { status: response.status, body: (await response.json()) as GraphqlResponse<T>['body'] };
}

export function errorCodes(response: GraphqlResponse<unknown>): unknown[] {
  return (response.body.errors ?? []).map((error) => error.extensions?.code);
}

type GraphqlErrors = NonNullable<GraphqlResponse<unknown>['body']['errors']>;

/**
 * What became of one request in a storm that counts refusals instead of failing on them:
 * its result, its GraphQL errors, or (see `unlessCutOff`) no answer at all.
 */
export interface Attempt<R> {
  result?: R;
  errors?: GraphqlErrors;
  failed?: unknown;
}

/** The attempt, or `failed` when the request got no answer, as when its server is killed mid-storm. */
export async function unlessCutOff<R>(attempt: Promise<Attempt<R>>): Promise<Attempt<R>> {
  try {
    return await attempt;
  } catch (failed) {
    return { failed };
  }
}

/**
 * Requests to one server as one user at a time, signed from the shared token cache: what
 * every flow's client (`teamsAt`, `redPacketsAt`, `lotteryAt`, `pointsAt`) is built on.
 */
export function requestsAt(url: string) {
  /** The whole response, errors included; anonymous without `user`. */
  const raw = async <T, V>(document: TypedDocumentNode<T, V> | string, variables: V, user?: string, as: As = {}): Promise<GraphqlResponse<T>> =>
    gql(url, document, variables, user === undefined ? undefined : await tokenOf(user, as));
  return {
    raw,
    /** The data; fails loudly on errors. */
    async data<T, V>(document: TypedDocumentNode<T, V>, variables: V, user: string, as: As = {}): Promise<T> {
      const { body } = await raw(document, variables, user, as);
      if (body.errors?.length || !body.data) throw new Error(`GraphQL errors: ${JSON.stringify(body.errors)}`);
      return body.data;
    },
    /** The result of `field`, or the errors instead of throwing them. */
    async attempt<T, V, K extends keyof T>(document: TypedDocumentNode<T, V>, variables: V, field: K, user: string): Promise<Attempt<T[K]>> {
      const { body } = await raw(document, variables, user);
      return body.errors?.length || !body.data ? { errors: body.errors } : { result: body.data[field] };
    },
  };
}

/** A live subscription that collects every event, over SSE or graphql-ws. */
export interface Subscription<T> {
  events: ExecutionResult<T>[];
  /** When each event arrived (`performance.now()`), index for index: latencies are measured against it. */
  receivedAt: number[];
  /** Resolves once `predicate` holds for the events received so far. */
  until(predicate: (events: ExecutionResult<T>[]) => boolean, timeoutMs?: number): Promise<ExecutionResult<T>[]>;
  /** True once the server completed the stream (graphql-ws `complete`, or the SSE response ended). */
  completed(): boolean;
  close(): void;
}

/** Events of one subscription, with a way to wait for them and for its completion. */
export function collector<T>(): Pick<Subscription<T>, 'events' | 'receivedAt' | 'until' | 'completed'> & { push(event: ExecutionResult<T>): void; complete(): void } {
  const events: ExecutionResult<T>[] = [];
  const receivedAt: number[] = [];
  const waiters = new Set<() => void>();
  let completed = false;
  return {
    events,
    receivedAt,
    push(event) {
      events.push(event);
      receivedAt.push(performance.now());
      for (const wake of waiters) wake();
    },
    complete() {
      completed = true;
      for (const wake of waiters) wake();
    },
    completed: () => completed,
    until(predicate, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (predicate(events)) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(events);
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out; events so far: ${JSON.stringify(events)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}

/** Subscribes over Server-Sent Events, Yoga's default transport for the web. */
export function subscribeSse<T, V>(url: string, document: TypedDocumentNode<T, V>, variables: V, token?: string): Subscription<T> {
  const { push, complete, ...received } = collector<T>();
  const abort = new AbortController();
  void (async () => {
    const response = await fetch(url, {
      method: 'POST',
      signal: abort.signal,
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query: print(document), variables }),
    });
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of response.body!) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      for (let boundary = buffer.indexOf('\n\n'); boundary >= 0; boundary = buffer.indexOf('\n\n')) {
        const message = buffer.slice(0, boundary);
        buffer = buffer.slice(boundary + 2);
        const data = message
          .split('\n')
          .filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(5).trim())
          .join('\n');
        if (data) push(JSON.parse(data) as ExecutionResult<T>);
      }
    }
    complete();
  })().catch(() => undefined);
  return { ...received, close: () => abort.abort() };
}

/** One operation over graphql-ws: `query` text, or `query: ''` and the `documentId` of a persisted document. */
export interface WsPayload {
  query: string;
  documentId?: string;
  variables?: Record<string, unknown>;
  extensions?: Record<string, unknown>;
}

/** A graphql-ws socket (opened by the first operation) carrying any number of operations. */
export interface WsConnection {
  subscribe<T>(payload: WsPayload): Subscription<T>;
  /** Close codes of the socket so far. */
  closeCodes: number[];
  /** When each close came (`performance.now()`), index for index. */
  closedAt: number[];
  dispose(): void;
}

export function openWs(url: string, connectionParams: Record<string, unknown> = {}): WsConnection {
  const closeCodes: number[] = [];
  const closedAt: number[] = [];
  const client = createClient({
    url: url.replace(/^http/, 'ws'),
    webSocketImpl: WebSocket,
    connectionParams,
    retryAttempts: 0,
    lazy: true,
    on: {
      closed: (event) => {
        closeCodes.push((event as { code: number }).code);
        closedAt.push(performance.now());
      },
    },
  });
  return {
    closeCodes,
    closedAt,
    subscribe<T>(payload: WsPayload) {
      const { push, complete, ...received } = collector<T>();
      const dispose = client.subscribe<T>(payload, {
        next: (event) => push(event as ExecutionResult<T>),
        error: (error) => push({ errors: Array.isArray(error) ? error : [{ message: String((error as Error).message ?? error) }] } as ExecutionResult<T>),
        complete,
      });
      return { ...received, close: dispose };
    },
    dispose: () => void client.dispose(),
  };
}

/** Subscribes over graphql-ws, the transport mini-programs use, on a socket of its own. */
export function subscribeWs<T, V>(url: string, document: TypedDocumentNode<T, V>, variables: V, token?: string): Subscription<T> {
  const connection = openWs(url, token ? { authorization: `Bearer ${token}` } : {});
  const subscription = connection.subscribe<T>({ query: print(document), variables: variables as Record<string, unknown> });
  return {
    ...subscription,
    close: () => {
      subscription.close();
      connection.dispose();
    },
  };
}
