import { useRef } from 'preact/hooks';

/**
 * A fresh requestId: 128 random bits in hex. Not crypto.randomUUID, which browsers offer
 * only to secure pages, and a phone trying the app over plain HTTP at a LAN address is not one.
 */
function newRequestId(): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('');
}

/**
 * One requestId per user intent (this packet, this goods item, a draw here). A tap again
 * after an answer that never came (offline, a reset connection, a 5xx) may follow an action
 * the server committed: it goes under the same requestId, which the server acts on once.
 * Once the server has answered (the result, or a typed Problem it may remember with the
 * id), the next tap is a new intent with a new requestId.
 */
export function useOncePerIntent(): <Answer>(intent: string, send: (requestId: string) => Promise<Answer>) => Promise<Answer> {
  const unanswered = useRef(new Map<string, string>());
  return async (intent, send) => {
    const requestId = unanswered.current.get(intent) ?? newRequestId();
    unanswered.current.set(intent, requestId);
    // request() throws for every outcome it cannot tell: the id is kept for the retry.
    const answer = await send(requestId);
    unanswered.current.delete(intent);
    return answer;
  };
}
