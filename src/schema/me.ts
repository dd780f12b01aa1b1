import { builder } from '../builder.ts';
import { recordId } from '../domain/ids.ts';
import type { RedPacketState } from '../domain/redPackets/store.ts';
import { describePaging, keysetConnection } from './connections.ts';
import { LotteryDrawRecord } from './lottery.ts';
import { Goods, Me } from './points.ts';
import { RedPacket, RedPacketShare } from './redPackets.ts';
import { Team } from './teams.ts';

const PointsLedgerEntry = builder.prismaObject('PointsLedger', {
  description: 'A change of a points balance.',
  fields: (t) => ({
    id: t.id({ resolve: (entry) => String(entry.id) }),
    delta: t.exposeInt('delta', { description: 'Positive: points in; negative: points spent.' }),
    reason: t.exposeString('reason'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
  }),
});

builder.objectFields(Me, (t) => ({
  pointsLedger: t.connection({
    type: PointsLedgerEntry,
    description: 'Every change of my points balance, newest first.',
    resolve: (me, args, { app, locale }) =>
      keysetConnection(
        args,
        (page) => app.history.pointsLedger(me.userId, page),
        (entry) => String(entry.id),
        locale,
      ),
  }),
  redPacketsSent: t.connection({
    type: RedPacket,
    description: 'The red packets I sent, newest first, each as it is now.',
    resolve: (me, args, { app, locale }) =>
      keysetConnection(
        args,
        async (page) => {
          const states = await Promise.all((await app.history.redPacketsSent(me.userId, page)).map((id) => app.redPackets.get(id)));
          return states.filter((state): state is RedPacketState => state !== null);
        },
        (packet) => packet.id,
        locale,
      ),
  }),
  teams: t.connection({
    type: Team,
    description:
      'The teams I am in (as leader or member) or hold a live seat lock in, newest first, each as it is now; myLock is the lock I hold there. After a restart, this is where to find a lock I hold, wherever it moved.',
    resolve: (me, args, { app, locale }) =>
      keysetConnection(
        args,
        (page) => app.teams.mine(me.userId, page),
        (team) => team.id,
        locale,
      ),
  }),
  draws: t.connection({
    type: LotteryDrawRecord,
    description: 'My lottery draws, won or lost, newest first.',
    args: { activityId: t.arg.id({ validate: recordId, description: "Only this activity's draws." }) },
    resolve: (me, args, { app, locale }) =>
      keysetConnection(
        args,
        (page) => app.history.draws(me.userId, args.activityId == null ? null : String(args.activityId), page),
        (draw) => draw.id,
        locale,
      ),
  }),
  sharesGrabbed: t.connection({
    type: RedPacketShare,
    description: 'The red-packet shares I grabbed, newest first.',
    resolve: (me, args, { app, locale }) =>
      keysetConnection(
        args,
        (page) => app.history.sharesGrabbed(me.userId, page),
        (share) => share.id,
        locale,
      ),
  }),
}));

builder.queryField('goodsCatalog', (t) =>
  describePaging(
    t.withAuth({ signedIn: true }).connection({
      type: Goods,
      description: 'The goods of the points shop, newest first.',
      resolve: (_root, args, { app, locale }) =>
        keysetConnection(
          args,
          (page) => app.history.goodsCatalog(page),
          (goods) => goods.id,
          locale,
        ),
    }),
  ),
);
