import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';

/** What a provider's notify says about one payment, once authenticated and read. */
export interface PaymentNotice {
  paymentRef: string;
  amountCents: number;
  status: 'SUCCEEDED' | 'FAILED';
  providerTxnId: string;
}

/** What a client needs to pay: the reference the server minted, the amount, and until when. */
export interface PaymentIntent {
  paymentRef: string;
  amountCents: number;
  expiresAt: string;
}

/** A notify refused before anything changed: answered with `status` (4xx). */
export class NotifyRefused extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The payment provider, as the server sees it: one small interface, so a real provider
 * (WeChat Pay, Stripe…) plugs in beside the signed-notify one (docs/payments.md).
 */
export interface PaymentProvider {
  /** Authenticates a notify and reads it, or throws NotifyRefused: nothing may change then. */
  verifyNotify(rawBody: Buffer, header: (name: string) => string | undefined, nowMs: number): PaymentNotice;
  /** What the client is given to pay a payment the server recorded. */
  describeIntent(payment: { paymentRef: string; amountCents: number; expiresAt: Date }): PaymentIntent;
}

export const SIGNATURE_HEADER = 'payment-signature';
/** A signature older (or further ahead) than this is refused: a replayed notify. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

const notice = z.object({
  paymentRef: z.string().min(1).max(128),
  amountCents: z.number().int().positive(),
  status: z.enum(['SUCCEEDED', 'FAILED']),
  providerTxnId: z.string().min(1).max(128),
});

const hmac = (secret: string, timestamp: string, rawBody: Buffer) => createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest();

/** `Payment-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`. */
export function signNotify(secret: string, rawBody: Buffer, nowMs: number): string {
  const timestamp = String(Math.floor(nowMs / 1000));
  return `t=${timestamp},v1=${hmac(secret, timestamp, rawBody).toString('hex')}`;
}

/**
 * The provider this server speaks natively: a JSON notify signed with HMAC-SHA256 under
 * PAYMENT_WEBHOOK_SECRET, its timestamp inside the signature so a replay is refused once stale.
 */
export class SignedNotifyProvider implements PaymentProvider {
  constructor(private readonly secret: string) {}

  verifyNotify(rawBody: Buffer, header: (name: string) => string | undefined, nowMs: number): PaymentNotice {
    const parts = new Map<string, string>();
    for (const part of (header(SIGNATURE_HEADER) ?? '').split(',')) {
      const at = part.indexOf('=');
      if (at > 0) parts.set(part.slice(0, at).trim(), part.slice(at + 1).trim());
    }
    const timestamp = parts.get('t');
    const given = parts.get('v1');
    if (!timestamp || !/^\d{1,12}$/.test(timestamp) || !given || !/^[0-9a-f]{64}$/i.test(given)) throw new NotifyRefused(401, 'missing or malformed Payment-Signature');
    if (Math.abs(nowMs / 1000 - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) throw new NotifyRefused(401, 'stale Payment-Signature');
    if (!timingSafeEqual(Buffer.from(given, 'hex'), hmac(this.secret, timestamp, rawBody))) throw new NotifyRefused(401, 'bad Payment-Signature');
    let body: unknown;
    try {
      body = JSON.parse(rawBody.toString('utf8'));
    } catch {
      throw new NotifyRefused(400, 'the body is not JSON');
    }
    const parsed = notice.safeParse(body);
    if (!parsed.success) throw new NotifyRefused(400, `malformed notify: ${z.prettifyError(parsed.error)}`);
    return parsed.data;
  }

  describeIntent({ paymentRef, amountCents, expiresAt }: { paymentRef: string; amountCents: number; expiresAt: Date }): PaymentIntent {
    return { paymentRef, amountCents, expiresAt: expiresAt.toISOString() };
  }
}
