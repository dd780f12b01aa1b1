import type { IncomingMessage, ServerResponse } from 'node:http';
import type { App } from './app.ts';
import { closeSoonUnlessComplete } from './guards/bodySize.ts';
import { paymentNotifies } from './infra/metrics.ts';

export const NOTIFY_PATH = '/payments/notify';
const MAX_NOTIFY_BYTES = 64 * 1024;

class BodyTooLarge extends Error {}

/**
 * The raw bytes, as signed: the signature covers them exactly, not a re-serialization.
 * Reading stops at the first byte over the limit: the endpoint needs no sign-in, and a body
 * read to its end would let anyone stream gigabytes.
 */
function readRawBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const take = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_NOTIFY_BYTES) return void chunks.push(chunk);
      req.off('data', take);
      req.pause();
      reject(new BodyTooLarge());
    };
    req.on('data', take);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

function answer(res: ServerResponse, status: number, body: unknown): void {
  paymentNotifies.inc({ status });
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

/**
 * POST /payments/notify, the payment provider's call. 2xx once the outcome is durable; 4xx
 * for a notify refused (nothing changed, retrying it changes nothing); 503 when the outcome
 * could not be made durable now (the provider retries, and the retry is safe).
 */
export async function servePaymentNotify(app: App, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (req.method !== 'POST') {
    res.setHeader('allow', 'POST');
    answer(res, 405, { error: 'POST only' });
    return;
  }
  let raw: Buffer;
  try {
    raw = await readRawBody(req);
  } catch (error) {
    if (error instanceof BodyTooLarge) {
      answer(res, 413, { error: 'the notify is too large' });
      closeSoonUnlessComplete(req);
    }
    return;
  }
  try {
    const { status, body } = await app.payments.notify(raw, (name) => {
      const value = req.headers[name];
      return Array.isArray(value) ? value[0] : value;
    });
    answer(res, status, body);
  } catch (error) {
    app.log.error({ err: error }, 'a payment notify could not be settled; the provider will retry');
    answer(res, 503, { error: 'try again' });
  }
}
