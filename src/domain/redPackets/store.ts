import type { Redis } from 'ioredis';
import { type JournalEntry, journalEntry } from '../../infra/journal/journal.ts';
import { campaignKeys, keysExpireAt, retainUntil } from '../../infra/redis/keys.ts';
import type { Scripts } from '../../infra/redis/scripts.ts';
import type { SplitMode } from './split.ts';


export function redPacketKeys(packetId: string) {
  return campaignKeys('rp', packetId, ['meta', 'shares', 'grabs', 'journal', 'hydrating']);
}

/** What a packet is: fixed at creation, but for the refund recorded at settlement. */
interface RedPacketTerms {
  id: string;
  senderId: string;
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
  /** Set in the states subscribers get (`CommittedRedPacket`): the committed grabs, oldest first. */
  shares?: RedPacketShareView[];
  /** Set in the states subscribers get: the Redis time the state was read at, which its status is judged at. */
  asOfMs?: number;
}

export interface RedPacketShareView {
  /** The campaign whose alias rule shows `userId` to others. */
  packetId: string;
  userId: string;
  amount: number;
  grabbedAt: string;
}

/** A packet as PostgreSQL has committed it: `loadCommitted` in persistence.ts. */
export type CommittedRedPacket = Omit<RedPacketTerms, 'id'> & { expiresAt: Date; shares: RedPacketShareView[] };

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

export type GrabReply =
  | { kind: 'missing' }
  | { kind: 'granted'; shareIndex: number; amount: number; remainingCount: number; grabbedAtMs: number; entry: JournalEntry }
  | { kind: 'already'; shareIndex: number; amount: number; grabbedAtMs: number }
  | { kind: 'empty' }
  | { kind: 'expired' };

/** The red packet's Redis side: the grab script's binding, state reads, and rebuilds. */
export class RedPacketStore {
  constructor(private readonly redis: Redis, private readonly scripts: Scripts) {}

  async grab(packetId: string, userId: string, grantId: string): Promise<GrabReply> {
    const keys = redPacketKeys(packetId);
    const reply = (await this.scripts.run('grabRedPacket', [keys.meta, keys.shares, keys.grabs, keys.journal], [userId, grantId, packetId])) as unknown[];
    switch (reply[0]) {
      case 0:
        return { kind: 'missing' };
      case 1: {
        const [, shareIndex, amount, remainingCount, grabbedAtMs, entryId, fields] = reply as [number, number, number, number, number, string, string[]];
        return { kind: 'granted', shareIndex, amount, remainingCount, grabbedAtMs, entry: journalEntry(keys.journal, entryId, fields) };
      }
      case 2: {
        const [, shareIndex, amount, grabbedAtMs] = reply as number[];
        return { kind: 'already', shareIndex: shareIndex!, amount: amount!, grabbedAtMs: grabbedAtMs! };
      }
      case 3:
        return { kind: 'empty' };
      case 4:
        return { kind: 'expired' };
      default:
        throw new Error(`grabRedPacket returned an unknown reply: ${JSON.stringify(reply)}`);
    }
  }

  async readState(packetId: string): Promise<RedPacketState | null> {
    const meta = await this.redis.hgetall(redPacketKeys(packetId).meta);
    if (!meta.expiresAtMs) return null;
    const count = Number(meta.count);
    const remainingCount = Number(meta.remainingCount);
    const refundedAmount = meta.refundedAmount === undefined ? null : Number(meta.refundedAmount);
    return {
      id: packetId,
      senderId: meta.senderId!,
      totalAmount: Number(meta.totalAmount),
      count,
      mode: meta.mode as SplitMode,
      greeting: meta.greeting || null,
      expiresAt: new Date(Number(meta.expiresAtMs)).toISOString(),
      remainingCount,
      remainingAmount: Number(meta.remainingAmount),
      refundedAmount,
      version: count - remainingCount + (refundedAmount === null ? 0 : 1),
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

  async expireNow(packetId: string, nowMs: number): Promise<void> {
    await this.scripts.run('hsetIfExists', [redPacketKeys(packetId).meta], ['expiresAtMs', nowMs]);
  }

  async recordRefund(packetId: string, refundedAmount: number): Promise<void> {
    await this.scripts.run('hsetIfExists', [redPacketKeys(packetId).meta], ['refundedAmount', refundedAmount]);
  }

  /** Drops the meta key so the next access rebuilds the packet from PostgreSQL. */
  async invalidate(packetId: string): Promise<void> {
    await this.redis.del(redPacketKeys(packetId).meta);
  }

  async journalLength(packetId: string): Promise<number> {
    return this.redis.xlen(redPacketKeys(packetId).journal);
  }
}
