/**
 * The single-slot ceiling of each flow: one campaign lives on one hash slot, so on one
 * Redis core. Each flow's script runs alone (the `viaScript` ceilings of the other
 * scenarios) against a private redis-server, and INFO commandstats gives the Redis time
 * per script call; 1,000,000 / (µs per call) is what one core can serve of one campaign
 * (one red packet, one lottery activity, the points shop's {shop} slot, one group-buy
 * activity), whatever the number of server instances in front of it.
 * Options: --ops N (default 20000), --connections N (default 100).
 */
import { Redis } from 'ioredis';
import type { RedisClient } from '../../src/infra/redis/connection.ts';
import { stopChild } from '../../test/support/redisServer.ts';
import { commandStats, machine, option, privateRedis } from '../support.ts';

export async function run(args: string[]): Promise<void> {
  const ops = option(args, 'ops', 20_000);
  const connections = option(args, 'connections', 100);
  const redisServer = await privateRedis();
  // The group-buy ceiling connects to TEST_REDIS_URL, which test/support/env.ts reads when first imported.
  process.env.TEST_REDIS_URL = redisServer.url;
  const [redPacket, lottery, points, teams] = await Promise.all([import('./redpacket.ts'), import('./lottery.ts'), import('./points.ts'), import('./teams.ts')]);
  console.log(`single-slot ceilings: ${ops} operations per flow, ${connections} connections, a private Redis; ${machine()}`);
  const admin = new Redis(redisServer.url);
  const seats = Math.floor(ops / 3) * 3;
  const withClient = async (keyPrefix: string, storm: (redis: RedisClient) => Promise<unknown>) => {
    const redis = new Redis(redisServer.url, { keyPrefix });
    try {
      await storm(redis);
    } finally {
      redis.disconnect();
    }
  };
  const flows: [string, string, number, (violations: string[]) => Promise<unknown>][] = [
    ['red packet (one packet)', 'grab', ops, (violations) => withClient('slots:rp:', (redis) => redPacket.viaScript(redis, ops, connections, violations))],
    ['lottery (one activity)', 'draw', ops, (violations) => withClient('slots:lot:', (redis) => lottery.viaScript(redis, ops, connections, Math.min(ops, 10_000), violations))],
    [
      'points shop ({shop})',
      'redemption',
      ops,
      (violations) =>
        withClient('slots:pts:', (redis) =>
          points.viaScript(
            redis,
            'slots:pts:',
            { redemptions: ops, connections, users: Math.min(ops, 10_000), pools: 1, award: points.COST * Math.ceil(ops / Math.min(ops, 10_000)) },
            violations,
          ),
        ),
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
    await stopChild(redisServer.process);
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
