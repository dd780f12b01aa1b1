import type { Plugin } from 'graphql-yoga';
import type { Context } from '../context.ts';
import { ErrorCode, graphqlError } from '../errors.ts';
import { type Locale, errorMessage } from '../i18n/messages.ts';

function tooMany(limit: number, per: 'user' | 'connection', locale: Locale) {
  return graphqlError(ErrorCode.rateLimited, errorMessage(per === 'user' ? 'TOO_MANY_SUBSCRIPTIONS_OF_USER' : 'TOO_MANY_SUBSCRIPTIONS_ON_SOCKET', locale, { limit }), { limit });
}

/** The stream, calling `release` once when it ends: done, failed, or closed by return() (at once, not after the source's next event). */
function releasingAtEnd<T>(source: AsyncIterable<T>, release: () => void): AsyncIterableIterator<T> {
  const iterator = source[Symbol.asyncIterator]();
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    next: () =>
      iterator.next().then(
        (item) => {
          if (item.done) release();
          return item;
        },
        (error: unknown) => {
          release();
          throw error;
        },
      ),
    return: (value?: unknown) => {
      release();
      return iterator.return?.(value) ?? Promise.resolve({ done: true, value: undefined });
    },
    throw: (error?: unknown) => {
      release();
      return iterator.throw?.(error) ?? Promise.reject(error);
    },
  };
}

/**
 * At most `perUser` live subscriptions per signed-in user on this instance (SSE and
 * graphql-ws together) and `perSocket` per graphql-ws connection; 0 turns a limit off.
 * A slot is taken before the subscription starts and given back when it ends however it
 * ends: completed by the client, its socket or request closed, refused, or failed.
 */
export function useSubscriptionLimits(perUser: number, perSocket: number): Plugin<Context> {
  const byUser = new Map<string, number>();
  // graphql-ws passes its socket in the initial context (src/server.ts).
  const bySocket = new WeakMap<object, number>();
  return {
    onSubscribe({ args, subscribeFn, setSubscribeFn, setResultAndStopExecution }) {
      const context = args.contextValue as Context & { socket?: object };
      const user = perUser > 0 ? context.viewer?.userId : undefined;
      const socket = perSocket > 0 ? context.socket : undefined;
      if (user !== undefined && (byUser.get(user) ?? 0) >= perUser) return setResultAndStopExecution({ errors: [tooMany(perUser, 'user', context.locale)] });
      if (socket !== undefined && (bySocket.get(socket) ?? 0) >= perSocket) return setResultAndStopExecution({ errors: [tooMany(perSocket, 'connection', context.locale)] });
      if (user === undefined && socket === undefined) return;

      if (user !== undefined) byUser.set(user, (byUser.get(user) ?? 0) + 1);
      if (socket !== undefined) bySocket.set(socket, (bySocket.get(socket) ?? 0) + 1);
      let held = true;
      const release = () => {
        if (!held) return;
        held = false;
        if (user !== undefined) {
          const left = byUser.get(user)! - 1;
          if (left > 0) byUser.set(user, left);
          else byUser.delete(user);
        }
        if (socket !== undefined) bySocket.set(socket, bySocket.get(socket)! - 1);
      };
      setSubscribeFn(async (subscribeArgs) => {
        try {
          const result = await subscribeFn(subscribeArgs);
          return Symbol.asyncIterator in result ? releasingAtEnd(result, release) : result;
        } catch (error) {
          release();
          throw error;
        }
      });
      return {
        // Not a stream: an error, or a later plugin refused it; it never started.
        onSubscribeResult: ({ result }) => {
          if (!(Symbol.asyncIterator in result)) release();
        },
      };
    },
  };
}
