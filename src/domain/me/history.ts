import type { PrismaClient } from '../../generated/prisma/client.ts';
import { type KeysetPage, keysetPageArgs, numericId } from '../../infra/db/pages.ts';
import type { PrizeSnapshot } from '../lottery/store.ts';
import { type PrizeView, prizeView } from '../lottery/views.ts';
import type { RedPacketShareView } from '../redPackets/store.ts';

/** A share the user grabbed, with the grant id that pages it. */
export interface GrabbedShareView extends RedPacketShareView {
  id: string;
}

/** A lottery draw of the user's: won (with the prize as it was then) or lost. */
export interface UserDrawView {
  id: string;
  activityId: string;
  /** Null for a losing draw. */
  prize: PrizeView | null;
  drawnAt: Date;
  costPoints: number;
  settingsVersion: number;
}

/**
 * What a user's own lists read: PostgreSQL's record of what they did, newest first, a
 * keyset page at a time. Live state (a packet's remaining count) is read by each flow's
 * service; these only find which rows belong to the user.
 */
export class UserHistory {
  constructor(private readonly prisma: PrismaClient) {}

  async pointsLedger(userId: string, page: KeysetPage) {
    return this.prisma.pointsLedger.findMany(await keysetPageArgs(this.prisma.pointsLedger, page, { where: { userId }, orderBy: [{ id: 'desc' }], idOf: numericId }));
  }

  /** The ids of the red packets the user sent. */
  async redPacketsSent(userId: string, page: KeysetPage): Promise<string[]> {
    const rows = await this.prisma.redPacket.findMany({
      select: { id: true },
      ...(await keysetPageArgs(this.prisma.redPacket, page, { where: { senderId: userId }, orderBy: [{ createdAt: 'desc' }, { id: 'asc' }] })),
    });
    return rows.map((row) => row.id);
  }

  async sharesGrabbed(userId: string, page: KeysetPage): Promise<GrabbedShareView[]> {
    return this.prisma.redPacketGrab.findMany({
      select: { id: true, packetId: true, userId: true, amount: true, grabbedAt: true },
      ...(await keysetPageArgs(this.prisma.redPacketGrab, page, { where: { userId }, orderBy: [{ grabbedAt: 'desc' }, { id: 'asc' }] })),
    });
  }

  /**
   * The user's draws, of one activity or all. A cursor may name any draw of the user's: one
   * of another activity places the page by its time (a client narrowing the list keeps its place).
   */
  async draws(userId: string, activityId: string | null, page: KeysetPage): Promise<UserDrawView[]> {
    const rows = await this.prisma.lotteryDraw.findMany({
      select: { id: true, activityId: true, prizeSnapshot: true, drawnAt: true, costPoints: true, settingsVersion: true },
      ...(await keysetPageArgs(this.prisma.lotteryDraw, page, {
        where: { userId, ...(activityId === null ? {} : { activityId }) },
        cursorScope: { userId },
        orderBy: [{ drawnAt: 'desc' }, { id: 'asc' }],
      })),
    });
    return rows.map(({ prizeSnapshot, ...draw }) => ({ ...draw, prize: prizeSnapshot === null ? null : prizeView(draw.activityId, prizeSnapshot as PrizeSnapshot) }));
  }

  async goodsCatalog(page: KeysetPage) {
    return this.prisma.goods.findMany(await keysetPageArgs(this.prisma.goods, page, { where: {}, orderBy: [{ createdAt: 'desc' }, { id: 'asc' }] }));
  }
}
