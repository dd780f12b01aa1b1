import { builder } from '../builder.ts';
import { aliasScope, userIdRule } from '../domain/privacy.ts';
import { NotFound } from '../domain/problems.ts';
import { createRedPacketInput } from '../domain/redPackets/input.ts';
import { AlreadyGrabbed, RedPacketEmpty, RedPacketExpired } from '../domain/redPackets/problems.ts';
import type { GrabbedShare } from '../domain/redPackets/service.ts';
import { type RedPacketShareView, type RedPacketState, redPacketStatus } from '../domain/redPackets/store.ts';
import { asProblem, shownUserId, watchExisting } from './common.ts';

const USER_IDS = userIdRule('this red packet');

const SplitMode = builder.enumType('SplitMode', {
  description: 'RANDOM: WeChat "double average"; NORMAL: bell-shaped around the mean; EQUAL: equal shares.',
  values: ['RANDOM', 'NORMAL', 'EQUAL'] as const,
});

const RedPacketStatus = builder.enumType('RedPacketStatus', { values: ['ACTIVE', 'EMPTY', 'EXPIRED'] as const });

const RedPacketShare = builder.objectRef<RedPacketShareView>('RedPacketShare').implement({
  fields: (t) => ({
    userId: t.id({
      description: `Who grabbed the share. ${USER_IDS}`,
      resolve: (share, _args, context) => shownUserId(context, aliasScope.redPacket(share.packetId), share.userId),
    }),
    amount: t.exposeInt('amount'),
    grabbedAt: t.expose('grabbedAt', { type: 'DateTime' }),
  }),
});

/** Shares are oldest first, so the first of the largest is the earliest. */
function largestShare(shares: RedPacketShareView[]): RedPacketShareView | null {
  return shares.reduce<RedPacketShareView | null>((best, share) => (!best || share.amount > best.amount ? share : best), null);
}

const RedPacket = builder.objectRef<RedPacketState>('RedPacket').implement({
  fields: (t) => ({
    id: t.exposeID('id'),
    senderId: t.id({
      description: `Who sent the packet. ${USER_IDS}`,
      resolve: (packet, _args, context) => shownUserId(context, aliasScope.redPacket(packet.id), packet.senderId),
    }),
    totalAmount: t.exposeInt('totalAmount', { description: 'In cents (fen).' }),
    count: t.exposeInt('count'),
    mode: t.expose('mode', { type: SplitMode }),
    greeting: t.exposeString('greeting', { nullable: true }),
    status: t.field({ type: RedPacketStatus, resolve: (packet) => redPacketStatus(packet, packet.asOfMs ?? Date.now()) }),
    remainingCount: t.exposeInt('remainingCount'),
    remainingAmount: t.exposeInt('remainingAmount'),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
    shares: t.field({
      type: [RedPacketShare],
      description: 'Grabbed shares, oldest first.',
      // A subscription's state carries the shares of its snapshot.
      resolve: (packet, _args, { app }) => packet.shares ?? app.redPackets.shares(packet.id),
    }),
    bestLuck: t.field({
      type: RedPacketShare,
      nullable: true,
      description: 'The largest share (the earliest grab on a tie), once the packet is EMPTY.',
      resolve: (packet, _args, { app }) => (packet.remainingCount > 0 ? null : packet.shares ? largestShare(packet.shares) : app.redPackets.bestLuck(packet.id)),
    }),
    refundedAmount: t.int({
      description: 'Returned to the sender after expiry; 0 until the refund is made.',
      resolve: (packet) => packet.refundedAmount ?? 0,
    }),
  }),
});

const GrabbedShareRef = builder.objectRef<GrabbedShare>('GrabbedShare').implement({
  fields: (t) => ({
    packetId: t.exposeID('packetId'),
    amount: t.exposeInt('amount'),
    remainingCount: t.exposeInt('remainingCount'),
    grabbedAt: t.expose('grabbedAt', { type: 'DateTime' }),
  }),
});

builder.objectType(AlreadyGrabbed, {
  name: 'AlreadyGrabbed',
  ...asProblem(AlreadyGrabbed),
  fields: (t) => ({ share: t.field({ type: RedPacketShare, resolve: (problem) => problem.share }) }),
});
builder.objectType(RedPacketEmpty, { name: 'RedPacketEmpty', ...asProblem(RedPacketEmpty) });
builder.objectType(RedPacketExpired, {
  name: 'RedPacketExpired',
  ...asProblem(RedPacketExpired),
  fields: (t) => ({ expiresAt: t.expose('expiresAt', { type: 'DateTime' }) }),
});

const CreateRedPacketInput = builder
  .inputType('CreateRedPacketInput', {
    fields: (t) => ({
      totalAmount: t.int({ required: true, description: 'In cents (fen), at most 100,000,000.' }),
      count: t.int({ required: true, description: 'How many shares, at most 10,000.' }),
      mode: t.field({ type: SplitMode, defaultValue: 'RANDOM' }),
      minAmount: t.int({ defaultValue: 1 }),
      maxAmount: t.int({ description: 'Defaults to the largest share the other bounds allow.' }),
      expiresInSeconds: t.int({ defaultValue: 86_400 }),
      greeting: t.string(),
    }),
  })
  .validate(createRedPacketInput);

builder.queryField('redPacket', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: RedPacket,
    nullable: true,
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, { app }) => app.redPackets.get(String(id)),
  }),
);

builder.mutationField('createRedPacket', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: RedPacket,
    description: 'Splits the amount now; the caller is the sender.',
    args: { input: t.arg({ type: CreateRedPacketInput, required: true }) },
    resolve: (_root, { input }, { app, viewer }) => app.redPackets.create(viewer.userId, input),
  }),
);

builder.mutationField('grabRedPacket', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: GrabbedShareRef,
    description: 'Takes one share; a success is already committed in PostgreSQL.',
    errors: {
      types: [AlreadyGrabbed, RedPacketEmpty, RedPacketExpired, NotFound],
      directResult: true,
      union: { name: 'GrabRedPacketResult' },
    },
    args: { packetId: t.arg.id({ required: true }) },
    resolve: (_root, { packetId }, { app, viewer }) => app.redPackets.grab(viewer.userId, String(packetId)),
  }),
);

builder.mutationField('closeRedPacket', (t) =>
  t.withAuth({ admin: true }).field({
    type: RedPacket,
    description: 'Operators: ends the packet now; what is left is refunded to the sender within seconds.',
    errors: { types: [NotFound], directResult: true, union: { name: 'CloseRedPacketResult' } },
    args: { packetId: t.arg.id({ required: true }) },
    resolve: (_root, { packetId }, { app }) => app.redPackets.close(String(packetId)),
  }),
);

builder.subscriptionField('redPacketUpdated', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: RedPacket,
    description:
      'The current state first, then newer states: after grabs, at the expiry instant, and with the refund. Only committed grabs count, and each event is one consistent snapshot (shares, counts and amounts agree). Grabs close together are merged into one event carrying the newest state, so intermediate states may be skipped. The stream completes after a final state: EMPTY, or EXPIRED with the refund made.',
    args: { packetId: t.arg.id({ required: true }) },
    subscribe: (_root, { packetId }, { app }) => {
      const id = String(packetId);
      return watchExisting(`red packet ${id}`, app.redPackets.get(id), () => app.redPackets.watch(id));
    },
    resolve: (state) => state,
  }),
);
