import type { PrismaClient } from '../../generated/prisma/client.ts';
import { type JournalEntry, type JournalHandler, conflictingEntries } from '../../infra/journal/journal.ts';
import type { LotterySettings } from './settings.ts';
import type { LotterySnapshot } from './store.ts';
import { localDate, localDay } from './timezone.ts';

const orNull = (value: string | undefined) => (value === undefined || value === '' ? null : value);
const numberOrNull = (value: string | undefined) => (value === undefined || value === '' ? null : Number(value));

/**
 * Persists journaled draws in one statement per batch. Every counter value Redis handed
 * out (the user's n-th draw and win of the day, the prize's n-th unit overall and of the
 * day, the requestId) is a unique key, so a replay is a no-op and a draw that clashes
 * with a different durable draw (Redis lost data and was rebuilt while draws were in
 * flight) is reported as a conflict instead of granting a unit twice.
 */
export const drawJournalHandler: JournalHandler = {
  kind: 'lottery.draw',
  async persist(db: PrismaClient, entries: JournalEntry[]): Promise<JournalEntry[]> {
    const rows = entries.map(({ fields }) => fields);
    const column = (name: string) => rows.map((row) => orNull(row[name]));
    const numbers = (name: string) => rows.map((row) => numberOrNull(row[name]));
    const inserted = await db.$queryRawUnsafe<{ id: string }[]>(
      `INSERT INTO lottery_draw (id, activity_id, user_id, request_id, local_day, draw_seq, prize_id, stock_unit, daily_unit, win_seq,
         release_at, random_input, weight_total, roll, pool, settings_version, prize_snapshot, drawn_at)
       SELECT d.id, d.activity_id, d.user_id, d.request_id, DATE '1970-01-01' + d.day, d.seq, d.prize_id, d.unit, d.daily_unit, d.win_seq,
         to_timestamp(d.release_ms / 1000.0), d.u, d.total, d.roll, COALESCE(string_to_array(d.pool, ','), '{}')::int[], d.version,
         d.snapshot::jsonb, to_timestamp(d.at_ms / 1000.0)
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::text[], $8::int[], $9::int[], $10::int[],
         $11::bigint[], $12::bigint[], $13::int[], $14::int[], $15::text[], $16::int[], $17::text[], $18::bigint[])
         AS d(id, activity_id, user_id, request_id, day, seq, prize_id, unit, daily_unit, win_seq,
           release_ms, u, total, roll, pool, version, snapshot, at_ms)
       ON CONFLICT DO NOTHING
       RETURNING id`,
      column('draw'),
      column('activity'),
      column('user'),
      column('request'),
      numbers('day'),
      numbers('seq'),
      column('prize'),
      numbers('unit'),
      numbers('dailyUnit'),
      numbers('winSeq'),
      column('releaseAt'),
      column('u'),
      numbers('total'),
      numbers('roll'),
      column('pool'),
      numbers('version'),
      column('snapshot'),
      column('at'),
    );
    return conflictingEntries(entries, (entry) => entry.fields.draw!, inserted.map((row) => row.id), async (missing) =>
      (await db.lotteryDraw.findMany({ where: { id: { in: missing } }, select: { id: true } })).map((row) => row.id),
    );
  },
};

/** "prizeId:unit:atMs,..." as the schedule script lists its releases. */
function parseReleases(list: string): { prizeId: string; unit: number; atMs: number }[] {
  if (list === '') return [];
  return list.split(',').map((release) => {
    const [prizeId, unit, atMs] = release.split(':');
    return { prizeId: prizeId!, unit: Number(unit), atMs: Number(atMs) };
  });
}

/**
 * Persists scheduled hours with their releases, one statement per batch: the releases
 * go in only with their hour, so a replay inserts nothing twice. A second schedule of an
 * hour (after a Redis data loss) is a conflict.
 */
export const scheduleJournalHandler: JournalHandler = {
  kind: 'lottery.schedule',
  async persist(db: PrismaClient, entries: JournalEntry[]): Promise<JournalEntry[]> {
    const rows = entries.map(({ fields }) => fields);
    const releases = rows.flatMap((row) => parseReleases(row.releases!).map((release) => ({ ...release, scheduleId: row.schedule! })));
    const inserted = await db.$queryRawUnsafe<{ schedule_id: string }[]>(
      `WITH hours AS (
         INSERT INTO lottery_scheduled_hour (activity_id, hour_start, schedule_id, local_hour, released, scheduled_at)
         SELECT h.activity_id, to_timestamp(h.hour_ms / 1000.0), h.schedule_id, h.local_hour, h.released, to_timestamp(h.at_ms / 1000.0)
         FROM unnest($1::text[], $2::bigint[], $3::text[], $4::int[], $5::int[], $6::bigint[])
           AS h(activity_id, hour_ms, schedule_id, local_hour, released, at_ms)
         ON CONFLICT DO NOTHING
         RETURNING activity_id, hour_start, schedule_id
       ), releases AS (
         INSERT INTO lottery_release (prize_id, stock_unit, activity_id, hour_start, release_at)
         SELECT r.prize_id, r.unit, hours.activity_id, hours.hour_start, to_timestamp(r.at_ms / 1000.0)
         FROM unnest($7::text[], $8::int[], $9::bigint[], $10::text[]) AS r(prize_id, unit, at_ms, schedule_id)
         JOIN hours ON hours.schedule_id = r.schedule_id
         ON CONFLICT DO NOTHING
       )
       SELECT schedule_id FROM hours`,
      rows.map((row) => row.activity!),
      rows.map((row) => row.hour!),
      rows.map((row) => row.schedule!),
      rows.map((row) => Number(row.localHour)),
      rows.map((row) => parseReleases(row.releases!).length),
      rows.map((row) => row.at!),
      releases.map((release) => release.prizeId),
      releases.map((release) => release.unit),
      releases.map((release) => String(release.atMs)),
      releases.map((release) => release.scheduleId),
    );
    return conflictingEntries(entries, (entry) => entry.fields.schedule!, inserted.map((row) => row.schedule_id), async (missing) =>
      (await db.lotteryScheduledHour.findMany({ where: { scheduleId: { in: missing } }, select: { scheduleId: true } })).map((row) => row.scheduleId),
    );
  },
};

/**
 * Persists a settings change in one statement: the version's row in lottery_settings,
 * and the activity and prize rows brought to it unless a newer version is already
 * there. A replay inserts nothing; a different change that got the same version (after
 * a Redis data loss) is a conflict.
 */
export const settingsJournalHandler: JournalHandler = {
  kind: 'lottery.settings',
  async persist(db: PrismaClient, entries: JournalEntry[]): Promise<JournalEntry[]> {
    const conflicts: JournalEntry[] = [];
    for (const entry of entries) {
      const { fields } = entry;
      const [{ durable }] = await db.$queryRawUnsafe<[{ durable: boolean }]>(
        `WITH history AS (
           INSERT INTO lottery_settings (activity_id, version, settings, changed_by, changed_at)
           VALUES ($1, $2, $3::jsonb, $4, to_timestamp($5::bigint / 1000.0))
           ON CONFLICT DO NOTHING
           RETURNING version
         ), activity AS (
           UPDATE lottery_activity
           SET ends_at = to_timestamp(($3::jsonb->>'endsAtMs')::bigint / 1000.0), paused = ($3::jsonb->>'paused')::boolean,
               no_prize_weight = ($3::jsonb->>'noPrizeWeight')::int, daily_draw_limit = ($3::jsonb->>'dailyDrawLimit')::int,
               daily_win_limit = ($3::jsonb->>'dailyWinLimit')::int, settings_version = $2
           WHERE id = $1 AND settings_version < $2 AND EXISTS (SELECT 1 FROM history)
           RETURNING id
         ), prizes AS (
           UPDATE lottery_prize p
           SET weight = x.weight, total_stock = x."totalStock", daily_stock = NULLIF(x."dailyStock", 0), hourly_quota = x."hourlyQuota"
           FROM jsonb_to_recordset($3::jsonb->'prizes') AS x(id text, weight int, "totalStock" int, "dailyStock" int, "hourlyQuota" int[])
           WHERE p.id = x.id AND EXISTS (SELECT 1 FROM activity)
         )
         SELECT EXISTS (SELECT 1 FROM history)
           OR EXISTS (SELECT 1 FROM lottery_settings WHERE activity_id = $1 AND version = $2 AND settings = $3::jsonb) AS durable`,
        fields.activity!,
        Number(fields.version),
        fields.settings!,
        fields.by!,
        fields.at!,
      );
      if (!durable) conflicts.push(entry);
    }
    return conflicts;
  },
};

export interface ActivityRow {
  id: string;
  createdBy: string;
  settings: LotterySettings;
}

/** Creates the activity, its prizes and settings version 1 in one transaction. */
export async function insertActivity(prisma: PrismaClient, { id, createdBy, settings }: ActivityRow): Promise<void> {
  await prisma.$transaction([
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
 * every requestId's first result, undrawn releases and scheduled hours. Counters are
 * rebuilt from the highest value handed out, so the next value never repeats one.
 */
export async function loadSnapshot(prisma: PrismaClient, activityId: string, nowMs: number): Promise<LotterySnapshot | null> {
  const settings = await loadSettings(prisma, activityId);
  if (!settings) return null;
  const day = localDay(settings.utcOffsets, nowMs);
  const [units, users, prizesToday, requests, releases, hours] = await Promise.all([
    prisma.$queryRawUnsafe<{ prize_id: string; unit: number }[]>(
      `SELECT prize_id, max(stock_unit)::int AS unit FROM (
         SELECT prize_id, stock_unit FROM lottery_draw WHERE activity_id = $1 AND prize_id IS NOT NULL
         UNION ALL SELECT prize_id, stock_unit FROM lottery_release WHERE activity_id = $1
       ) AS taken GROUP BY prize_id`,
      activityId,
    ),
    prisma.$queryRawUnsafe<{ user_id: string; draws: number; wins: number | null }[]>(
      `SELECT user_id, max(draw_seq)::int AS draws, max(win_seq)::int AS wins FROM lottery_draw
       WHERE activity_id = $1 AND local_day = $2::date GROUP BY user_id`,
      activityId,
      localDate(day),
    ),
    prisma.$queryRawUnsafe<{ prize_id: string; wins: number }[]>(
      `SELECT prize_id, max(daily_unit)::int AS wins FROM lottery_draw
       WHERE activity_id = $1 AND local_day = $2::date AND prize_id IS NOT NULL GROUP BY prize_id`,
      activityId,
      localDate(day),
    ),
    prisma.lotteryDraw.findMany({
      where: { activityId, requestId: { not: null } },
      select: { userId: true, requestId: true, id: true, prizeId: true, drawnAt: true, settingsVersion: true },
    }),
    prisma.$queryRawUnsafe<{ prize_id: string; stock_unit: number; release_at: Date }[]>(
      `SELECT r.prize_id, r.stock_unit, r.release_at FROM lottery_release r
       WHERE r.activity_id = $1
         AND NOT EXISTS (SELECT 1 FROM lottery_draw d WHERE d.prize_id = r.prize_id AND d.stock_unit = r.stock_unit)`,
      activityId,
    ),
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
    releases: releases.map((row) => ({ prizeId: row.prize_id, stockUnit: row.stock_unit, releaseAtMs: row.release_at.getTime() })),
    scheduledHours: hours.map((row) => row.hourStart.getTime()),
  };
}

/** totalStock − persisted wins, per prize of the activity. */
export async function remainingStock(prisma: PrismaClient, activityId: string): Promise<Map<string, number>> {
  const rows = await prisma.$queryRawUnsafe<{ id: string; remaining: number }[]>(
    `SELECT p.id, (p.total_stock - (SELECT count(*) FROM lottery_draw d WHERE d.prize_id = p.id AND d.stock_unit IS NOT NULL))::int AS remaining
     FROM lottery_prize p WHERE p.activity_id = $1`,
    activityId,
  );
  return new Map(rows.map((row) => [row.id, row.remaining]));
}

export async function prizeRemainingStock(prisma: PrismaClient, prizeId: string): Promise<number> {
  const rows = await prisma.$queryRawUnsafe<{ remaining: number }[]>(
    `SELECT (p.total_stock - (SELECT count(*) FROM lottery_draw d WHERE d.prize_id = p.id AND d.stock_unit IS NOT NULL))::int AS remaining
     FROM lottery_prize p WHERE p.id = $1`,
    prizeId,
  );
  return rows[0]?.remaining ?? 0;
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

