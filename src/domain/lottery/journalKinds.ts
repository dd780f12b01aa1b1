import { z } from 'zod';
import { Prisma } from '../../generated/prisma/client.ts';
import { unnest } from '../../infra/db/unnest.ts';
import { conflictingEntries, entryKind } from '../../infra/journal/entryKind.ts';
import type { PersistResult } from '../../infra/journal/journal.ts';
import { MAX_POINTS } from '../points/input.ts';

/** A field the scripts leave '' when it does not apply (a lost draw has no prize): null here, SQL NULL there. */
const blankOr = <T extends z.ZodType>(schema: T) => z.union([z.literal('').transform(() => null), schema]);
const int = z.coerce.number().int();

/** What lua/drawLottery.lua journals for one draw, won or lost. */
const drawFields = z.object({
  draw: z.string(),
  activity: z.string(),
  user: z.string(),
  request: blankOr(z.string()),
  day: int,
  seq: int,
  prize: blankOr(z.string()),
  unit: blankOr(int),
  dailyUnit: blankOr(int),
  winSeq: blankOr(int),
  releaseAt: blankOr(int),
  u: blankOr(int),
  total: blankOr(int),
  roll: blankOr(int),
  pool: z.string(),
  version: int,
  at: int,
  snapshot: blankOr(z.string()),
  /** Entries journaled before paid draws existed carry no cost. */
  cost: z
    .string()
    .optional()
    .transform((cost) => Number(cost ?? 0))
    .pipe(z.number().int().min(0)),
});

/**
 * Persists journaled draws in one statement per batch. Every counter value Redis handed
 * out (the user's n-th draw and win of the day, the prize's n-th unit overall and of the
 * day, the requestId) is a unique key, so a replay is a no-op and a draw that clashes
 * with a different durable draw (Redis lost data and was rebuilt while draws were in
 * flight) is reported as a conflict instead of granting a unit twice.
 *
 * Points move in the same statement (src/domain/points/drawPayments.ts): a paid draw is
 * inserted only on its reservation, locked and still RESERVED, which it turns PAID with
 * a ledger debit; one whose reservation the sweeper released is a conflict (no draw
 * without payment, no payment without a draw). A POINTS prize is credited to the
 * winner's account and ledger, once per draw id, as far as it fits: the draw is Redis's
 * decision and stands, so a prize that would take the balance with what paid draws hold
 * past 2^31−1 is credited up to it (draw_payment.prize_points says what was), and no
 * statement fails on the ceiling (22003 would dead-letter the draw).
 */
export const drawJournalKind = entryKind({
  kind: 'lottery.draw',
  fields: drawFields,
  async persist(db, entries) {
    const draws = entries.map(({ fields }) => fields);
    const inserted = await db.query<{ id: string }>(Prisma.sql`
      WITH d AS (
        SELECT * FROM ${unnest('d', draws, {
          id: ['text', (draw) => draw.draw],
          activity_id: ['text', (draw) => draw.activity],
          user_id: ['text', (draw) => draw.user],
          request_id: ['text', (draw) => draw.request],
          day: ['int', (draw) => draw.day],
          seq: ['int', (draw) => draw.seq],
          prize_id: ['text', (draw) => draw.prize],
          unit: ['int', (draw) => draw.unit],
          daily_unit: ['int', (draw) => draw.dailyUnit],
          win_seq: ['int', (draw) => draw.winSeq],
          release_ms: ['bigint', (draw) => draw.releaseAt],
          u: ['bigint', (draw) => draw.u],
          total: ['int', (draw) => draw.total],
          roll: ['int', (draw) => draw.roll],
          pool: ['text', (draw) => draw.pool],
          version: ['int', (draw) => draw.version],
          snapshot: ['text', (draw) => draw.snapshot],
          at_ms: ['bigint', (draw) => draw.at],
          cost: ['int', (draw) => draw.cost],
        })}
      ),
      reserved AS MATERIALIZED (
        SELECT p.draw_id FROM draw_payment p JOIN d ON d.id = p.draw_id AND d.cost > 0
        WHERE p.status = 'RESERVED' AND p.cost = d.cost AND p.user_id = d.user_id
        ORDER BY p.draw_id FOR UPDATE OF p
      ),
      inserted AS (
        INSERT INTO lottery_draw (id, activity_id, user_id, request_id, local_day, draw_seq, prize_id, stock_unit, daily_unit, win_seq,
          release_at, random_input, weight_total, roll, pool, settings_version, prize_snapshot, drawn_at, cost_points)
        SELECT d.id, d.activity_id, d.user_id, d.request_id, DATE '1970-01-01' + d.day, d.seq, d.prize_id, d.unit, d.daily_unit, d.win_seq,
          to_timestamp(d.release_ms / 1000.0), d.u, d.total, d.roll, COALESCE(string_to_array(NULLIF(d.pool, ''), ','), '{}')::int[], d.version,
          d.snapshot::jsonb, to_timestamp(d.at_ms / 1000.0), d.cost
        FROM d WHERE d.cost = 0 OR d.id IN (SELECT draw_id FROM reserved)
        ON CONFLICT DO NOTHING
        RETURNING id, activity_id, user_id, request_id, cost_points, drawn_at,
          CASE WHEN prize_snapshot->>'kind' = 'POINTS' THEN (prize_snapshot->>'points')::int ELSE 0 END AS won_points
      ),
      -- Locked in user order, after the reservations (the order a release locks in): balance + held
      -- is then the ledger's sum, and stays so until this statement commits.
      account AS MATERIALIZED (
        SELECT user_id, balance::bigint + held AS total FROM points_account
        WHERE user_id IN (SELECT user_id FROM inserted WHERE cost_points > 0 OR won_points > 0) ORDER BY user_id FOR UPDATE
      ),
      -- Each prize, in draw order, gets what is left under the ceiling once the draws' costs are spent.
      prized AS (
        SELECT i.*, LEAST(i.won_points, GREATEST(0,
            ${MAX_POINTS}::bigint - COALESCE(a.total, 0) + sum(i.cost_points) OVER (PARTITION BY i.user_id)
            - (sum(i.won_points) OVER (PARTITION BY i.user_id ORDER BY i.drawn_at, i.id ROWS UNBOUNDED PRECEDING) - i.won_points)))::int AS prize_points
        FROM inserted i LEFT JOIN account a ON a.user_id = i.user_id
      ),
      paid AS (
        UPDATE draw_payment p SET status = 'PAID', prize_points = i.prize_points, settled_at = CASE WHEN i.prize_points = 0 THEN now() END
        FROM prized i WHERE p.draw_id = i.id AND i.cost_points > 0
      ),
      free_won AS (
        INSERT INTO draw_payment (draw_id, user_id, activity_id, request_id, cost, status, prize_points, reserved_at, release_after)
        SELECT id, user_id, activity_id, request_id, 0, 'PAID', prize_points, drawn_at, drawn_at FROM prized WHERE cost_points = 0 AND won_points > 0
      ),
      ledgered AS (
        INSERT INTO points_ledger (user_id, delta, reason, draw_id, created_at)
        SELECT user_id, -cost_points, 'lottery draw', id, drawn_at FROM prized WHERE cost_points > 0
        UNION ALL
        SELECT user_id, prize_points, 'lottery prize', id, drawn_at FROM prized WHERE prize_points > 0
      ),
      moved AS (
        SELECT user_id, sum(prize_points)::int AS prizes, sum(cost_points)::int AS spent FROM prized GROUP BY user_id
        HAVING sum(prize_points) > 0 OR sum(cost_points) > 0
      ),
      -- Costs leave what the account holds, prizes come into its balance. A free draw's first
      -- prize opens the account; a paid draw always has one.
      credited AS (
        INSERT INTO points_account AS a (user_id, balance)
        SELECT user_id, prizes FROM moved ORDER BY user_id
        ON CONFLICT (user_id) DO UPDATE SET balance = a.balance + EXCLUDED.balance, held = a.held - (SELECT m.spent FROM moved m WHERE m.user_id = a.user_id)
      )
      SELECT id FROM inserted`);
    return conflictingEntries(
      entries,
      (draw) => draw.draw,
      inserted.map((row) => row.id),
      async (ids) => (await db.prisma.lotteryDraw.findMany({ where: { id: { in: ids } }, select: { id: true } })).map((row) => row.id),
    );
  },
});

/** "prizeId:unit:atMs,..." as lua/scheduleLotteryHour.lua lists an hour's releases. */
const releaseList = z.string().transform((list) =>
  list === ''
    ? []
    : list.split(',').map((release) => {
        const [prizeId = '', unit, atMs] = release.split(':');
        return { prizeId, unit: Number(unit), atMs: Number(atMs) };
      }),
);

/** What lua/scheduleLotteryHour.lua journals for one scheduled hour. */
const scheduleFields = z.object({
  activity: z.string(),
  schedule: z.string(),
  hour: int,
  localHour: int,
  releases: releaseList,
  at: int,
});

/**
 * Persists scheduled hours with their releases, one statement per batch: the releases
 * go in only with their hour, so a replay inserts nothing twice. A second schedule of an
 * hour (after a Redis data loss) is a conflict.
 */
export const scheduleJournalKind = entryKind({
  kind: 'lottery.schedule',
  fields: scheduleFields,
  async persist(db, entries) {
    const hours = entries.map(({ fields }) => fields);
    const releases = hours.flatMap((hour) => hour.releases.map((release) => ({ ...release, scheduleId: hour.schedule })));
    const inserted = await db.query<{ schedule_id: string }>(Prisma.sql`
      WITH hours AS (
        INSERT INTO lottery_scheduled_hour (activity_id, hour_start, schedule_id, local_hour, released, scheduled_at)
        SELECT h.activity_id, to_timestamp(h.hour_ms / 1000.0), h.schedule_id, h.local_hour, h.released, to_timestamp(h.at_ms / 1000.0)
        FROM ${unnest('h', hours, {
          activity_id: ['text', (hour) => hour.activity],
          hour_ms: ['bigint', (hour) => hour.hour],
          schedule_id: ['text', (hour) => hour.schedule],
          local_hour: ['int', (hour) => hour.localHour],
          released: ['int', (hour) => hour.releases.length],
          at_ms: ['bigint', (hour) => hour.at],
        })}
        ON CONFLICT DO NOTHING
        RETURNING activity_id, hour_start, schedule_id
      ), releases AS (
        INSERT INTO lottery_release (prize_id, stock_unit, activity_id, hour_start, release_at)
        SELECT r.prize_id, r.unit, hours.activity_id, hours.hour_start, to_timestamp(r.at_ms / 1000.0)
        FROM ${unnest('r', releases, {
          prize_id: ['text', (release) => release.prizeId],
          unit: ['int', (release) => release.unit],
          at_ms: ['bigint', (release) => release.atMs],
          schedule_id: ['text', (release) => release.scheduleId],
        })}
        JOIN hours ON hours.schedule_id = r.schedule_id
        ON CONFLICT DO NOTHING
      )
      SELECT schedule_id FROM hours`);
    return conflictingEntries(
      entries,
      (hour) => hour.schedule,
      inserted.map((row) => row.schedule_id),
      async (ids) => (await db.prisma.lotteryScheduledHour.findMany({ where: { scheduleId: { in: ids } }, select: { scheduleId: true } })).map((row) => row.scheduleId),
    );
  },
});

/** Entries journaled before operators' requestIds existed carry none: null, as '' is. */
const blankOrAbsent = z
  .string()
  .optional()
  .transform((value) => value || null);

/** What lua/updateLotterySettings.lua journals for one change: the whole settings JSON of the new version. */
const settingsFields = z.object({
  activity: z.string(),
  version: int,
  settings: z.string(),
  by: z.string(),
  at: int,
  request: blankOrAbsent,
  digest: blankOrAbsent,
});

/**
 * Persists a settings change in one statement: the version's row in lottery_settings,
 * with the operator's requestId, and the activity and prize rows brought to it unless a
 * newer version is already there. A replay inserts nothing; a different change that got
 * the same version, or a requestId that made another version already (after a Redis
 * data loss), is a conflict.
 */
export const settingsJournalKind = entryKind({
  kind: 'lottery.settings',
  fields: settingsFields,
  async persist(db, entries) {
    const result: PersistResult = { conflicts: [], replayed: [] };
    for (const { entry, fields } of entries) {
      const [row] = await db.query<{ inserted: boolean; durable: boolean }>(Prisma.sql`
        WITH change AS (
          SELECT ${fields.activity}::text AS activity_id, ${fields.version}::int AS version, ${fields.settings}::jsonb AS settings,
            ${fields.by}::text AS changed_by, to_timestamp(${fields.at}::bigint / 1000.0) AS changed_at,
            ${fields.request}::text AS request_id, ${fields.digest}::text AS request_digest
        ), history AS (
          INSERT INTO lottery_settings (activity_id, version, settings, changed_by, changed_at, request_id, request_digest)
          SELECT activity_id, version, settings, changed_by, changed_at, request_id, request_digest FROM change
          ON CONFLICT DO NOTHING
          RETURNING version
        ), activity AS (
          UPDATE lottery_activity a
          SET ends_at = to_timestamp((c.settings->>'endsAtMs')::bigint / 1000.0), paused = (c.settings->>'paused')::boolean,
              no_prize_weight = (c.settings->>'noPrizeWeight')::int, daily_draw_limit = (c.settings->>'dailyDrawLimit')::int,
              daily_win_limit = (c.settings->>'dailyWinLimit')::int, settings_version = c.version
          FROM change c
          WHERE a.id = c.activity_id AND a.settings_version < c.version AND EXISTS (SELECT 1 FROM history)
          RETURNING a.id
        ), prizes AS (
          UPDATE lottery_prize p
          SET weight = x.weight, total_stock = x."totalStock", daily_stock = NULLIF(x."dailyStock", 0), hourly_quota = x."hourlyQuota"
          FROM change c, jsonb_to_recordset(c.settings->'prizes') AS x(id text, weight int, "totalStock" int, "dailyStock" int, "hourlyQuota" int[])
          WHERE p.id = x.id AND EXISTS (SELECT 1 FROM activity)
        )
        SELECT EXISTS (SELECT 1 FROM history) AS inserted,
          EXISTS (SELECT 1 FROM lottery_settings s JOIN change c USING (activity_id, version) WHERE s.settings = c.settings) AS durable`);
      if (!row?.inserted) (row?.durable ? result.replayed : result.conflicts).push(entry);
    }
    return result;
  },
});
