import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import autocannon from 'autocannon';
import type { Redis } from 'ioredis';
import { startThrowawayRedis } from '../test/support/redisServer.ts';

export interface Measurement {
  label: string;
  operations: number;
  seconds: number;
  p50Ms: number;
  p99Ms: number;
}

export const perSecond = (m: Measurement) => m.operations / m.seconds;

/** `--name N` from a scenario's arguments, or the fallback. */
export function option(args: string[], name: string, fallback: number): number {
  const index = args.indexOf(`--${name}`);
  return index >= 0 ? Number(args[index + 1]) : fallback;
}

/**
 * Settings for the servers and in-process apps a scenario starts, from BENCH_SERVER_ENV (a
 * JSON object of environment variables, e.g. '{"WEB_CONCURRENCY":"2"}'): to see what a
 * setting does to a scenario without editing it.
 */
export function benchServerEnv(): Record<string, string> {
  return JSON.parse(process.env.BENCH_SERVER_ENV ?? '{}') as Record<string, string>;
}

/** `--only bd`: the parts (letters) of a scenario to run, all by default; one alone is for profiling it. */
export function onlyParts(args: string[], all: string): (part: string) => boolean {
  const index = args.indexOf('--only');
  const chosen = index >= 0 ? (args[index + 1] ?? '') : all;
  return (part) => chosen.includes(part);
}

/** Prints `label = x/y` with what it compares, when both parts ran. */
export function printRatio(label: string, over: Measurement | undefined, under: Measurement | undefined, meaning: string): void {
  if (over && under) console.log(`${label} = ${(perSecond(over) / perSecond(under)).toFixed(2)}  (${meaning})`);
}

/** With BENCH_PHASES set, says when a timed part starts, for profilers attached from outside (perf record -p, a /proc sampler). */
function markTimedPart(label: string): void {
  if (process.env.BENCH_PHASES) process.stderr.write(`${label}: timed part starts at ${(Date.now() / 1000).toFixed(1)}\n`);
}

/** Runs `operation` `total` times with `concurrency` in flight, timing each call. */
export async function measureConcurrent(label: string, total: number, concurrency: number, operation: (i: number) => Promise<unknown>): Promise<Measurement> {
  const latencies = new Float64Array(total);
  let next = 0;
  markTimedPart(label);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++;
        const t0 = performance.now();
        await operation(i);
        latencies[i] = performance.now() - t0;
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const sorted = Array.from(latencies).sort((a, b) => a - b);
  return { label, operations: total, seconds, p50Ms: percentile(sorted, 0.5), p99Ms: percentile(sorted, 0.99) };
}

export function percentile(sorted: ArrayLike<number>, q: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

export function printTable(measurements: Measurement[]): void {
  const rows = measurements.map((m) => [m.label, m.operations.toString(), perSecond(m).toFixed(0), m.p50Ms.toFixed(2), m.p99Ms.toFixed(2)]);
  const header = ['scenario', 'ops', 'ops/s', 'p50 ms', 'p99 ms'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  const line = (cells: string[]) => cells.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  ');
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}

export function machine(): string {
  return `${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, Node ${process.version}`;
}

/**
 * autocannon over HTTP, timed to the last response: autocannon notices that a fixed
 * `amount` is done only on its once-a-second tick, which would round every duration
 * up to the next second.
 */
async function loadOverHttp(label: string, options: autocannon.Options & { requests: autocannon.Request[] }): Promise<{ measurement: Measurement; result: autocannon.Result }> {
  let lastResponseAt = 0;
  type OnResponse = Extract<autocannon.Request['onResponse'], (...args: never[]) => void>;
  const requests = options.requests.map(
    (request): autocannon.Request => ({
      ...request,
      onResponse: (...args: Parameters<OnResponse>) => {
        lastResponseAt = performance.now();
        (request.onResponse as OnResponse | undefined)?.(...args);
      },
    }),
  );
  markTimedPart(label);
  const started = performance.now();
  const result = await autocannon({ ...options, requests });
  const seconds = (lastResponseAt - started) / 1000;
  return { result, measurement: { label, operations: result.requests.total, seconds, p50Ms: result.latency.p50, p99Ms: result.latency.p99 } };
}

/** `amount` JSON POSTs with a bearer token over `connections`, the i-th built by `request(i)`, timed to the last response. */
export function signedInPosts(
  label: string,
  options: {
    url: string;
    connections: number;
    amount: number;
    request: (i: number) => { body: string; token: string };
    onResponse: (status: number, body: string) => void;
  },
): Promise<{ measurement: Measurement; result: autocannon.Result }> {
  let sent = 0;
  return loadOverHttp(label, {
    url: options.url,
    connections: options.connections,
    amount: options.amount,
    method: 'POST',
    requests: [
      {
        setupRequest: (request) => {
          const { body, token } = options.request(sent++);
          return { ...request, body, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` } };
        },
        onResponse: (status, body) => options.onResponse(status, body),
      },
    ],
  });
}

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** A redis-server of the bench's own: nothing else's commands land in its statistics. Stop it with stopChild. */
export async function privateRedis(): Promise<{ url: string; process: ChildProcess }> {
  const port = await freePort();
  return { url: `redis://127.0.0.1:${port}`, process: await startThrowawayRedis(port, []) };
}

/** Every command's calls and µs per call since the last CONFIG RESETSTAT. */
export async function commandStats(redis: Redis): Promise<Map<string, { calls: number; usecPerCall: number }>> {
  const stats = new Map<string, { calls: number; usecPerCall: number }>();
  for (const line of (await redis.info('commandstats')).split('\r\n')) {
    const match = /^cmdstat_(\w+):calls=(\d+),usec=\d+,usec_per_call=([\d.]+)/.exec(line);
    if (match) stats.set(match[1]!, { calls: Number(match[2]), usecPerCall: Number(match[3]) });
  }
  return stats;
}
