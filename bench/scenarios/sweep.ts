/**
 * The journal sweeper's round on an idle server: every registered stream (one per campaign,
 * kept until a day after its end) is looked into once a second, whether or not anything
 * happened. A round over few streams against a round over many, in one run: the CPU of this
 * process and of Redis per stream looked into, and the wall time of a round.
 * Options: --few N (default 100), --many N (default 3000), --rounds N (default 20).
 */
import type { Redis } from 'ioredis';
import { Journal, type JournalDb } from '../../src/infra/journal/journal.ts';
import { createLogger } from '../../src/infra/logger.ts';
import { Scripts } from '../../src/infra/redis/scripts.ts';
import { testEnv } from '../../test/support/env.ts';
import { openStores } from '../../test/support/stores.ts';
import { machine, option } from '../support.ts';

/** Redis' own CPU so far (user + system), in µs. */
async function redisCpuMicros(redis: Redis): Promise<number> {
  const info = await redis.info('cpu');
  const read = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  return (read('used_cpu_user') + read('used_cpu_sys')) * 1e6;
}

export async function run(args: string[]): Promise<void> {
  const few = option(args, 'few', 100);
  const many = option(args, 'many', 3000);
  const rounds = option(args, 'rounds', 20);
  const env = testEnv('bench_sweep');
  const stores = openStores(env);
  const redis = stores.redis as unknown as Redis;
  // The sweep of idle streams reads nothing from PostgreSQL.
  const journal = new Journal(stores.redis, new Scripts(stores.redis), {} as JournalDb, createLogger('warn'), { batchMax: 1, batchWaitMs: 1, maxInFlight: 1, sweepAfterMs: 1000 });
  console.log(`journal sweep of idle streams, ${rounds} rounds each; ${machine()}`);
  const rows: { streams: number; cpuPerStream: number; redisPerStream: number; roundMs: number }[] = [];
  try {
    for (const streams of [few, many]) {
      const untilMs = Date.now() + 86_400_000;
      await redis.del('journal:streams');
      for (let i = 0; i < streams; i += 1000) {
        const members = Array.from({ length: Math.min(1000, streams - i) }, (_, j) => [untilMs, `{bench:${i + j}}:journal`]).flat();
        await redis.zadd('journal:streams', ...(members as [number, string]));
      }
      await journal.sweep();
      const cpu = process.cpuUsage();
      const redisBefore = await redisCpuMicros(redis);
      const started = performance.now();
      for (let round = 0; round < rounds; round += 1) await journal.sweep();
      const wallMs = performance.now() - started;
      const used = process.cpuUsage(cpu);
      const redisUsed = (await redisCpuMicros(redis)) - redisBefore;
      const looks = streams * rounds;
      rows.push({ streams, cpuPerStream: (used.user + used.system) / looks, redisPerStream: redisUsed / looks, roundMs: wallMs / rounds });
    }
  } finally {
    await stores.cleanup();
  }
  for (const row of rows) {
    console.log(
      `${String(row.streams).padStart(6)} streams: a round takes ${row.roundMs.toFixed(1)} ms; per stream looked into, ${row.cpuPerStream.toFixed(1)} µs of this process's CPU and ${row.redisPerStream.toFixed(1)} µs of Redis'`,
    );
  }
  const [small, large] = rows as [(typeof rows)[number], (typeof rows)[number]];
  console.log(`round time, ${many} streams / ${few} = ${(large.roundMs / small.roundMs).toFixed(1)}  (${(many / few).toFixed(0)} would be linear)`);
  console.log(
    `CPU a second at ${many} idle streams (one round a second): ${((large.cpuPerStream * many) / 10_000).toFixed(1)}% of a core here, ${((large.redisPerStream * many) / 10_000).toFixed(1)}% in Redis`,
  );
}
