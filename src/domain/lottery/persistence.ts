import type { Prisma, PrismaClient } from '../../generated/prisma/client.ts';
import { type KeysetPage, keysetPageArgs } from '../../infra/db/pages.ts';
import { type OperatorRequest, recordRequest } from '../operatorRequests.ts';
import type { LotterySettings, LotteryStatus } from './settings.ts';
import type { LotterySnapshot, PrizeSnapshot } from './store.ts';
import { localDate, localDay } from './timezone.ts';
import { type WinRecordView, prizeView } from './views.ts';

export interface ActivityRow {
  id: string;
  createdBy: string;
  settings: LotterySettings;
  /** With a requestId: made once per request (src/domain/operatorRequests.ts). */
  request: OperatorRequest | null;
}

/** Creates the activity, its prizes and settings version 1 in one transaction. */
export async function insertActivity(prisma: PrismaClient, { id, createdBy, settings, request }: ActivityRow): Promise<void> {
  await prisma.$transaction([
    // First: a call racing with the same requestId waits here for this one, then fails on its key.
    ...(request ? [recordRequest(prisma, request, id)] : []),
    prisma.lotteryActivity.create({
      data: {
        id,
        title: settings.title,
        strategy: settings.strategy,
        startsAt: new Date(settings.startsAtMs),
        endsAt: new Date(settings.endsAtMs),
        paused: settings.paused,
        noPrizeWeight: settings.noPrizeWeight,
        dailyDrawLimit: settings.dailyDrawLimit,
        dailyWinLimit: settings.dailyWinLimit,
        drawCostPoints: settings.drawCostPoints ?? 0,
        timezone: settings.timezone,
        settingsVersion: settings.version,
        createdBy,
      },
    }),
    prisma.lotteryPrize.createMany({
      data: settings.prizes.map((prize, position) => ({
        id: prize.id,
        activityId: id,
        position,
        title: prize.title,
        kind: prize.kind,
        points: prize.points || null,
        weight: prize.weight,
        totalStock: prize.totalStock,
        dailyStock: prize.dailyStock || null,
        hourlyQuota: prize.hourlyQuota,
      })),
    }),
    prisma.lotterySettings.create({
      data: { activityId: id, version: settings.version, settings: settings as object, changedBy: createdBy, changedAt: new Date() },
    }),
  ]);
}

/** The newest settings PostgreSQL holds for the activity. */
async function loadSettings(prisma: PrismaClient, activityId: string): Promise<LotterySettings | null> {
  const row = await prisma.lotterySettings.findFirst({ where: { activityId }, orderBy: { version: 'desc' }, select: { settings: true } });
  return row ? (row.settings as unknown as LotterySettings) : null;
}

/**
 * Everything Redis needs, rebuilt from durable rows: stock left = total − the highest
 * unit handed out (won, or scheduled for TIMED), today's counters from today's draws,
 * every requestId's first result (a draw's, an operator's change's), undrawn releases
 * and scheduled hours. Counters are rebuilt from the highest value handed out, so the
 * next value never repeats one.
 */
export async function loadSnapshot(prisma: PrismaClient, activityId: string, nowMs: number): Promise<LotterySnapshot | null> {
  const settings = await loadSettings(prisma, activityId);
  if (!settings) return null;
  const day = localDay(settings.utcOffsets, nowMs);
  const [units, users, prizesToday, requests, changes, releases, hours] = await Promise.all([
    prisma.$queryRaw<{ prize_id: string; unit: number }[]>`
      SELECT prize_id, max(stock_unit)::int AS unit FROM (
        SELECT prize_id, stock_unit FROM lottery_draw WHERE activity_id = ${activityId} AND prize_id IS NOT NULL
        UNION ALL SELECT prize_id, stock_unit FROM lottery_release WHERE activity_id = ${activityId}
      ) AS taken GROUP BY prize_id`,
    prisma.$queryRaw<{ user_id: string; draws: number; wins: number | null }[]>`
      SELECT user_id, max(draw_seq)::int AS draws, max(win_seq)::int AS wins FROM lottery_draw
      WHERE activity_id = ${activityId} AND local_day = ${localDate(day)}::date GROUP BY user_id`,
    prisma.$queryRaw<{ prize_id: string; wins: number }[]>`
      SELECT prize_id, max(daily_unit)::int AS wins FROM lottery_draw
      WHERE activity_id = ${activityId} AND local_day = ${localDate(day)}::date AND prize_id IS NOT NULL GROUP BY prize_id`,
    prisma.lotteryDraw.findMany({
      where: { activityId, requestId: { not: null } },
      select: { userId: true, requestId: true, id: true, prizeId: true, drawnAt: true, settingsVersion: true },
    }),
    prisma.lotterySettings.findMany({
      where: { activityId, requestId: { not: null } },
      select: { changedBy: true, requestId: true, requestDigest: true, version: true },
    }),
    prisma.$queryRaw<{ prize_id: string; stock_unit: number; release_at: Date }[]>`
      SELECT r.prize_id, r.stock_unit, r.release_at FROM lottery_release r
      WHERE r.activity_id = ${activityId}
        AND NOT EXISTS (SELECT 1 FROM lottery_draw d WHERE d.prize_id = r.prize_id AND d.stock_unit = r.stock_unit)`,
    prisma.lotteryScheduledHour.findMany({ where: { activityId }, select: { hourStart: true } }),
  ]);
  const highestUnit = new Map(units.map((row) => [row.prize_id, row.unit]));
  return {
    activityId,
    settings,
    stockLeft: new Map(settings.prizes.map((prize) => [prize.id, prize.totalStock - (highestUnit.get(prize.id) ?? 0)])),
    day,
    drawsToday: new Map(users.map((row) => [row.user_id, row.draws])),
    winsToday: new Map(users.filter((row) => row.wins !== null).map((row) => [row.user_id, row.wins!])),
    prizeWinsToday: new Map(prizesToday.map((row) => [row.prize_id, row.wins])),
    requests: requests.map((row) => ({
      userId: row.userId,
      requestId: row.requestId!,
      drawId: row.id,
      prizeId: row.prizeId,
      drawnAtMs: row.drawnAt.getTime(),
      settingsVersion: row.settingsVersion,
    })),
    changes: changes.map((row) => ({ changedBy: row.changedBy, requestId: row.requestId!, digest: row.requestDigest!, version: row.version })),
    releases: releases.map((row) => ({ prizeId: row.prize_id, stockUnit: row.stock_unit, releaseAtMs: row.release_at.getTime() })),
    scheduledHours: hours.map((row) => row.hourStart.getTime()),
  };
}

/** totalStock − persisted wins, per prize of the activity. */
export async function remainingStock(prisma: PrismaClient, activityId: string): Promise<Map<string, number>> {
  const rows = await prisma.$queryRaw<{ id: string; remaining: number }[]>`
    SELECT p.id, (p.total_stock - (SELECT count(*) FROM lottery_draw d WHERE d.prize_id = p.id AND d.stock_unit IS NOT NULL))::int AS remaining
    FROM lottery_prize p WHERE p.activity_id = ${activityId}`;
  return new Map(rows.map((row) => [row.id, row.remaining]));
}

export async function prizeRemainingStock(prisma: PrismaClient, prizeId: string): Promise<number> {
  const rows = await prisma.$queryRaw<{ remaining: number }[]>`
    SELECT (p.total_stock - (SELECT count(*) FROM lottery_draw d WHERE d.prize_id = p.id AND d.stock_unit IS NOT NULL))::int AS remaining
    FROM lottery_prize p WHERE p.id = ${prizeId}`;
  return rows[0]?.remaining ?? 0;
}

/** Whether PostgreSQL holds the version an operator's requestId made. */
export async function changeIsDurable(prisma: PrismaClient, activityId: string, version: number, changedBy: string, requestId: string): Promise<boolean> {
  return (await prisma.lotterySettings.count({ where: { activityId, version, changedBy, requestId } })) > 0;
}

/** Whether PostgreSQL holds the draw. */
export async function drawIsDurable(prisma: PrismaClient, drawId: string): Promise<boolean> {
  return (await prisma.lotteryDraw.findUnique({ where: { id: drawId }, select: { id: true } })) !== null;
}

export interface WinRow {
  drawId: string;
  userId: string;
  prizeSnapshot: unknown;
  drawnAt: Date;
  settingsVersion: number;
}

/** The latest `limit` wins, oldest first. */
export async function recentWins(prisma: PrismaClient, activityId: string, limit: number): Promise<WinRow[]> {
  const rows = await prisma.lotteryDraw.findMany({
    where: { activityId, prizeId: { not: null } },
    orderBy: [{ drawnAt: 'desc' }, { id: 'desc' }],
    take: limit,
    select: { id: true, userId: true, prizeSnapshot: true, drawnAt: true, settingsVersion: true },
  });
  return rows.reverse().map(({ id, ...row }) => ({ drawId: id, ...row }));
}

/**
 * A page of the activity's wins (all, or one prize's), oldest first; losses are never
 * listed. The partial indexes of wins (`lottery_draw_activity_win_idx`,
 * `lottery_draw_prize_win_idx`) hold them in this order. A cursor must name a win of the
 * activity: a win of another prize places the page by its time (a client narrowing the
 * list to one prize keeps its place), anything else is refused.
 */
export async function winsPage(prisma: PrismaClient, activityId: string, prizeId: string | null, page: KeysetPage): Promise<WinRecordView[]> {
  const rows = await prisma.lotteryDraw.findMany({
    select: { id: true, userId: true, requestId: true, prizeSnapshot: true, drawnAt: true, settingsVersion: true, costPoints: true },
    ...(await keysetPageArgs(prisma.lotteryDraw, page, {
      where: { activityId, prizeId: prizeId ?? { not: null } },
      cursorScope: { activityId, prizeId: { not: null } },
      orderBy: [{ drawnAt: 'asc' }, { id: 'asc' }],
    })),
  });
  return rows.map(({ id, prizeSnapshot, ...row }) => ({ ...row, drawId: id, activityId, prize: prizeView(activityId, prizeSnapshot as PrizeSnapshot) }));
}

/** TIMED activities that have hours to schedule: started within the look-ahead, not yet over. */
export async function timedActivitiesToSchedule(prisma: PrismaClient, nowMs: number, lookAheadMs: number): Promise<string[]> {
  const rows = await prisma.lotteryActivity.findMany({
    where: { strategy: 'TIMED', endsAt: { gt: new Date(nowMs) }, startsAt: { lte: new Date(nowMs + lookAheadMs) } },
    select: { id: true },
  });
  return rows.map((row) => row.id);
}

export interface DrawAuditRow {
  id: string;
  activityId: string;
  prizeId: string | null;
  randomInput: bigint | null;
  weightTotal: number | null;
  roll: number | null;
  pool: number[];
  settingsVersion: number;
  settings: LotterySettings | null;
}

/** A persisted draw with the settings of its version, for replaying it. */
export async function loadDrawForAudit(prisma: PrismaClient, drawId: string): Promise<DrawAuditRow | null> {
  const draw = await prisma.lotteryDraw.findUnique({
    where: { id: drawId },
    select: { id: true, activityId: true, prizeId: true, randomInput: true, weightTotal: true, roll: true, pool: true, settingsVersion: true },
  });
  if (!draw) return null;
  const version = await prisma.lotterySettings.findUnique({
    where: { activityId_version: { activityId: draw.activityId, version: draw.settingsVersion } },
    select: { settings: true },
  });
  return { ...draw, settings: version ? (version.settings as unknown as LotterySettings) : null };
}

/** campaignStatus (../campaignStatus.ts) as a filter on the columns that mirror the newest settings. */
function statusFilter(status: LotteryStatus, now: Date): Prisma.LotteryActivityWhereInput {
  const running = { endsAt: { gt: now } };
  switch (status) {
    case 'ENDED':
      return { endsAt: { lte: now } };
    case 'PAUSED':
      return { ...running, paused: true };
    case 'UPCOMING':
      return { ...running, paused: false, startsAt: { gt: now } };
    case 'ACTIVE':
      return { ...running, paused: false, startsAt: { lte: now } };
  }
}

/** A page of the activities' ids, newest first, of one status at `nowMs` (or all). */
export async function lotteryActivityIds(prisma: PrismaClient, status: LotteryStatus | null, nowMs: number, page: KeysetPage): Promise<string[]> {
  const rows = await prisma.lotteryActivity.findMany({
    select: { id: true },
    // A status changes with time and with a pause: the cursor's activity may have left it since.
    ...(await keysetPageArgs(prisma.lotteryActivity, page, {
      where: status === null ? {} : statusFilter(status, new Date(nowMs)),
      cursorScope: {},
      orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
    })),
  });
  return rows.map((row) => row.id);
}
