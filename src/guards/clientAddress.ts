import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The address a request came from: the socket's peer, or, behind `trustedProxies`
 * proxies (TRUST_PROXY), the entry of X-Forwarded-For that the outermost of them
 * wrote. Entries further left were written by the client and prove nothing, so with
 * TRUST_PROXY=0 (the default) the header is ignored altogether.
 */
export function clientAddress(req: IncomingMessage | undefined, trustedProxies: number): string {
  const peer = normalized(req?.socket?.remoteAddress ?? 'unknown');
  if (trustedProxies === 0 || !req) return peer;
  const header = req.headers['x-forwarded-for'];
  const forwarded = (Array.isArray(header) ? header.join(',') : (header ?? ''))
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  const chain = [...forwarded.map(normalized), peer];
  const chosen = chain[Math.max(0, chain.length - 1 - trustedProxies)]!;
  // No proxy writes anything but an address: anything else came from a client that
  // reached the server around its proxies, and would be a rate-limit key of its choosing.
  return isIP(chosen) ? chosen : peer;
}

/**
 * Whose budget a request from `address` draws on: the address itself for IPv4, the /64 it
 * lies in for IPv6. A phone or a home gets a whole /64 and may send from any address in
 * it, so counting each address alone would give one client billions of budgets.
 */
export function budgetOf(address: string): string {
  if (!ipaddr.IPv6.isValid(address)) return address;
  const network = ipaddr.IPv6.parse(address).parts.slice(0, 4);
  return `${network.map((part) => part.toString(16)).join(':')}::/64`;
}

/** Whether a socket's peer is this machine (127.0.0.0/8 or ::1, IPv4-mapped included). */
export function isLoopback(address: string | undefined): boolean {
  return address !== undefined && ipaddr.isValid(address) && ipaddr.process(address).range() === 'loopback';
}

/** IPv4 clients of a dual-stack socket show up as ::ffff:1.2.3.4. */
function normalized(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice('::ffff:'.length) : address;
}

/** The Node request behind a GraphQL context: Yoga's node adapter, the fast lane and graphql-ws all pass it as `req`. */
export function requestOf(context: unknown): IncomingMessage | undefined {
  return (context as { req?: IncomingMessage } | null)?.req;
}
