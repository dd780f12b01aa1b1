/**
 * The single-slot ceiling of each flow: one campaign lives on one hash slot, so on one
 * Redis core. Each flow's script runs alone (the `viaScript` ceilings of the other
 * scenarios) against a private redis-server, and INFO commandstats gives the Redis time
 * per script call; 1,000,000 / (µs per call) is what one core can serve of one campaign
 * (one red packet, one lottery activity, the points shop's {shop} slot, one group-buy
 * activity), whatever the number of server instances in front of it.
 * Options: --ops N (default 20000), --connections N (default 100).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { machine, option } from '../support.ts';

async function freePort(): Promise<number> {
  const server = createServer().listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  return port;
}

/** A redis-server of the bench's own: nothing else's script calls land in its statistics. */
async function privateRedis(): Promise<{ url: string; process: ChildProcess }> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  // ioredis retries the connection until the server listens.
  const redis = new Redis(port, '127.0.0.1', { retryStrategy: () => 50 }).on('error', () => undefined);
  await redis.ping();
  redis.disconnect();
  return { url: `redis://127.0.0.1:${port}`, process: child };
}

/** Every command's calls and µs per call since the last CONFIG RESETSTAT. */
async function commandStats(redis: Redis): Promise<Map<string, { calls: number; usecPerCall: number }>> {
  const stats = new Map<string, { calls: number; usecPerCall: number }>();
  for (const line of (await redis.info('commandstats')).split('\r\n')) {
    const match = /^cmdstat_(\w+):calls=(\d+),usec=\d+,usec_per_call=([\d.]+)/.exec(line);
    if (match) stats.set(match[1]!, { calls: Number(match[2]), usecPerCall: Number(match[3]) });
  }
  return stats;
}

export async function run(args: string[]): Promise<void> {
  const ops = option(args, 'ops', 20_000);
  const connections = option(args, 'connections', 100);
  const redisServer = await privateRedis();
  // The ceilings connect to TEST_REDIS_URL, which test/support/env.ts reads when first imported.
  process.env.TEST_REDIS_URL = redisServer.url;
  const [redPacket, lottery, points, teams] = await Promise.all([import('./redpacket.ts'), import('./lottery.ts'), import('./points.ts'), import('./teams.ts')]);
  console.log(`single-slot ceilings: ${ops} operations per flow, ${connections} connections, a private Redis; ${machine()}`);
  const admin = new Redis(redisServer.url);
  const seats = Math.floor(ops / 3) * 3;
  const flows: [string, string, number, (violations: string[]) => Promise<unknown>][] = [
    ['red packet (one packet)', 'grab', ops, (violations) => redPacket.viaScript('slots:rp:', ops, connections, violations)],
    ['lottery (one activity)', 'draw', ops, (violations) => lottery.viaScript('slots:lot:', ops, connections, Math.min(ops, 10_000), violations)],
    [
      'points shop ({shop})',
      'redemption',
      ops,
      (violations) =>
        points.viaScript('slots:pts:', { redemptions: ops, connections, users: Math.min(ops, 10_000), pools: 1, award: 10 * Math.ceil(ops / Math.min(ops, 10_000)) }, violations),
    ],
    // A seat takes a lock and a confirm, and buyers who find the team full or closed retry on another.
    ['group-buy (one activity)', 'seat sold', seats, (violations) => teams.viaScripts('slots:gb:', seats, connections, violations)],
  ];
  const violations: string[] = [];
  const rows: string[][] = [];
  try {
    for (const [flow, operation, operations, runScripts] of flows) {
      await admin.config('RESETSTAT');
      await runScripts(violations);
      const stats = await commandStats(admin);
      const scripts = [...stats.entries()].filter(([name]) => name === 'evalsha' || name === 'eval' || name === 'fcall');
      const calls = scripts.reduce((sum, [, stat]) => sum + stat.calls, 0);
      const usec = scripts.reduce((sum, [, stat]) => sum + stat.calls * stat.usecPerCall, 0);
      const perCall = usec / calls;
      const callsPerOperation = calls / operations;
      rows.push([flow, operation, calls.toString(), perCall.toFixed(1), callsPerOperation.toFixed(2), (1e6 / perCall / callsPerOperation).toFixed(0)]);
    }
  } finally {
    admin.disconnect();
    redisServer.process.kill('SIGTERM');
  }
  console.log();
  const header = ['flow (one slot)', 'operation', 'script calls', 'µs/call', 'calls/op', 'ops/s on one core'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i]!.length)));
  for (const row of [header, ...rows]) console.log(row.map((cell, i) => (i < 2 ? cell.padEnd(widths[i]!) : cell.padStart(widths[i]!))).join('  '));
  console.log();
  console.log('µs/call is Redis time inside the script calls (INFO commandstats), without network and parsing;');
  console.log('a core also spends time reading and writing the replies, so the served rate is below calls/s.');
  console.log(`invariant violations: ${violations.length}`);
  for (const violation of violations) console.log(`  - ${violation}`);
}
