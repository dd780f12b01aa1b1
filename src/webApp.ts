/*
 * The web app (web/, built into dist/web by `npm run build:web`, which `npm start` runs)
 * served by this server at /app/: same origin as /graphql, so it needs no CORS and no CDN.
 * In development it also mints tokens for any name (POST /app/dev-token): production
 * takes tokens from the shop's own login only.
 */
import { existsSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import sirv from 'sirv';
import { z } from 'zod';
import type { Config } from './config.ts';
import { isLoopback } from './guards/clientAddress.ts';
import { signLocalToken } from './infra/auth/devTokens.ts';
import { projectFile } from './projectFiles.ts';

export const WEB_APP_PATH = '/app';
const DIST = projectFile('dist', 'web');
const DEV_TOKEN_BODY_MAX = 1024;

const devTokenRequest = z.object({
  name: z
    .string()
    .trim()
    .min(1)
    .max(64)
    .regex(/^[\p{L}\p{N}_.-]+$/u),
  operator: z.boolean().default(false),
});

// Everything the page loads comes from this server; its live updates from its WebSocket.
const SECURITY_HEADERS = {
  // base-uri and form-action do not fall back to default-src: without them an injected
  // <base> or <form> could point the page's relative URLs or a submit elsewhere.
  'content-security-policy': "default-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
};

function answer(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', ...SECURITY_HEADERS }).end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<string | null> {
  let body = '';
  for await (const chunk of req) {
    body += chunk;
    if (body.length > DEV_TOKEN_BODY_MAX) return null;
  }
  return body;
}

/** Headers a reverse proxy adds when it relays someone's request. */
const PROXY_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip'];

/**
 * Whether a request comes from a browser on this machine, addressing it as such: from
 * loopback, naming localhost or a loopback address. A page whose domain was re-pointed at
 * 127.0.0.1 (DNS rebinding) also comes from loopback, same-origin, but names its own domain;
 * a proxy on this machine relays anyone from loopback, but says so in its headers.
 */
function fromThisMachinesBrowser(req: IncomingMessage): boolean {
  if (!isLoopback(req.socket.remoteAddress) || PROXY_HEADERS.some((name) => req.headers[name] !== undefined)) return false;
  let host: string;
  try {
    host = new URL(`http://${req.headers.host ?? ''}`).hostname.replace(/^\[(.*)\]$/, '$1');
  } catch {
    return false;
  }
  return host === 'localhost' || host.endsWith('.localhost') || isLoopback(host);
}

async function mintDevToken(config: Config, req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (!config.devTokens) return answer(res, 404, { error: 'this server mints no development tokens (DEV_TOKENS)' });
  // On by default only for a fresh clone's own browser: the server listens on every
  // interface, and anyone on the network could otherwise mint an operator's token.
  if (config.DEV_TOKENS !== '1' && !fromThisMachinesBrowser(req)) {
    return answer(res, 403, { error: 'development tokens are minted for a browser on this machine, at localhost or 127.0.0.1, only; set DEV_TOKENS=1 to mint them for others' });
  }
  const body = await readBody(req);
  let parsed: z.ZodSafeParseResult<z.infer<typeof devTokenRequest>> | null = null;
  try {
    parsed = body === null ? null : devTokenRequest.safeParse(JSON.parse(body));
  } catch {
    parsed = null;
  }
  if (!parsed?.success) return answer(res, 400, { error: 'send {"name": 1 to 64 letters, digits, "_", "-" or ".", "operator": false}' });
  const token = await signLocalToken(config, parsed.data.name, parsed.data.operator);
  if (!token) return answer(res, 404, { error: 'tokens come from the identity provider (JWT_JWKS_URL)' });
  answer(res, 200, { token });
}

/** The handler of /app and everything below it; false for any other path. */
export function createWebApp(config: Config, dir = DIST): (req: IncomingMessage, res: ServerResponse) => boolean {
  const files = existsSync(dir)
    ? sirv(dir, {
        single: true,
        etag: true,
        setHeaders: (res) => {
          for (const [name, value] of Object.entries(SECURITY_HEADERS)) res.setHeader(name, value);
        },
      })
    : null;
  return (req, res) => {
    const url = req.url ?? '/';
    if (url !== WEB_APP_PATH && !url.startsWith(`${WEB_APP_PATH}/`)) return false;
    if (url === WEB_APP_PATH) {
      res.writeHead(308, { location: `${WEB_APP_PATH}/` }).end();
    } else if (url === `${WEB_APP_PATH}/dev-token` && req.method === 'POST') {
      void mintDevToken(config, req, res);
    } else if (!files) {
      res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' }).end('The web app is not built: run npm run build:web (npm start does).\n');
    } else {
      req.url = url.slice(WEB_APP_PATH.length);
      // Source maps help a developer; in production they would only show the build's paths.
      if (config.NODE_ENV === 'production' && req.url.split('?')[0]!.endsWith('.map')) {
        res.writeHead(404).end();
        return true;
      }
      files(req, res, () => {
        res.writeHead(404).end();
      });
    }
    return true;
  };
}
