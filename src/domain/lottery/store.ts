import type { Missing } from '../../infra/campaign/campaign.ts';
import type { RedisClient } from '../../infra/redis/connection.ts';
import { campaignKeys, keysExpireAt } from '../../infra/redis/keys.ts';
import { type ReplyOf, type ReplyValues, type Scripts, defineScript } from '../../infra/redis/scripts.ts';
import { DRAW_RANDOM_RANGE, type LotterySettings, type PrizeSettings, RELEASE_RANDOM_RANGE } from './settings.ts';

export function lotteryKeys(activityId: string) {
  return campaignKeys('lot', activityId, ['meta', 'stock', 'daily', 'requests', 'releases', 'hours', 'changes', 'journal', 'rebuilding']);
}

/** An operator's requestId for a change, and the digest of the change's input. */
export interface ChangeRequest {
  requestId: string;
  digest: string;
}

/** A change an operator made under a requestId: the settings version it made. */
export interface RecordedChange extends ChangeRequest {
  changedBy: string;
  version: number;
}

/** The `changes` hash's field for an operator's requestId (user ids hold no line feed). */
const changeField = (changedBy: string, requestId: string) => `${changedBy}\n${requestId}`;

/** A requestId that made a change already: the version it made, and the digest of that change's input. */
export interface RepeatedChange {
  kind: 'repeated';
  version: number;
  digest: string;
}

/** What the `changes` hash records for a requestId (lua/updateLotterySettings.lua): "<version>|<digest>". */
function repeatedChange(recorded: string): RepeatedChange {
  const bar = recorded.indexOf('|');
  return { kind: 'repeated', version: Number(recorded.slice(0, bar)), digest: recorded.slice(bar + 1) };
}

/** The prize fields a draw snapshots (lua/drawLottery.lua `prize_json`). */
export type PrizeSnapshot = Omit<PrizeSettings, 'hourlyQuota'>;

export type InactiveReason = 'ENDED' | 'PAUSED' | 'NOT_STARTED' | 'SOLD_OUT' | 'SOLD_OUT_TODAY' | 'NOTHING_RELEASED';

export interface DrawRequest {
  activityId: string;
  userId: string;
  drawId: string;
  requestId: string | null;
  /** Uniform in [0, DRAW_RANDOM_RANGE). */
  randomInput: number;
  clockOffsetMs: number;
  /** The points reserved for this draw id; 0 for a free draw. */
  paidPoints?: number;
}

/** Everything needed to rebuild an activity's keys, read from PostgreSQL. */
export interface LotterySnapshot {
  activityId: string;
  settings: LotterySettings;
  /** Units of each prize not yet won (or, for scheduled prizes, not yet scheduled). */
  stockLeft: Map<string, number>;
  /** The local day the counters below belong to. */
  day: number;
  drawsToday: Map<string, number>;
  winsToday: Map<string, number>;
  prizeWinsToday: Map<string, number>;
  requests: { userId: string; requestId: string; drawId: string; prizeId: string | null; drawnAtMs: number; settingsVersion: number }[];
  /** Operators' changes made under a requestId. */
  changes: RecordedChange[];
  /** TIMED: released or scheduled units nobody has drawn yet. */
  releases: { prizeId: string; stockUnit: number; releaseAtMs: number }[];
  scheduledHours: number[];
}

const WRITE_CHUNK = 1000;
/** How many times a script refused for stale settings is called again over fresh ones. */
const STALE_ATTEMPTS = 3;

/** A new activity's keys: full stock, no draw yet. */
export function emptySnapshot(activityId: string, settings: LotterySettings, day: number): LotterySnapshot {
  return {
    activityId,
    settings,
    stockLeft: new Map(settings.prizes.map((prize) => [prize.id, prize.totalStock])),
    day,
    drawsToday: new Map(),
    winsToday: new Map(),
    prizeWinsToday: new Map(),
    requests: [],
    changes: [],
    releases: [],
    scheduledHours: [],
  };
}

function prizeOf(values: ReplyValues, index: number): PrizeSnapshot | null {
  const json = values.str(index);
  return json === '' ? null : (JSON.parse(json) as PrizeSnapshot);
}

const drawLottery = defineScript('drawLottery', ['meta', 'stock', 'daily', 'requests', 'releases', 'journal'], {
  missing: () => ({}),
  drawn: (values, keys) => ({
    drawId: values.str(0),
    drawnAtMs: values.num(1),
    prize: prizeOf(values, 2),
    settingsVersion: values.num(3),
    entry: values.entry(4, keys.journal)!,
  }),
  repeated: (values) => ({ drawId: values.str(0), drawnAtMs: values.num(1), prize: prizeOf(values, 2), settingsVersion: values.num(3) }),
  inactive: (values) => ({ reason: values.str(0) as InactiveReason, startsAtMs: values.num(1), endsAtMs: values.num(2), nowMs: values.num(3), availableAtMs: values.num(4) }),
  limit: (values) => ({ dailyDrawLimit: values.num(0), resetsAtMs: values.num(1) }),
  winLimit: (values) => ({ dailyWinLimit: values.num(0), resetsAtMs: values.num(1) }),
  reroll: () => ({}),
  unpaid: (values) => ({ drawCostPoints: values.num(0) }),
});

const scheduleLotteryHour = defineScript('scheduleLotteryHour', ['meta', 'stock', 'releases', 'hours', 'journal'], {
  missing: () => ({}),
  scheduled: (values, keys) => ({ released: values.num(0), entry: values.entry(1, keys.journal)! }),
  already: () => ({}),
  stale: () => ({}),
});

const updateLotterySettings = defineScript('updateLotterySettings', ['meta', 'stock', 'journal', 'daily', 'requests', 'releases', 'hours', 'changes'], {
  missing: () => ({}),
  applied: (values, keys) => ({ entry: values.entry(0, keys.journal)! }),
  repeated: (values) => repeatedChange(values.str(0)),
  stale: () => ({}),
  ended: () => ({}),
});

export type DrawReply = ReplyOf<typeof drawLottery.replies>;
export type ScheduleReply = ReplyOf<typeof scheduleLotteryHour.replies>;
export type UpdateReply = ReplyOf<typeof updateLotterySettings.replies>;

/** The lottery's Redis side: the script bindings, settings reads, and rebuilds. */
export class LotteryStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
  ) {}

  draw(request: DrawRequest): Promise<DrawReply> {
    return this.scripts.call(drawLottery, lotteryKeys(request.activityId), [
      request.userId,
      request.drawId,
      request.requestId ?? '',
      request.randomInput,
      DRAW_RANDOM_RANGE,
      request.clockOffsetMs,
      request.activityId,
      request.paidPoints ?? 0,
    ]);
  }

  scheduleHour(activityId: string, scheduleId: string, hourStartMs: number, localHour: number, settingsVersion: number, randoms: number[]): Promise<ScheduleReply> {
    return this.scripts.call(scheduleLotteryHour, lotteryKeys(activityId), [activityId, scheduleId, hourStartMs, localHour, settingsVersion, RELEASE_RANDOM_RANGE, ...randoms]);
  }

  /**
   * `clockOffsetMs`: the app clock's offset from Redis time (ScriptClock), against which
   * the end is checked. With a `request`, the change is recorded under it, or answered
   * `repeated` when the requestId made one already.
   */
  updateSettings(
    activityId: string,
    replacing: number,
    settings: LotterySettings,
    changedBy: string,
    request: ChangeRequest | null,
    topUps: Map<string, number>,
    clockOffsetMs: number,
  ): Promise<UpdateReply> {
    return this.scripts.call(updateLotterySettings, lotteryKeys(activityId), [
      activityId,
      replacing,
      JSON.stringify(settings),
      changedBy,
      clockOffsetMs,
      request?.requestId ?? '',
      request?.digest ?? '',
      ...[...topUps].flat(),
    ]);
  }

  /** The change the operator's requestId made, as updateSettings recorded it; null for none. */
  async changeOf(activityId: string, changedBy: string, requestId: string): Promise<RepeatedChange | null> {
    const recorded = await this.redis.hget(lotteryKeys(activityId).changes, changeField(changedBy, requestId));
    return recorded === null ? null : repeatedChange(recorded);
  }

  /**
   * Calls a script over the settings Redis holds now, and over newer ones while it
   * answers `stale` (another change got in between), a few times at most.
   */
  async overCurrentSettings<Reply extends { kind: string }>(activityId: string, call: (settings: LotterySettings) => Promise<Reply>): Promise<Reply | Missing> {
    for (let attempt = 1; ; attempt++) {
      const settings = await this.readSettings(activityId);
      if (!settings) return { kind: 'missing' };
      const reply = await call(settings);
      if (reply.kind !== 'stale' || attempt === STALE_ATTEMPTS) return reply;
    }
  }

  async readSettings(activityId: string): Promise<LotterySettings | null> {
    const json = await this.redis.hget(lotteryKeys(activityId).meta, 'settings');
    return json ? (JSON.parse(json) as LotterySettings) : null;
  }

  async scheduledHours(activityId: string): Promise<Set<number>> {
    return new Set((await this.redis.smembers(lotteryKeys(activityId).hours)).map(Number));
  }

  /** Writes every key of the activity in one transaction, replacing whatever was there; meta last. */
  async write(snapshot: LotterySnapshot): Promise<void> {
    const { settings } = snapshot;
    const keys = lotteryKeys(snapshot.activityId);
    const expireAt = keysExpireAt(settings.retainUntilMs);
    const tx = this.redis.multi().del(keys.meta, keys.stock, keys.daily, keys.requests, keys.releases, keys.hours, keys.changes);
    tx.hset(keys.stock, Object.fromEntries(snapshot.stockLeft)).pexpireat(keys.stock, expireAt);

    const daily: (string | number)[] = ['day', snapshot.day];
    for (const [user, count] of snapshot.drawsToday) daily.push(`d:${user}`, count);
    for (const [user, count] of snapshot.winsToday) daily.push(`w:${user}`, count);
    for (const [prizeId, count] of snapshot.prizeWinsToday) daily.push(`s:${prizeId}`, count);
    for (let i = 0; i < daily.length; i += 2 * WRITE_CHUNK) tx.hset(keys.daily, ...daily.slice(i, i + 2 * WRITE_CHUNK));
    tx.pexpireat(keys.daily, expireAt);

    for (let i = 0; i < snapshot.requests.length; i += WRITE_CHUNK) {
      const chunk = snapshot.requests.slice(i, i + WRITE_CHUNK);
      tx.hset(
        keys.requests,
        ...chunk.flatMap((request) => [`${request.userId}\n${request.requestId}`, `${request.drawId}|${request.prizeId ?? ''}|${request.drawnAtMs}|${request.settingsVersion}`]),
      );
    }
    if (snapshot.requests.length > 0) tx.pexpireat(keys.requests, expireAt);

    if (snapshot.changes.length > 0) {
      tx.hset(keys.changes, Object.fromEntries(snapshot.changes.map((change) => [changeField(change.changedBy, change.requestId), `${change.version}|${change.digest}`])));
      tx.pexpireat(keys.changes, expireAt);
    }

    for (let i = 0; i < snapshot.releases.length; i += WRITE_CHUNK) {
      const chunk = snapshot.releases.slice(i, i + WRITE_CHUNK);
      tx.zadd(keys.releases, ...chunk.flatMap((release) => [release.releaseAtMs, `${release.prizeId}:${release.stockUnit}`]));
    }
    if (snapshot.releases.length > 0) tx.pexpireat(keys.releases, expireAt);

    if (snapshot.scheduledHours.length > 0) tx.sadd(keys.hours, ...snapshot.scheduledHours).pexpireat(keys.hours, expireAt);

    tx.hset(keys.meta, { settings: JSON.stringify(settings), version: settings.version }).pexpireat(keys.meta, expireAt);
    await tx.exec();
  }
}
