import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received<Body> {
  /** The Idempotency-Key header. */
  key: string;
  body: Body;
  /** The body as it came, for checking a signature over it. */
  raw: string;
  headers: IncomingMessage['headers'];
  atMs: number;
}

/** How the receiver answers a request: 200, 503, 200 after `slowMs`, or never. */
export type Verdict = 'ok' | 'fail' | 'slow' | 'hang';

/** A webhook on 127.0.0.1 whose answers the test decides, by Idempotency-Key and attempt (1 for the first). */
export class WebhookReceiver<Body> {
  readonly requests: Received<Body>[] = [];
  answer: (key: string, nth: number) => Verdict = () => 'ok';
  slowMs = 300;
  private readonly hanging: ServerResponse[] = [];
  private readonly server: Server = createServer((request, response) => void this.receive(request, response));

  async start(path = '/hook'): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}${path}`;
  }

  of(key: string): Received<Body>[] {
    return this.requests.filter((request) => request.key === key);
  }

  /** Answers the requests held so far ('hang') as `verdict` would have. */
  answerHanging(verdict: 'ok' | 'fail'): void {
    for (const response of this.hanging.splice(0)) response.writeHead(statusOf(verdict)).end();
  }

  async close(): Promise<void> {
    for (const response of this.hanging) response.destroy();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  private async receive(request: IncomingMessage, response: ServerResponse): Promise<void> {
    let raw = '';
    for await (const chunk of request) raw += chunk;
    const key = String(request.headers['idempotency-key']);
    this.requests.push({ key, body: JSON.parse(raw) as Body, raw, headers: request.headers, atMs: Date.now() });
    const verdict = this.answer(key, this.of(key).length);
    if (verdict === 'hang') this.hanging.push(response);
    else if (verdict === 'slow') setTimeout(() => response.writeHead(200).end(), this.slowMs);
    else response.writeHead(statusOf(verdict)).end();
  }
}

const statusOf = (verdict: 'ok' | 'fail') => (verdict === 'ok' ? 200 : 503);
