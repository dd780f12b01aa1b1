import { signNotify } from '../../src/domain/payments/provider.ts';

/** The notify secret of the servers the tests start (test/support/env.ts). */
export const TEST_PAYMENT_SECRET = 'test-payment-webhook-secret-of-32-characters-at-least';

export interface NotifyBody {
  paymentRef: string;
  amountCents: number;
  status: 'SUCCEEDED' | 'FAILED';
  providerTxnId: string;
}

export interface NotifyOptions {
  /** Sign with another secret. */
  secret?: string;
  /** Sign as of this time (ms), for stale signatures. */
  signedAtMs?: number;
  /** Send this header instead of a signature. */
  signature?: string | null;
  /** Send this X-Request-Id. */
  requestId?: string;
}

/** The notify endpoint of the server whose GraphQL endpoint is `graphqlUrl`. */
export const notifyUrl = (graphqlUrl: string) => new URL('/payments/notify', graphqlUrl).toString();

/** POSTs a notify as the provider would: `body` as given (an object is JSON-encoded), signed unless told otherwise. */
export async function sendNotify(
  graphqlUrl: string,
  body: NotifyBody | Record<string, unknown> | string,
  options: NotifyOptions = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const raw = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const signature = options.signature === undefined ? signNotify(options.secret ?? TEST_PAYMENT_SECRET, raw, options.signedAtMs ?? Date.now()) : options.signature;
  const response = await fetch(notifyUrl(graphqlUrl), {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(signature === null ? {} : { 'payment-signature': signature }),
      ...(options.requestId ? { 'x-request-id': options.requestId } : {}),
    },
    body: raw,
  });
  const text = await response.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: response.status, body: parsed };
}
