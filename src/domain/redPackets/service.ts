import { randomUUID } from 'node:crypto';
import { ruleInputIssue } from '../../i18n/issues.ts';
import { Campaign } from '../../infra/campaign/campaign.ts';
import { type KeysetPage, keysetPageArgs } from '../../infra/db/pages.ts';
import { retainUntil } from '../../infra/redis/keys.ts';
import { redisTimeMs } from '../../infra/redis/time.ts';
import type { CampaignDeps } from '../deps.ts';
import { BadInputError, ServiceUnavailableError } from '../errors.ts';
import { InsufficientFunds } from '../money/problems.ts';
import { walletBalance } from '../money/wallets.ts';
import { NotFound } from '../problems.ts';
import { cryptoRandom } from '../random.ts';
import type { CreateRedPacketInput } from './input.ts';
import { type PacketOfRequest, grabJournalKind, insertPacket, loadCommitted, loadSnapshot, packetOfRequest, packetsDueForRefund, recordedRefund, refundRemainder } from './persistence.ts';
import { AlreadyGrabbed, RedPacketEmpty, RedPacketExpired } from './problems.ts';
import { splitAmount, widestMaxAmount } from './split.ts';
import { type RedPacketShareView, type RedPacketSnapshot, type RedPacketState, RedPacketStore, isCommittedShare, redPacketKeys } from './store.ts';

export interface GrabbedShare {
  packetId: string;
  amount: number;
  remainingCount: number;
  grabbedAt: Date;
}

export class GrabNotConfirmedError extends ServiceUnavailableError {}

export type RedPacketDeps = CampaignDeps;

const REFUND_BATCH = 100;

export class RedPacketService {
  private readonly store: RedPacketStore;
  private readonly packets: Campaign<string, RedPacketSnapshot, RedPacketState>;
  /** Reads of a snapshot's shares in flight, by packet and snapshot. */
  private readonly snapshotReads = new Map<string, Promise<RedPacketShareView[]>>();

  constructor(private readonly deps: RedPacketDeps) {
    this.store = new RedPacketStore(deps.redis, deps.scripts);
    this.packets = new Campaign(deps, {
      name: 'red packet',
      keys: redPacketKeys,
      load: (packetId) => loadSnapshot(deps.prisma, packetId),
      write: (snapshot) => this.store.write(snapshot),
      retainUntilMs: (snapshot) => retainUntil(snapshot.expiresAt.getTime()),
      live: {
        topic: (packetId) => `redPacket:${packetId}`,
        state: (packetId) => this.committedState(packetId),
        versionOf: (state) => state.version,
        isFinal: (state) => state.remainingCount === 0 || state.refundedAmount !== null,
        // Nothing is published at expiry (the refund comes up to a sweep later): every
        // instance with watchers reloads at the instant, judged by Redis time.
        changesIn: (state) => (state.asOfMs < Date.parse(state.expiresAt) ? Date.parse(state.expiresAt) - state.asOfMs : null),
      },
    });
    // Of an entry too broken to decode, whatever packet it names.
    this.packets.persistsWith(grabJournalKind, ({ fields }) => (fields.packet ? [fields.packet] : []));
  }

  /**
   * Splits and creates the packet. A WALLET packet debits the sender's wallet in the
   * statement that inserts it (insertPacket); without the funds it throws
   * InsufficientFunds and nothing is created. With a requestId, a retry (after a timeout,
   * or racing the first call) gets the first packet, created and debited once.
   */
  async create(senderId: string, input: CreateRedPacketInput): Promise<RedPacketState> {
    const { requestId } = input;
    if (!requestId) return this.createOnce(senderId, input);
    const first = await packetOfRequest(this.deps.prisma, senderId, requestId);
    if (first) return this.firstOfRequest(first, input, requestId);
    try {
      return await this.createOnce(senderId, input);
    } catch (error) {
      // The unique (sender, requestId) refused this call, or the wallet held too little
      // after a racing call with the same requestId debited it: that one answers for both.
      const winner = await packetOfRequest(this.deps.prisma, senderId, requestId);
      if (!winner) throw error;
      return this.firstOfRequest(winner, input, requestId);
    }
  }

  /** The packet first created under a requestId, if the retry asks for the same packet. */
  private async firstOfRequest(first: PacketOfRequest, input: CreateRedPacketInput, requestId: string): Promise<RedPacketState> {
    const same =
      first.totalAmount === input.totalAmount &&
      first.count === input.count &&
      first.mode === input.mode &&
      first.fundedBy === input.fundedBy &&
      first.minAmount === input.minAmount &&
      (input.maxAmount == null || first.maxAmount === input.maxAmount) &&
      first.greeting === (input.greeting ?? null);
    if (!same) throw BadInputError.of([ruleInputIssue(['input', 'requestId'], 'REQUEST_ID_OF_ANOTHER_PACKET', { requestId })]);
    const state = await this.get(first.id);
    if (!state) throw new NotFound('red packet', first.id);
    return state;
  }

  private async createOnce(senderId: string, input: CreateRedPacketInput): Promise<RedPacketState> {
    const maxAmount = input.maxAmount ?? widestMaxAmount(input.totalAmount, input.count, input.minAmount);
    const shareAmounts = splitAmount({ ...input, maxAmount }, this.deps.random ?? cryptoRandom);
    const expiresAt = new Date((await redisTimeMs(this.deps.redis)) + input.expiresInSeconds * 1000);
    const packet = { ...input, id: randomUUID(), senderId, maxAmount, greeting: input.greeting ?? null, shareAmounts, expiresAt };
    await this.packets.create(packet.id, async () => {
      if (!(await insertPacket(this.deps.prisma, packet))) throw new InsufficientFunds(await walletBalance(this.deps.prisma, senderId), input.totalAmount);
      return { ...packet, refundedAmount: null, grabs: [] };
    });
    return (await this.store.readState(packet.id))!;
  }

  /** Takes one share for the user. Resolves only once the grab is committed in PostgreSQL. */
  async grab(userId: string, packetId: string): Promise<GrabbedShare> {
    const reply = await this.packets.journaled(packetId, {
      call: () => this.store.grab(packetId, userId, randomUUID()),
      entryOf: (grab) => (grab.kind === 'granted' ? grab.entry : null),
      unavailable: () => new GrabNotConfirmedError('the red packet is being rebuilt; try again'),
    });
    if (!reply) throw new NotFound('red packet', packetId);
    switch (reply.kind) {
      case 'already':
        throw new AlreadyGrabbed({ packetId, userId, amount: reply.amount, grabbedAt: new Date(reply.grabbedAtMs) });
      case 'empty':
        throw new RedPacketEmpty();
      case 'expired':
        throw new RedPacketExpired(await this.expiresAt(packetId));
      case 'granted':
        this.packets.publish(packetId);
        return { packetId, amount: reply.amount, remainingCount: reply.remainingCount, grabbedAt: new Date(reply.grabbedAtMs) };
    }
  }

  /**
   * Ends a packet now (an operator stopping a campaign early). The refund worker then
   * returns what is left, as for any expired packet.
   */
  async close(packetId: string): Promise<RedPacketState> {
    const now = new Date(await redisTimeMs(this.deps.redis));
    // PostgreSQL first: it is what a rebuild reads, so a crash in between cannot reopen the packet.
    await this.packets.changeDurably(packetId, async () => {
      await this.deps.prisma.redPacket.updateMany({ where: { id: packetId, expiresAt: { gt: now } }, data: { expiresAt: now } });
      // Then Redis, even when PostgreSQL was closed already: a close that failed after its
      // first step is mended by sending it again. Grabs go on until the script ends the
      // packet, so its end is the one recorded: no grab is dated after it.
      const endedAtMs = await this.store.endNow(packetId);
      if (endedAtMs !== null) {
        await this.deps.prisma.redPacket.updateMany({ where: { id: packetId, expiresAt: { lt: new Date(endedAtMs) } }, data: { expiresAt: new Date(endedAtMs) } });
      }
    });
    // Watchers wait for the old expiry; EXPIRED goes out now, the refund when it is made.
    this.packets.publish(packetId);
    const state = await this.get(packetId);
    if (!state) throw new NotFound('red packet', packetId);
    return state;
  }

  async get(packetId: string): Promise<RedPacketState | null> {
    const state = await this.loaded(packetId);
    if (state && state.refundedAmount === null && Date.parse(state.expiresAt) <= state.asOfMs) return this.withDurableRefund(state);
    return state;
  }

  /** The packet's state from Redis, rebuilt from PostgreSQL if its keys are gone. */
  private loaded(packetId: string): Promise<RedPacketState | null> {
    return this.packets.read(packetId, () => this.store.readState(packetId));
  }

  /**
   * A refund is recorded in PostgreSQL, then in Redis. A crash in between must
   * not hide the refund, so an expired packet without one in Redis checks PostgreSQL.
   */
  private async withDurableRefund(state: RedPacketState): Promise<RedPacketState> {
    const refundedAmount = await recordedRefund(this.deps.prisma, state.id);
    if (refundedAmount === null) return state;
    await this.store.recordRefund(state.id, refundedAmount);
    return { ...state, refundedAmount, version: state.version + 1 };
  }

  /**
   * The packet now, then after grabs (a burst merged into one event), at the expiry
   * instant, and at the refund; it completes once EMPTY, or EXPIRED and refunded.
   */
  watch(packetId: string): AsyncIterableIterator<RedPacketState> {
    return this.packets.watch(packetId);
  }

  /**
   * What subscribers see: only committed grabs, with counts and amounts derived from the
   * same snapshot, since Redis counts a grab before its commit. Every state is published
   * after the commits it shows, so a post-commit state is always newer than anything a
   * subscriber saw. The version counts grabs and the refund (twice,
   * so a snapshot with one more grab outranks one read a moment later across the expiry
   * instant) plus one once expired.
   */
  private async committedState(packetId: string): Promise<RedPacketState | null> {
    const packet = await loadCommitted(this.deps.prisma, packetId);
    if (!packet) return null;
    const asOfMs = await redisTimeMs(this.deps.redis);
    const { grabbedCount, grabbedAmount, ...terms } = packet;
    const expired = asOfMs >= packet.expiresAt.getTime();
    return {
      ...terms,
      id: packetId,
      expiresAt: packet.expiresAt.toISOString(),
      remainingCount: packet.count - grabbedCount,
      remainingAmount: packet.totalAmount - grabbedAmount,
      version: 2 * (grabbedCount + (packet.refundedAmount === null ? 0 : 1)) + (expired ? 1 : 0),
      asOfMs,
    };
  }

  /**
   * Grabbed shares, oldest first. Only committed grabs, which is every acknowledged one;
   * with `committedShares` (a subscriber's state), only those of that snapshot.
   */
  shares(packetId: string, committedShares?: string): Promise<RedPacketShareView[]> {
    const all = () => this.deps.prisma.redPacketGrab.findMany({ where: { packetId }, orderBy: [{ grabbedAt: 'asc' }, { shareIndex: 'asc' }, { id: 'asc' }] });
    if (committedShares === undefined) return all();
    // Every subscriber of an event renders it at about the same time: they share one read.
    const key = `${packetId}:${committedShares}`;
    let read = this.snapshotReads.get(key);
    if (!read) {
      const bits = Buffer.from(committedShares, 'base64');
      read = all()
        .then((shares) => shares.filter((share) => isCommittedShare(bits, share.shareIndex)))
        .finally(() => this.snapshotReads.delete(key));
      this.snapshotReads.set(key, read);
    }
    return read;
  }

  /**
   * A page of the grabbed shares, oldest first; a cursor is a grant id. Share indexes are
   * unique in a packet, yet the id ends the order: Prisma knows only it as unique (keysetPageArgs).
   */
  async sharesPage(packetId: string, page: KeysetPage) {
    const { prisma } = this.deps;
    return prisma.redPacketGrab.findMany(await keysetPageArgs(prisma.redPacketGrab, page, { where: { packetId }, orderBy: [{ grabbedAt: 'asc' }, { shareIndex: 'asc' }, { id: 'asc' }] }));
  }

  /** The newest `count` grabbed shares, newest first. */
  latestShares(packetId: string, count: number) {
    return this.deps.prisma.redPacketGrab.findMany({ where: { packetId }, orderBy: [{ grabbedAt: 'desc' }, { shareIndex: 'desc' }], take: count });
  }

  /** The user's committed share of the packet, if any. */
  shareOf(packetId: string, userId: string) {
    return this.deps.prisma.redPacketGrab.findUnique({ where: { packetId_userId: { packetId, userId } } });
  }

  /** The largest share, the earliest grab on a tie. */
  bestLuck(packetId: string) {
    return this.deps.prisma.redPacketGrab.findFirst({
      where: { packetId },
      orderBy: [{ amount: 'desc' }, { grabbedAt: 'asc' }, { shareIndex: 'asc' }],
    });
  }

  /**
   * Refunds what expired packets have left, whether or not anyone asks about them.
   * A packet that fails is logged and tried again next round; the others go on.
   */
  async refundExpired(): Promise<number> {
    let refunded = 0;
    for (const packetId of await packetsDueForRefund(this.deps.prisma, REFUND_BATCH)) {
      try {
        if (await this.refundIfDue(packetId)) refunded++;
      } catch (error) {
        // The oldest come first: one that always fails would otherwise hold back every refund.
        this.deps.log.error({ err: error, packetId }, 'could not refund an expired red packet; tried again next round');
      }
    }
    return refunded;
  }

  /**
   * Refunds the packet if it has expired and its journal is empty: after expiry no grab
   * can be added, so an empty journal means every grab is in PostgreSQL. Whether it did.
   */
  private async refundIfDue(packetId: string): Promise<boolean> {
    // PostgreSQL just listed it as not refunded, so there is no recorded refund to pick up.
    const state = await this.loaded(packetId);
    if (!state || Date.parse(state.expiresAt) > state.asOfMs) return false;
    if ((await this.store.journalLength(packetId)) > 0) return false;
    const refundedAmount = await refundRemainder(this.deps.prisma, packetId);
    if (refundedAmount === null) return false;
    if (refundedAmount !== state.remainingAmount) {
      this.deps.log.error({ packetId, refundedAmount, redisRemaining: state.remainingAmount }, 'refund differs from the amount Redis holds');
    }
    await this.store.recordRefund(packetId, refundedAmount);
    this.deps.log.info({ packetId, senderId: state.senderId, refundedAmount }, 'refunded an expired red packet');
    this.packets.publish(packetId);
    return true;
  }

  private async expiresAt(packetId: string): Promise<Date> {
    const state = await this.store.readState(packetId);
    return state ? new Date(state.expiresAt) : new Date();
  }
}
