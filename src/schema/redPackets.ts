import { builder } from '../builder.ts';
import { recordId } from '../domain/ids.ts';
import { InsufficientFunds } from '../domain/money/problems.ts';
import { aliasScope, userIdRule } from '../domain/privacy.ts';
import { NotFound } from '../domain/problems.ts';
import { createRedPacketInput, latestSharesCount } from '../domain/redPackets/input.ts';
import { AlreadyGrabbed, RedPacketEmpty, RedPacketExpired } from '../domain/redPackets/problems.ts';
import type { GrabbedShare } from '../domain/redPackets/service.ts';
import { LATEST_SHARES_MAX, type RedPacketShareView, type RedPacketState, redPacketStatus } from '../domain/redPackets/store.ts';
import { ErrorCode, graphqlError } from '../errors.ts';
import { errorMessage } from '../i18n/messages.ts';
import { isOperator } from '../infra/auth/tokens.ts';
import { asProblem, serverTimeNote, shownUserId, watchExisting } from './common.ts';
import { LIST_SIZE_EXTENSION, keysetConnection } from './connections.ts';

const USER_IDS = userIdRule('this red packet');
/** How many shares the cost limit counts `RedPacket.shares` as. */
const SHARES_LIST_COST = 1_000;

const SplitMode = builder.enumType('SplitMode', {
  description: 'RANDOM: WeChat "double average"; NORMAL: bell-shaped around the mean; EQUAL: equal shares.',
  values: ['RANDOM', 'NORMAL', 'EQUAL'] as const,
});

const RedPacketFunding = builder.enumType('RedPacketFunding', {
  description:
    "WALLET: the sender's wallet pays the total at creation and gets the remainder back after expiry. SHOP (operators only): the shop pays what is grabbed; nobody's wallet is debited.",
  values: ['WALLET', 'SHOP'] as const,
});

const RedPacketStatus = builder.enumType('RedPacketStatus', {
  description: 'ACTIVE: shares are left to grab. EMPTY: every share was grabbed. EXPIRED: expiresAt has passed (closeRedPacket moves it to the close) with shares left.',
  values: ['ACTIVE', 'EMPTY', 'EXPIRED'] as const,
});

export const RedPacketShare = builder.objectRef<RedPacketShareView>('RedPacketShare').implement({
  description: 'One grabbed share of a red packet; its amount is in cents (fen).',
  fields: (t) => ({
    packetId: t.exposeID('packetId'),
    userId: t.id({
      description: `Who grabbed the share. ${USER_IDS}`,
      resolve: (share, _args, context) => shownUserId(context, aliasScope.redPacket(share.packetId), share.userId),
    }),
    amount: t.exposeInt('amount'),
    grabbedAt: t.expose('grabbedAt', { type: 'DateTime' }),
  }),
});

export const RedPacket = builder.objectRef<RedPacketState>('RedPacket').implement({
  description:
    'A sum in cents (fen), split into count shares when it is sent; each user may grab one until it is EMPTY or EXPIRED. Absolute state: clients count down to expiresAt against serverTime.',
  fields: (t) => ({
    id: t.exposeID('id'),
    senderId: t.id({
      description: `Who sent the packet. ${USER_IDS}`,
      resolve: (packet, _args, context) => shownUserId(context, aliasScope.redPacket(packet.id), packet.senderId),
    }),
    fundedBy: t.expose('fundedBy', { type: RedPacketFunding }),
    totalAmount: t.exposeInt('totalAmount', { description: 'In cents (fen).' }),
    count: t.exposeInt('count'),
    mode: t.expose('mode', { type: SplitMode }),
    greeting: t.exposeString('greeting', { nullable: true }),
    status: t.field({ type: RedPacketStatus, resolve: (packet) => redPacketStatus(packet, packet.asOfMs) }),
    remainingCount: t.exposeInt('remainingCount'),
    remainingAmount: t.exposeInt('remainingAmount'),
    expiresAt: t.expose('expiresAt', { type: 'DateTime' }),
    serverTime: t.field({ type: 'DateTime', description: serverTimeNote, resolve: (packet) => new Date(packet.asOfMs) }),
    shares: t.field({
      type: [RedPacketShare],
      description: `Every grabbed share, oldest first: up to 10,000, and in a subscription read again on every event, so it is costly: the cost limit counts it as ${SHARES_LIST_COST} shares. Use sharesConnection to page them, or latestShares for the newest. In a subscription, the shares of the event's snapshot.`,
      // Counted at 4 fields a share whatever is selected: two lists fit the default limit, three do not.
      extensions: { [LIST_SIZE_EXTENSION]: SHARES_LIST_COST },
      // A subscription's state names the shares of its snapshot, so they agree with its counts.
      resolve: (packet, _args, { app }) => app.redPackets.shares(packet.id, packet.committedShares),
    }),
    sharesConnection: t.connection({
      type: RedPacketShare,
      description: 'The grabbed shares, oldest first (the order of `shares`), a page at a time. Read when resolved, also in a subscription: it may hold grabs newer than the event.',
      resolve: (packet, args, { app, locale }) =>
        keysetConnection(
          args,
          (page) => app.redPackets.sharesPage(packet.id, page),
          (share) => share.id,
          locale,
        ),
    }),
    latestShares: t.field({
      type: [RedPacketShare],
      description: `The newest grabbed shares, newest first: \`count\` of them (1 … ${LATEST_SHARES_MAX}). In a subscription, those of the event's snapshot, carried by the event itself.`,
      args: { count: t.arg.int({ defaultValue: 10, validate: latestSharesCount }) },
      resolve: (packet, { count }, { app }) => {
        const wanted = count ?? 10;
        return packet.latestShares ? packet.latestShares.slice(0, wanted) : app.redPackets.latestShares(packet.id, wanted);
      },
    }),
    myShare: t.field({
      type: RedPacketShare,
      nullable: true,
      description: "The viewer's own share, once committed; null before a grab. Read when resolved, also in a subscription.",
      resolve: (packet, _args, { app, viewer }) => (viewer ? app.redPackets.shareOf(packet.id, viewer.userId) : null),
    }),
    bestLuck: t.field({
      type: RedPacketShare,
      nullable: true,
      description: 'The largest share (the earliest grab on a tie), once the packet is EMPTY.',
      resolve: (packet, _args, { app }) => (packet.remainingCount > 0 ? null : packet.bestLuck !== undefined ? packet.bestLuck : app.redPackets.bestLuck(packet.id)),
    }),
    refundedAmount: t.int({
      description: "What no grab took, settled after expiry: owed back to the sender's wallet, or kept by the shop for a shop-funded packet; 0 until settled.",
      resolve: (packet) => packet.refundedAmount ?? 0,
    }),
  }),
});

const GrabbedShareRef = builder.objectRef<GrabbedShare>('GrabbedShare').implement({
  description: 'The share the caller just grabbed: its amount in cents (fen), and remainingCount, the shares left after it.',
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
  description: 'The caller already holds a share of this packet (one per user): share is that share.',
  fields: (t) => ({ share: t.field({ type: RedPacketShare, resolve: (problem) => problem.share }) }),
});
builder.objectType(RedPacketEmpty, { name: 'RedPacketEmpty', ...asProblem(RedPacketEmpty), description: 'Every share of the packet has been grabbed.' });
builder.objectType(RedPacketExpired, {
  name: 'RedPacketExpired',
  ...asProblem(RedPacketExpired),
  description: 'The packet expired at expiresAt (closeRedPacket moves it to the close): no share can be grabbed any more.',
  fields: (t) => ({ expiresAt: t.expose('expiresAt', { type: 'DateTime' }) }),
});

builder.objectType(InsufficientFunds, {
  name: 'InsufficientFunds',
  ...asProblem(InsufficientFunds),
  description: "The caller's wallet holds less than the operation needs (both in cents, fen): nothing was debited.",
  fields: (t) => ({
    balanceCents: t.exposeInt('balanceCents', { description: 'What the wallet holds now.' }),
    amountCents: t.exposeInt('amountCents', { description: 'What the operation needs.' }),
  }),
});

const CreateRedPacketInput = builder
  .inputType('CreateRedPacketInput', {
    description: 'A red packet to send: totalAmount split into count shares by mode, each between minAmount and maxAmount (all in cents, fen), grabbable for expiresInSeconds.',
    fields: (t) => ({
      totalAmount: t.int({ required: true, description: 'In cents (fen), at most 100,000,000.' }),
      count: t.int({ required: true, description: 'How many shares, at most 10,000.' }),
      mode: t.field({ type: SplitMode, defaultValue: 'RANDOM' }),
      minAmount: t.int({ defaultValue: 1 }),
      maxAmount: t.int({ description: 'Defaults to the largest share the other bounds allow.' }),
      expiresInSeconds: t.int({ defaultValue: 86_400 }),
      greeting: t.string(),
      fundedBy: t.field({ type: RedPacketFunding, defaultValue: 'WALLET', description: 'Who pays; SHOP is for operators only.' }),
      requestId: t.string({
        description:
          "The sender's idempotency key (1 to 128 characters): a retry with the same requestId, after a timeout or at once, gets the first packet, created and paid for once. The same requestId for another packet: BAD_USER_INPUT (REQUEST_ID_OF_ANOTHER_PACKET).",
      }),
    }),
  })
  .validate(createRedPacketInput);

builder.queryField('redPacket', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: RedPacket,
    nullable: true,
    description: 'The red packet with this id as it is now; null when there is none.',
    args: { id: t.arg.id({ required: true, validate: recordId }) },
    resolve: (_root, { id }, { app }) => app.redPackets.get(String(id)),
  }),
);

builder.mutationField('createRedPacket', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: RedPacket,
    description:
      "Splits the amount now; the caller is the sender. A WALLET packet debits the caller's wallet by the total in the same transaction (InsufficientFunds, and no packet, when it holds less); SHOP packets are for operators (FORBIDDEN for users).",
    errors: { types: [InsufficientFunds], directResult: true, union: { name: 'CreateRedPacketResult', description: 'What createRedPacket answers: the new packet, or why none was made.' } },
    args: { input: t.arg({ type: CreateRedPacketInput, required: true }) },
    resolve: (_root, { input }, { app, viewer, locale }) => {
      if (input.fundedBy === 'SHOP' && !isOperator(viewer)) throw graphqlError(ErrorCode.forbidden, errorMessage('SHOP_PACKET_FOR_OPERATORS', locale));
      return app.redPackets.create(viewer.userId, input);
    },
  }),
);

builder.mutationField('grabRedPacket', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: GrabbedShareRef,
    description: 'Takes one share; a success is already committed in PostgreSQL.',
    errors: {
      types: [AlreadyGrabbed, RedPacketEmpty, RedPacketExpired, NotFound],
      directResult: true,
      union: { name: 'GrabRedPacketResult', description: 'What grabRedPacket answers: the share grabbed, or why none was.' },
    },
    args: { packetId: t.arg.id({ required: true, validate: recordId }) },
    resolve: (_root, { packetId }, { app, viewer }) => app.redPackets.grab(viewer.userId, String(packetId)),
  }),
);

builder.mutationField('closeRedPacket', (t) =>
  t.withAuth({ admin: true }).field({
    type: RedPacket,
    description: "Operators: ends the packet now. Within seconds what is left is owed back to the sender's wallet (a refund), or, for a shop-funded packet, stays with the shop.",
    errors: { types: [NotFound], directResult: true, union: { name: 'CloseRedPacketResult', description: 'What closeRedPacket answers: the closed packet, or NotFound.' } },
    args: { packetId: t.arg.id({ required: true, validate: recordId, description: 'The red packet to close.' }) },
    resolve: (_root, { packetId }, { app }) => app.redPackets.close(String(packetId)),
  }),
);

builder.subscriptionField('redPacketUpdated', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: RedPacket,
    description:
      'The current state first, then newer states: after grabs, at the expiry instant, and with the refund. Only committed grabs count, and each event is one consistent snapshot (counts, amounts, latestShares, bestLuck and shares agree). An event carries the counts and the newest shares, not every share: select latestShares, not the costly shares. Grabs close together are merged into one event carrying the newest state, so intermediate states may be skipped. The stream completes after a final state: EMPTY, or EXPIRED with the refund made.',
    args: { packetId: t.arg.id({ required: true, validate: recordId }) },
    subscribe: (_root, { packetId }, context) => {
      const id = String(packetId);
      return watchExisting(new NotFound('red packet', id), context, context.app.redPackets.get(id), () => context.app.redPackets.watch(id));
    },
    resolve: (state) => state,
  }),
);
