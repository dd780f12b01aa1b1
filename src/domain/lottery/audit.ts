import type { PrismaClient } from '../../generated/prisma/client.ts';
import { replayWeightedDraw } from './choice.ts';
import { loadDrawForAudit } from './persistence.ts';

/** A journaled draw replayed against the settings of its version. */
export interface DrawAudit {
  drawId: string;
  settingsVersion: number;
  randomInput: string | null;
  weightTotal: number | null;
  roll: number | null;
  pool: string[];
  recordedPrizeId: string | null;
  replayedPrizeId: string | null;
  matches: boolean;
}

/** Replays a persisted WEIGHTED draw from its random input against the settings of its version; null if unknown. */
export async function auditDraw(prisma: PrismaClient, drawId: string): Promise<DrawAudit | null> {
  const row = await loadDrawForAudit(prisma, drawId);
  if (!row?.settings) return null;
  const { settings } = row;
  const { prizes: pool, choice } = replayWeightedDraw(settings, row.pool, Number(row.randomInput ?? 0));
  let replayedPrizeId = row.prizeId;
  let totalMatches = true;
  if (settings.strategy === 'WEIGHTED') {
    replayedPrizeId = choice.kind === 'chosen' && choice.index !== null ? (pool[choice.index]?.id ?? null) : null;
    totalMatches = choice.kind === 'chosen' && (choice.roll === null ? row.weightTotal === null : choice.total === row.weightTotal && choice.roll === row.roll);
  }
  return {
    drawId,
    settingsVersion: row.settingsVersion,
    randomInput: row.randomInput === null ? null : String(row.randomInput),
    weightTotal: row.weightTotal,
    roll: row.roll,
    pool: pool.map((prize) => prize?.id ?? '?'),
    recordedPrizeId: row.prizeId,
    replayedPrizeId,
    matches: totalMatches && replayedPrizeId === row.prizeId,
  };
}
