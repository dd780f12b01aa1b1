import type { ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { type Context, unauthenticated } from '../context.ts';
import { AuthFailure } from '../infra/auth/tokens.ts';

/** setTimeout's longest delay; a longer one fires at once. JWT_MAX_LIFETIME_SECONDS may allow more. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

/**
 * The stream until `endsAtMs`; then `last` as its final event, and the source is closed
 * (its return(), so what holds a slot for it gives the slot back).
 */
function endingAt<T>(source: AsyncIterable<T>, endsAtMs: number, last: () => T): AsyncIterableIterator<T> {
  const iterator = source[Symbol.asyncIterator]();
  let expired = false;
  let closed = false;
  // Wakes the next() waiting for an event. Each call races a promise of its own: one
  // long-lived promise raced by every call would hold each event it lost to until exp.
  let wake: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;
  const arm = () => {
    const left = endsAtMs - Date.now();
    if (left > 0) {
      timer = setTimeout(arm, Math.min(left, LONGEST_TIMER_MS)).unref();
      return;
    }
    expired = true;
    wake?.();
  };
  arm();
  const finish = () => {
    clearTimeout(timer);
    closed = true;
  };
  const close = (value?: unknown) => {
    finish();
    return iterator.return?.(value) ?? Promise.resolve({ done: true as const, value: undefined });
  };
  const expiry = () => new Promise<'expired'>((resolve) => (wake = () => resolve('expired')));
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next(): Promise<IteratorResult<T>> {
      if (closed) return { done: true, value: undefined };
      let item: IteratorResult<T> | 'expired';
      try {
        item = expired ? 'expired' : await Promise.race([expiry(), iterator.next()]);
      } catch (error) {
        finish();
        throw error;
      } finally {
        wake = undefined;
      }
      if (item === 'expired') {
        // The source's own end is no concern of the client's any more.
        close().catch(() => undefined);
        return { done: false, value: last() };
      }
      if (item.done) finish();
      return item;
    },
    return: close,
    throw: (error?: unknown) => {
      finish();
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
