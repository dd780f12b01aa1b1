import { builder } from '../builder.ts';
import { recordId } from '../domain/ids.ts';
import { awardPointsArgs, createGoodsInput, listLimit, listOffset, redeemPointsArgs, redemptionUpdatedArgs, restockGoodsInput, updateGoodsInput } from '../domain/points/input.ts';
import { GoodsOffSale, InsufficientPoints, OutOfStock, PerUserLimitReached } from '../domain/points/problems.ts';
import { NotFound } from '../domain/problems.ts';
import { RedemptionStatus } from '../generated/prisma/enums.ts';
import { isOperator } from '../infra/auth/tokens.ts';
import { asProblem, watchExisting } from './common.ts';

const RedemptionStatusEnum = builder.enumType(RedemptionStatus, {
  name: 'RedemptionStatus',
  description: 'PENDING until the delivery worker has handed the voucher over.',
});

const RedemptionDelivery = builder.enumType('RedemptionDelivery', {
  description:
    'Where the delivery of a redemption stands. QUEUED: no attempt has failed yet; RETRYING: the last attempt failed and another comes (at nextDeliveryAttemptAt); DELIVERED: handed over, final.',
  values: ['QUEUED', 'RETRYING', 'DELIVERED'] as const,
});

const Redemption = builder.prismaObject('Redemption', {
  description: 'One unit of a goods item bought with points (redeemPoints); its voucher is delivered afterwards, retried until DELIVERED.',
  fields: (t) => ({
    id: t.exposeID('id'),
    goodsId: t.exposeID('goodsId'),
    userId: t.exposeID('userId'),
    requestId: t.exposeString('requestId'),
    pointsSpent: t.exposeInt('pointsSpent'),
    voucherCode: t.exposeString('voucherCode', { nullable: true }),
    status: t.expose('status', { type: RedemptionStatusEnum }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    deliveredAt: t.expose('deliveredAt', { type: 'DateTime', nullable: true }),
    deliveryAttempts: t.exposeInt('deliveryAttempts'),
    delivery: t.field({
      type: RedemptionDelivery,
      resolve: (redemption) => (redemption.status === 'DELIVERED' ? 'DELIVERED' : redemption.lastError === null ? 'QUEUED' : 'RETRYING'),
    }),
    nextDeliveryAttemptAt: t.field({
      type: 'DateTime',
      nullable: true,
      description: 'While RETRYING: when the next attempt is due (it may come a little later).',
      resolve: (redemption) => (redemption.status === 'PENDING' && redemption.lastError !== null ? redemption.nextAttemptAt : null),
    }),
  }),
});

export const Goods = builder.prismaObject('Goods', {
  description: 'An item of the points shop, bought with points one unit at a time; stock is every unit it was given, restocks included.',
  fields: (t) => ({
    id: t.exposeID('id'),
    title: t.exposeString('title'),
    pointsCost: t.exposeInt('pointsCost'),
    stock: t.exposeInt('stock'),
    remainingStock: t.int({
      description: 'Live: what Redis has left to hand out.',
      resolve: async (goods, _args, { app }) => (await app.points.remainingStock(goods.id)) ?? 0,
    }),
    perUserLimit: t.exposeInt('perUserLimit', { description: '0 = unlimited.' }),
    pooled: t.exposeBoolean('pooled', { description: 'Each unit is a voucher code of the pool.' }),
    onSale: t.exposeBoolean('onSale', { description: 'False while an operator has taken it off sale: redemptions answer GoodsOffSale.' }),
    saleStartsAt: t.expose('saleStartsAt', { type: 'DateTime', nullable: true, description: 'Before it (server clock), redemptions answer GoodsOffSale with opensAt; null: no start.' }),
    saleEndsAt: t.expose('saleEndsAt', { type: 'DateTime', nullable: true, description: 'From it on (server clock), redemptions answer GoodsOffSale; null: no end.' }),
  }),
});

export const Me = builder.objectRef<{ userId: string }>('Me').implement({
  description: "The signed-in caller's own account: points, redemptions, wallet and histories.",
  fields: (t) => ({
    userId: t.exposeID('userId'),
    pointsBalance: t.int({ description: 'Spendable points.', resolve: (me, _args, { app }) => app.points.balance(me.userId) }),
    redemptions: t.prismaField({
      type: [Redemption],
      description: 'Newest first.',
      args: { limit: t.arg.int({ defaultValue: 100, validate: listLimit }) },
      resolve: (query, me, { limit }, { app }) => app.points.redemptionsOf(query, me.userId, limit ?? 100),
    }),
  }),
});

builder.objectType(InsufficientPoints, {
  name: 'InsufficientPoints',
  ...asProblem(InsufficientPoints),
  description: "The caller's points balance is below pointsCost, what the redemption or draw costs: nothing was spent.",
  fields: (t) => ({ balance: t.exposeInt('balance'), pointsCost: t.exposeInt('pointsCost') }),
});
builder.objectType(OutOfStock, { name: 'OutOfStock', ...asProblem(OutOfStock), description: 'No unit of the goods item is left: nothing was spent.' });
builder.objectType(GoodsOffSale, {
  name: 'GoodsOffSale',
  ...asProblem(GoodsOffSale),
  description:
    'The goods item is not on sale: an operator took it off sale, its sale has not started (opensAt), or it has ended. Nothing was spent, and the same requestId may redeem once it is on sale.',
  fields: (t) => ({
    opensAt: t.expose('opensAt', {
      type: 'DateTime',
      nullable: true,
      description: "The sale's start (saleStartsAt) when it has not come yet and the item is otherwise on sale: count down to it against serverTime. Null otherwise.",
    }),
    endedAt: t.expose('endedAt', {
      type: 'DateTime',
      nullable: true,
      description: "The sale's end (saleEndsAt) when it has passed, whether or not the item is also off sale: the sale is over unless an operator moves or clears the end. Null otherwise.",
    }),
  }),
});
builder.objectType(PerUserLimitReached, {
  name: 'PerUserLimitReached',
  ...asProblem(PerUserLimitReached),
  description: 'The caller has redeemed perUserLimit units of this goods item already: nothing was spent.',
  fields: (t) => ({ perUserLimit: t.exposeInt('perUserLimit') }),
});

const CreateGoodsInput = builder
  .inputType('CreateGoodsInput', {
    description: 'A new item of the points shop: its price in points, and its units or a pool of voucher codes.',
    fields: (t) => ({
      title: t.string({ required: true }),
      pointsCost: t.int({ required: true }),
      stock: t.int({ required: true, description: 'With voucherCodes, the number of codes.' }),
      perUserLimit: t.int({ defaultValue: 0, description: '0 = unlimited.' }),
      voucherCodes: t.stringList({ description: 'A pool of codes (at most 10,000), each handed out at most once.' }),
      onSale: t.boolean({
        defaultValue: true,
        description: 'false: created off sale (GoodsOffSale to every redemption), until updateGoods puts it on sale.',
      }),
      saleStartsAt: t.field({
        type: 'DateTime',
        description: 'Redemptions before it answer GoodsOffSale with opensAt, by the server clock (serverTime): a 10:00 flash sale prepared the night before. Null: on sale from now.',
      }),
      saleEndsAt: t.field({ type: 'DateTime', description: 'Redemptions from it on answer GoodsOffSale; after saleStartsAt and still ahead. Null: no end.' }),
      requestId: t.string({
        description:
          "The operator's idempotency key (1 to 128 characters): a retry with the same requestId and terms, after a timeout or at once, gets the first item, created once. The same requestId for other terms: BAD_USER_INPUT (REQUEST_ID_OF_ANOTHER_CREATE).",
      }),
    }),
  })
  .validate(createGoodsInput);

const RestockGoodsInput = builder
  .inputType('RestockGoodsInput', {
    description: 'Units to add to a goods item, once per requestId.',
    fields: (t) => ({
      goodsId: t.id({ required: true }),
      requestId: t.string({ required: true, description: 'Restocks once: a retry with the same requestId (and units) adds nothing.' }),
      units: t.int({ required: true, description: 'How many units to add (1 to 1,000,000); with voucherCodes, the number of codes.' }),
      voucherCodes: t.stringList({ description: 'Required for pooled goods, refused for the others: at most 10,000 new codes, each handed out at most once.' }),
    }),
  })
  .validate(restockGoodsInput);

const UpdateGoodsInput = builder
  .inputType('UpdateGoodsInput', {
    description: 'What changes; a field left out or null stays as it is.',
    fields: (t) => ({
      title: t.string(),
      pointsCost: t.int({ description: 'Redemptions from now on pay this; those made before keep what they paid.' }),
      onSale: t.boolean({ description: 'False takes the item off sale (redemptions answer GoodsOffSale); true puts it back.' }),
      saleStartsAt: t.field({ type: 'DateTime', description: 'A new start of the sale; an instant passed opens it now (within the window and on sale).' }),
      saleEndsAt: t.field({
        type: 'DateTime',
        description: 'A new end of the sale, after its start; an instant passed ends a sale still open now (and now is recorded), and leaves one that has ended as it is.',
      }),
      clearSaleStartsAt: t.boolean({ description: 'true: the sale has no start any more, so it is open now (within its end, and on sale).' }),
      clearSaleEndsAt: t.boolean({ description: 'true: the sale has no end any more.' }),
    }),
  })
  .validate(updateGoodsInput);

builder.queryField('me', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: Me,
    description: "The signed-in caller's own account.",
    resolve: (_root, _args, { viewer }) => ({ userId: viewer.userId }),
  }),
);

builder.queryField('goods', (t) =>
  t.withAuth({ signedIn: true }).prismaField({
    type: 'Goods',
    nullable: true,
    description: 'The goods item with this id; null when there is none.',
    args: { id: t.arg.id({ required: true, validate: recordId }) },
    resolve: (query, _root, { id }, { app }) => app.points.findGoods(query, String(id)),
  }),
);

builder.queryField('goodsRedemptions', (t) =>
  t.withAuth({ admin: true }).prismaField({
    type: [Redemption],
    description: "Operators: a goods item's redemptions, oldest first.",
    args: {
      goodsId: t.arg.id({ required: true, validate: recordId, description: 'The goods item whose redemptions to list.' }),
      status: t.arg({ type: RedemptionStatusEnum, description: 'Only the redemptions of this status; unset: all.' }),
      limit: t.arg.int({ defaultValue: 100, validate: listLimit, description: 'At most this many: 1 to 500.' }),
      offset: t.arg.int({ defaultValue: 0, validate: listOffset, description: 'How many to skip first.' }),
    },
    resolve: (query, _root, { goodsId, status, limit, offset }, { app }) => app.points.redemptionsOfGoods(query, String(goodsId), { status, limit: limit ?? 100, offset: offset ?? 0 }),
  }),
);

builder.mutationField('awardPoints', (t) =>
  t.withAuth({ admin: true }).int({
    description: 'Operators: adds points (negative: takes them back, never below zero). Idempotent per requestId. The new balance.',
    args: t.validate(
      {
        userId: t.arg.id({ required: true }),
        amount: t.arg.int({ required: true }),
        reason: t.arg.string({ required: true }),
        requestId: t.arg.string({ required: true }),
      },
      awardPointsArgs,
    ),
    resolve: (_root, award, { app }) => app.points.award(award),
  }),
);

builder.mutationField('createGoods', (t) =>
  t.withAuth({ admin: true }).field({
    type: Goods,
    description: 'Operators: a goods item of the points shop.',
    args: { input: t.arg({ type: CreateGoodsInput, required: true }) },
    resolve: (_root, { input }, { app, viewer }) => app.points.createGoods(viewer.userId, input),
  }),
);

builder.mutationField('restockGoods', (t) =>
  t.withAuth({ admin: true }).field({
    type: Goods,
    description: 'Operators: adds units to a goods item (new codes to a pooled one). Once per requestId; a restock is committed in PostgreSQL before it answers.',
    errors: { types: [NotFound], directResult: true, union: { name: 'RestockGoodsResult', description: 'What restockGoods answers: the goods item restocked, or NotFound.' } },
    args: { input: t.arg({ type: RestockGoodsInput, required: true, description: 'The goods item, the units to add and the idempotency key.' }) },
    resolve: (_root, { input }, { app, viewer }) => app.points.restock(viewer.userId, input),
  }),
);

builder.mutationField('updateGoods', (t) =>
  t.withAuth({ admin: true }).field({
    type: Goods,
    description: "Operators: changes a goods item's title, its price in points, or whether it is on sale; the next redemption sees it.",
    errors: { types: [NotFound], directResult: true, union: { name: 'UpdateGoodsResult', description: 'What updateGoods answers: the goods item as changed, or NotFound.' } },
    args: {
      goodsId: t.arg.id({ required: true, validate: recordId, description: 'The goods item to change.' }),
      input: t.arg({ type: UpdateGoodsInput, required: true, description: 'What changes.' }),
    },
    resolve: (_root, { goodsId, input }, { app, viewer }) => app.points.updateGoods(viewer.userId, String(goodsId), input),
  }),
);

builder.mutationField('redeemPoints', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: Redemption,
    description: 'Spends points on one unit; a success is already committed in PostgreSQL. The same requestId gets the same answer.',
    errors: {
      types: [InsufficientPoints, OutOfStock, PerUserLimitReached, GoodsOffSale, NotFound],
      directResult: true,
      union: { name: 'RedeemPointsResult', description: 'What redeemPoints answers: the redemption, or why none was made.' },
    },
    args: t.validate({ goodsId: t.arg.id({ required: true }), requestId: t.arg.string({ required: true }) }, redeemPointsArgs),
    resolve: (_root, { goodsId, requestId }, { app, viewer }) => app.points.redeem(viewer.userId, goodsId, requestId),
  }),
);

builder.subscriptionField('redemptionUpdated', (t) =>
  t.withAuth({ signedIn: true }).field({
    type: Redemption,
    description:
      "One of my redemptions (any, for operators) as its delivery moves: the current state first, then after each failed attempt and at the delivery; completes once DELIVERED. Moves close together may be merged into the newest. Someone else's redemption, or an unknown id: NOT_FOUND.",
    args: t.validate({ redemptionId: t.arg.id({ required: true, description: 'The redemption to follow: the id redeemPoints answered with.' }) }, redemptionUpdatedArgs),
    subscribe: (_root, { redemptionId }, context) =>
      watchExisting(
        new NotFound('redemption', redemptionId),
        context,
        context.app.points.visibleRedemption(redemptionId, { userId: context.viewer.userId, operator: isOperator(context.viewer) }),
        () => context.app.points.watchRedemption(redemptionId),
      ),
    resolve: (state) => state,
  }),
);
