/*
 * Webhook signatures in the one format this service speaks both ways (the payment
 * provider's notify in, refunds out): `t=<unix seconds>,v1=<hex HMAC-SHA256 of
 * "<t>.<raw body>">`. The timestamp is signed with the body, so a receiver can refuse a
 * replay of an old request by its age.
 */
import { createHmac } from 'node:crypto';

/** The signature header's value for `body`, signed now (or at `nowSeconds`). */
export function signatureHeader(secret: string, body: string, nowSeconds = Math.floor(Date.now() / 1000)): string {
  const v1 = createHmac('sha256', secret).update(`${nowSeconds}.${body}`).digest('hex');
  return `t=${nowSeconds},v1=${v1}`;
}
