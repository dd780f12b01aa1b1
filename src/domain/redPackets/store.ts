import type { Missing } from '../../infra/campaign/campaign.ts';
import type { RedisClient } from '../../infra/redis/connection.ts';
import { campaignKeys, keysExpireAt, retainUntil } from '../../infra/redis/keys.ts';
import { type ReplyOf, type Scripts, defineScript } from '../../infra/redis/scripts.ts';
import { hsetIfExists } from '../../infra/redis/sharedScripts.ts';
import type { SplitMode } from './split.ts';

export function redPacketKeys(packetId: string) {
  return campaignKeys('rp', packetId, ['meta', 'shares', 'grabs', 'journal', 'rebuilding']);
}

/** Who paid for a packet: the sender's wallet, or the shop (operators only). */
export type RedPacketFunding = 'WALLET' | 'SHOP';

/** What a packet is: fixed at creation, but for the refund recorded after expiry. */
interface RedPacketTerms {
  id: string;
  senderId: string;
  fundedBy: RedPacketFunding;
  totalAmount: number;
  count: number;
  mode: SplitMode;
  greeting: string | null;
  /** Null until a settlement is recorded (in PostgreSQL first, then here). */
  refundedAmount: number | null;
}

/** A packet's live state, as the API and subscribers see it. Serializable, so it can be published as is. */
export interface RedPacketState extends RedPacketTerms {
  expiresAt: string;
  remainingCount: number;
  remainingAmount: number;
  /** Grows with every change: one per grab, one for the settlement. */
  version: number;
  /**
   * Set in the states subscribers get (`CommittedRedPacket`), which are published as they
   * are and so stay small whatever the packet's size: the newest committed grabs (at most
   * LATEST_SHARES_MAX), newest first; the largest; and which shares are committed.
   */
  latestShares?: RedPacketShareView[];
  bestLuck?: RedPacketShareView | null;
  committedShares?: string;
  /**
   * The Redis time the state was read at, which its status is judged at: the clock grabs
   * are judged by, not the instance's own, which may lag or lead it.
   */
  asOfMs: number;
}

/** One grabbed share, as the API shows it. */
export interface RedPacketShareView {
  /** The campaign whose alias rule shows `userId` to others. */
  packetId: string;
  userId: string;
  amount: number;
  /** A Date, or its ISO text in a state read from JSON. */
  grabbedAt: Date | string;
}

/** A packet as PostgreSQL has committed it: `loadCommitted` in persistence.ts. */
export type CommittedRedPacket = Omit<RedPacketTerms, 'id'> &
  Required<Pick<RedPacketState, 'latestShares' | 'bestLuck' | 'committedShares'>> & { expiresAt: Date; grabbedCount: number; grabbedAmount: number };

/** The most newest shares a state carries, and RedPacket.latestShares gives. */
export const LATEST_SHARES_MAX = 50;

/**
 * Which shares a snapshot holds, as a bitmap over share indexes (base64: 1.7 kB for
 * 10,000 shares): what a subscriber that asks for every share reads them by, so they
 * agree with the counts of its event although they are read later.
 */
export function committedSharesOf(shareIndexes: number[]): string {
  const bits = Buffer.alloc(Math.ceil((Math.max(-1, ...shareIndexes) + 1) / 8));
  for (const index of shareIndexes) bits[index >> 3]! |= 1 << (index & 7);
  return bits.toString('base64');
}

export function isCommittedShare(committedShares: Buffer, shareIndex: number): boolean {
  return ((committedShares[shareIndex >> 3] ?? 0) & (1 << (shareIndex & 7))) !== 0;
}

export type RedPacketStatus = 'ACTIVE' | 'EMPTY' | 'EXPIRED';

export function redPacketStatus(state: RedPacketState, nowMs: number): RedPacketStatus {
  if (state.remainingCount === 0) return 'EMPTY';
  return nowMs >= Date.parse(state.expiresAt) ? 'EXPIRED' : 'ACTIVE';
}

/** Everything needed to rebuild a packet's keys: its row and the grabs PostgreSQL holds. */
export interface RedPacketSnapshot extends RedPacketTerms {
  expiresAt: Date;
  shareAmounts: number[];
  grabs: { userId: string; shareIndex: number; amount: number; grabbedAt: Date }[];
}

const grabRedPacket = defineScript('grabRedPacket', ['meta', 'shares', 'grabs', 'journal'], {
  missing: () => ({}),
  granted: (values, keys) => ({
    shareIndex: values.num(0),
    amount: values.num(1),
    remainingCount: values.num(2),
    grabbedAtMs: values.num(3),
    entry: values.entry(4, keys.journal)!,
  }),
  already: (values) => ({ shareIndex: values.num(0), amount: values.num(1), grabbedAtMs: values.num(2) }),
  empty: () => ({}),
  expired: () => ({}),
});

const expireRedPacket = defineScript('expireRedPacket', ['meta'], {
  missing: () => ({}),
  expired: (values) => ({ expiresAtMs: values.num(0) }),
});

export type GrabReply = Exclude<ReplyOf<typeof grabRedPacket.replies>, Missing>;

/** The red packet's Redis side: the grab script's binding, state reads, and rebuilds. */
export class RedPacketStore {
  constructor(
    private readonly redis: RedisClient,
    private readonly scripts: Scripts,
  ) {}

  grab(packetId: string, userId: string, grantId: string) {
    return this.scripts.call(grabRedPacket, redPacketKeys(packetId), [userId, grantId, packetId]);
  }

  /** One round trip (MULTI): the packet's meta and the Redis time it was read at, from the node a grab runs on. */
  async readState(packetId: string): Promise<RedPacketState | null> {
    const results = await this.redis.multi().hgetall(redPacketKeys(packetId).meta).time().exec();
    if (!results) return null;
    for (const [error] of results) if (error) throw error;
    const [meta, time] = results.map(([, value]) => value) as [Record<string, string>, [string, string]];
    if (!meta.expiresAtMs) return null;
    const count = Number(meta.count);
    const remainingCount = Number(meta.remainingCount);
    const refundedAmount = meta.refundedAmount === undefined ? null : Number(meta.refundedAmount);
    return {
      id: packetId,
      senderId: meta.senderId!,
      // Keys written before packets were funded carry no field: those packets were the shop's.
      fundedBy: meta.fundedBy === 'WALLET' ? 'WALLET' : 'SHOP',
      totalAmount: Number(meta.totalAmount),
      count,
      mode: meta.mode as SplitMode,
      greeting: meta.greeting || null,
      expiresAt: new Date(Number(meta.expiresAtMs)).toISOString(),
      remainingCount,
      remainingAmount: Number(meta.remainingAmount),
      refundedAmount,
      version: count - remainingCount + (refundedAmount === null ? 0 : 1),
      asOfMs: Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000),
    };
  }

  /** Writes every key of the packet in one transaction, replacing whatever was there. */
  async write(snapshot: RedPacketSnapshot): Promise<void> {
    const keys = redPacketKeys(snapshot.id);
    const taken = new Set(snapshot.grabs.map((grab) => grab.shareIndex));
    const remaining = snapshot.shareAmounts.flatMap((amount, index) => (taken.has(index) ? [] : [`${index}:${amount}`]));
    const expireAt = keysExpireAt(retainUntil(snapshot.expiresAt.getTime()));
    const meta: Record<string, string | number> = {
      senderId: snapshot.senderId,
      fundedBy: snapshot.fundedBy,
      totalAmount: snapshot.totalAmount,
      count: snapshot.count,
      mode: snapshot.mode,
      greeting: snapshot.greeting ?? '',
      expiresAtMs: snapshot.expiresAt.getTime(),
      remainingCount: remaining.length,
      remainingAmount: snapshot.totalAmount - snapshot.grabs.reduce((sum, grab) => sum + grab.amount, 0),
    };
    if (snapshot.refundedAmount !== null) meta.refundedAmount = snapshot.refundedAmount;

    const tx = this.redis.multi().del(keys.meta, keys.shares, keys.grabs);
    if (remaining.length > 0) tx.rpush(keys.shares, ...remaining).pexpireat(keys.shares, expireAt);
    if (snapshot.grabs.length > 0) {
      tx.hset(keys.grabs, Object.fromEntries(snapshot.grabs.map((grab) => [grab.userId, `${grab.shareIndex}:${grab.amount}:${grab.grabbedAt.getTime()}`])));
      tx.pexpireat(keys.grabs, expireAt);
    }
    tx.hset(keys.meta, meta).pexpireat(keys.meta, expireAt);
    await tx.exec();
  }

  /** Ends the packet now by Redis time, unless it expired already: the expiry in force, or null when its keys are gone. */
  async endNow(packetId: string): Promise<number | null> {
    const reply = await this.scripts.call(expireRedPacket, { meta: redPacketKeys(packetId).meta }, []);
    return reply.kind === 'expired' ? reply.expiresAtMs : null;
  }

  async recordRefund(packetId: string, refundedAmount: number): Promise<void> {
    await this.scripts.call(hsetIfExists, { hash: redPacketKeys(packetId).meta }, ['refundedAmount', refundedAmount]);
  }

  async journalLength(packetId: string): Promise<number> {
    return this.redis.xlen(redPacketKeys(packetId).journal);
  }
}
