import type { PrismaClient } from '../../generated/prisma/client.ts';
import { type KeysetPage, keysetArgs, keysetArgsFromAnyRow, notACursorOfTheList, numericId } from '../../infra/db/pages.ts';
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

  pointsLedger(userId: string, page: KeysetPage) {
    return this.prisma.pointsLedger.findMany({ where: { userId }, ...keysetArgs(page, [{ id: 'desc' }], (id) => ({ id: numericId(id) })) });
  }

  /** The ids of the red packets the user sent. */
  async redPacketsSent(userId: string, page: KeysetPage): Promise<string[]> {
    const rows = await this.prisma.redPacket.findMany({
      where: { senderId: userId },
      select: { id: true },
      ...keysetArgs(page, [{ createdAt: 'desc' }, { id: 'asc' }], (id) => ({ id })),
    });
    return rows.map((row) => row.id);
  }

  sharesGrabbed(userId: string, page: KeysetPage): Promise<GrabbedShareView[]> {
    return this.prisma.redPacketGrab.findMany({
      where: { userId },
      select: { id: true, packetId: true, userId: true, amount: true, grabbedAt: true },
      ...keysetArgs(page, [{ grabbedAt: 'desc' }, { id: 'asc' }], (id) => ({ id })),
    });
  }

  /**
   * The user's draws, of one activity or all. A cursor must name a draw of the user's: one
   * of another activity places the page by its time (a client narrowing the list keeps its place).
   */
  async draws(userId: string, activityId: string | null, page: KeysetPage): Promise<UserDrawView[]> {
    if (page.cursor !== undefined) {
      const at = await this.prisma.lotteryDraw.findUnique({ where: { id: page.cursor }, select: { userId: true } });
      if (at?.userId !== userId) throw notACursorOfTheList(page);
    }
    const { notCursor, args } = keysetArgsFromAnyRow(page, [{ drawnAt: 'desc' }, { id: 'asc' }]);
    const rows = await this.prisma.lotteryDraw.findMany({
      where: { userId, ...(activityId === null ? {} : { activityId }), ...notCursor },
      select: { id: true, activityId: true, prizeSnapshot: true, drawnAt: true, costPoints: true, settingsVersion: true },
      ...args,
    });
    return rows.map(({ prizeSnapshot, ...draw }) => ({ ...draw, prize: prizeSnapshot === null ? null : prizeView(draw.activityId, prizeSnapshot as PrizeSnapshot) }));
  }

  goodsCatalog(page: KeysetPage) {
    return this.prisma.goods.findMany(keysetArgs(page, [{ createdAt: 'desc' }, { id: 'asc' }], (id) => ({ id })));
  }
}
