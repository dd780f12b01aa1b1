import type { ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { type Context, unauthenticated } from '../context.ts';
import { AuthFailure } from '../infra/auth/tokens.ts';

/** setTimeout's longest delay; a longer one fires at once. JWT_MAX_LIFETIME_SECONDS may allow more. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/** Resolves at `atMs` (wall clock), however far off; `cancel` stops the timer. */
function alarm(atMs: number): { rung: Promise<void>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const rung = new Promise<void>((ring) => {
    const arm = () => {
      const left = atMs - Date.now();
      if (left <= 0) ring();
      else timer = setTimeout(arm, Math.min(left, LONGEST_TIMER_MS));
    };
    arm();
  });
  return { rung, cancel: () => clearTimeout(timer) };
}

/**
 * The stream until `endsAtMs`; then `last` as its final event, and the source is closed
 * (its return(), so what holds a slot for it gives the slot back).
 */
function endingAt<T>(source: AsyncIterable<T>, endsAtMs: number, last: () => T): AsyncIterableIterator<T> {
  const iterator = source[Symbol.asyncIterator]();
  const expiry = alarm(endsAtMs);
  const ended = expiry.rung.then(() => 'ended' as const);
  let closed = false;
  const close = (value?: unknown) => {
    expiry.cancel();
    closed = true;
    return iterator.return?.(value) ?? Promise.resolve({ done: true as const, value: undefined });
  };
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next(): Promise<IteratorResult<T>> {
      if (closed) return { done: true, value: undefined };
      // The expiry first: when both are settled already, the token's end wins.
      const item = await Promise.race([ended, iterator.next()]);
      if (item === 'ended') {
        void close();
        return { done: false, value: last() };
      }
      if (item.done) expiry.cancel();
      return item;
    },
    return: close,
    throw: (error?: unknown) => {
      expiry.cancel();
      closed = true;
      return iterator.throw?.(error) ?? Promise.reject(error);
    },
  };
}

/**
 * Ends a signed-in subscription when the token it was started with expires: its last event
 * is UNAUTHENTICATED with reason EXPIRED, as the token would now be answered, and the
 * client subscribes again with a fresh one. A stream must not outlive the right to read it.
 */
export function useTokenExpiry(): Plugin<Context> {
  return {
    onSubscribe({ args }) {
      const { viewer, locale } = args.contextValue as Context;
      const endsAtMs = viewer?.expiresAtMs;
      if (endsAtMs === undefined) return;
      return {
        onSubscribeResult({ result, setResult }) {
          if (!(Symbol.asyncIterator in result)) return;
          const expired = (): ExecutionResult => ({ errors: [unauthenticated(AuthFailure.expired, 'TOKEN_EXPIRED', locale)] });
          setResult(endingAt(result, endsAtMs, expired));
        },
      };
    },
  };
}
