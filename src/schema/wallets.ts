import { builder } from '../builder.ts';
import { creditWalletArgs } from '../domain/money/input.ts';
import type { WalletLedger } from '../generated/prisma/client.ts';
import { RefundDestination, RefundStatus } from '../generated/prisma/enums.ts';
import { describePaging, keysetConnection } from './connections.ts';
import { Me } from './points.ts';

const WalletEntry = builder.objectRef<WalletLedger>('WalletEntry').implement({
  description: "One movement of a wallet's money.",
  fields: (t) => ({
    id: t.id({ resolve: (entry) => entry.id.toString() }),
    deltaCents: t.exposeInt('deltaCents', { description: 'Positive in, negative out.' }),
    reason: t.exposeString('reason', { description: 'What moved it: TOP_UP, OPERATOR_CREDIT, RED_PACKET_SENT, RED_PACKET_GRAB, REFUND…' }),
    note: t.exposeString('note', { nullable: true, description: 'What the operator wrote with an OPERATOR_CREDIT.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    refund: t.field({
      type: Refund,
      nullable: true,
      description: 'A REFUND entry: the refund it paid in, with what it was owed for (its reason, teamId, packetId); null for other entries.',
      resolve: (entry, _args, { app }) => app.refunds.paidBy(entry),
    }),
  }),
});

const Wallet = builder.objectRef<{ userId: string }>('Wallet').implement({
  description: "A user's money in cents (fen).",
  fields: (t) => ({
    balanceCents: t.int({ resolve: (wallet, _args, { app }) => app.wallets.balance(wallet.userId) }),
    entries: t.connection({
      type: WalletEntry,
      description: 'The ledger, newest first.',
      resolve: (wallet, args, { app, locale }) =>
        keysetConnection(
          args,
          (page) => app.wallets.entries(wallet.userId, page),
          (entry) => entry.id.toString(),
          locale,
        ),
    }),
  }),
});

const RefundStatusEnum = builder.enumType(RefundStatus, { name: 'RefundStatus', description: 'PENDING until the delivery worker has paid it.' });
const RefundDestinationEnum = builder.enumType(RefundDestination, {
  name: 'RefundDestination',
  description: "WALLET: into the user's wallet. PROVIDER: back through the payment provider.",
});

const Refund = builder.prismaObject('Refund', {
  description: "Money owed back to a user (a failed team, a late or duplicate payment, an expired red packet's remainder), paid once.",
  fields: (t) => ({
    id: t.exposeID('id', { description: 'Also the Idempotency-Key the provider sees.' }),
    userId: t.exposeID('userId'),
    amountCents: t.exposeInt('amountCents'),
    reason: t.exposeString('reason', {
      description:
        'TEAM_FAILED, LATE_PAYMENT, DUPLICATE_PAYMENT, PACKET_EXPIRED, or WALLET_FULL (a top-up paid into a wallet that could not hold it, owed back; a red packet share the wallet could not hold, paid in once it has room); DOUBLE_SEAT_REFUND marks a second refund of one seat payment paid before this was prevented.',
    }),
    status: t.expose('status', { type: RefundStatusEnum }),
    paidTo: t.expose('paidTo', { type: RefundDestinationEnum, nullable: true }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    paidAt: t.expose('paidAt', { type: 'DateTime', nullable: true }),
    attempts: t.exposeInt('attempts', { description: 'Delivery attempts so far.' }),
    teamId: t.id({
      nullable: true,
      description: 'The group-buy team it is owed for: a seat payment, or a team that failed; null otherwise.',
      resolve: (refund, _args, { app }) => app.refunds.teamOf(refund),
    }),
    packetId: t.id({
      nullable: true,
      description: "The red packet it is owed for: an expired packet's remainder, or a share the wallet could not hold; null otherwise.",
      resolve: (refund, _args, { app }) => app.refunds.packetOf(refund),
    }),
    paymentRef: t.exposeString('paymentRef', { nullable: true, authScopes: { admin: true }, description: 'Operators only: the provider payment it returns.' }),
    lastError: t.exposeString('lastError', { nullable: true, authScopes: { admin: true }, description: 'Operators only: why the last attempt failed.' }),
  }),
});

builder.objectFields(Me, (t) => ({
  wallet: t.field({ type: Wallet, resolve: (me) => ({ userId: me.userId }) }),
  refunds: t.connection({
    type: Refund,
    description: 'Refunds owed to the caller, newest first.',
    resolve: (me, args, { app, locale }) =>
      keysetConnection(
        args,
        (page) => app.refunds.refundsOf(me.userId, page),
        (refund) => refund.id,
        locale,
      ),
  }),
}));

builder.queryField('refunds', (t) =>
  describePaging(
    t.withAuth({ admin: true }).connection({
      type: Refund,
      description: 'Operators: every refund, or those of one status (PENDING: the outbox still to pay), newest first.',
      args: { status: t.arg({ type: RefundStatusEnum, description: 'Only the refunds of this status; unset: all.' }) },
      resolve: (_root, { status, ...args }, { app, locale }) =>
        keysetConnection(
          args,
          (page) => app.refunds.list(status, page),
          (refund) => refund.id,
          locale,
        ),
    }),
  ),
);

builder.mutationField('creditWallet', (t) =>
  t.withAuth({ admin: true }).int({
    description:
      "Operators: credits a user's wallet. Idempotent per requestId (the same requestId for another user or amount is BAD_USER_INPUT). A credit that would take the wallet past 2,147,483,647 cents is BAD_USER_INPUT (issue WALLET_BALANCE_LIMIT). The new balance.",
    args: t.validate(
      {
        userId: t.arg.id({ required: true, description: 'The user whose wallet to credit.' }),
        amountCents: t.arg.int({ required: true, description: 'In cents (fen): 1 to 100,000,000.' }),
        reason: t.arg.string({ required: true, description: "Why (1 to 200 characters): the ledger entry's note." }),
        requestId: t.arg.string({ required: true, description: 'The idempotency key (1 to 128 characters): the same requestId credits once.' }),
      },
      creditWalletArgs,
    ),
    resolve: (_root, credit, { app }) => app.wallets.credit(credit),
  }),
);
