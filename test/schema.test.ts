import { readFileSync } from 'node:fs';
import { printSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { printSchemaSdl, schemaFor } from '../src/schema/index.ts';

describe('schema.graphql', () => {
  it('matches the schema the code builds (run `npm run schema:print` after changing it)', () => {
    const committed = readFileSync(new URL('../schema.graphql', import.meta.url), 'utf8');
    expect(committed).toBe(printSchemaSdl());
  });

  it('keeps the public contract names (docs/api.md)', () => {
    const sdl = printSchemaSdl();
    for (const name of [
      'enum SplitMode',
      'enum RedPacketStatus',
      'input CreateRedPacketInput',
      'type RedPacket ',
      'type RedPacketShare',
      'union GrabRedPacketResult = AlreadyGrabbed | GrabbedShare | NotFound | RedPacketEmpty | RedPacketExpired',
      'type AlreadyGrabbed implements Problem',
      'interface Problem',
      'createRedPacket(input: CreateRedPacketInput!): CreateRedPacketResult!',
      'union CreateRedPacketResult = InsufficientFunds | RedPacket',
      'type InsufficientFunds implements Problem',
      'grabRedPacket(packetId: ID!): GrabRedPacketResult!',
      'redPacket(id: ID!): RedPacket',
      'redPacketUpdated(packetId: ID!): RedPacket!',
      'input CreateGoodsInput',
      'perUserLimit: Int = 0',
      'voucherCodes: [String!]',
      'type Goods ',
      'type Redemption ',
      'voucherCode: String\n',
      'enum RedemptionStatus {\n  DELIVERED\n  PENDING\n}',
      'union RedeemPointsResult = GoodsOffSale | InsufficientPoints | NotFound | OutOfStock | PerUserLimitReached | Redemption',
      'type InsufficientPoints implements Problem',
      'type OutOfStock implements Problem',
      'type PerUserLimitReached implements Problem',
      'awardPoints(amount: Int!, reason: String!, requestId: String!, userId: ID!): Int!',
      'createGoods(input: CreateGoodsInput!): Goods!',
      'redeemPoints(goodsId: ID!, requestId: String!): RedeemPointsResult!',
      'me: Me!',
      'goods(id: ID!): Goods\n',
      'type Me ',
      'pointsBalance: Int!',
      'redemptions(limit: Int = 100): [Redemption!]!',
      'enum LotteryStrategy {\n  TIMED\n  WEIGHTED\n}',
      'enum PrizeKind {\n  CONSOLATION\n  GOODS\n  POINTS\n}',
      'input PrizeInput',
      'kind: PrizeKind = GOODS',
      'weight: Int = 0',
      'totalStock: Int!',
      'hourlyQuota: [Int!]',
      'input CreateLotteryInput',
      'strategy: LotteryStrategy = WEIGHTED',
      'noPrizeWeight: Int = 0',
      'dailyDrawLimit: Int = 0',
      'dailyWinLimit: Int = 0',
      'timezone: String = "Asia/Shanghai"',
      'prizes: [PrizeInput!]!',
      'type LotteryActivity ',
      'type Prize ',
      'remainingStock: Int!',
      'union DrawLotteryResult = ActivityNotActive | DrawLimitReached | InsufficientPoints | LotteryLose | LotteryWin | NotFound',
      'type LotteryWin ',
      'type LotteryLose ',
      'createLotteryActivity(input: CreateLotteryInput!): LotteryActivity!',
      'drawLottery(activityId: ID!, requestId: String): DrawLotteryResult!',
      'lotteryActivity(id: ID!): LotteryActivity',
      // Its arguments are described, so they are printed one a line.
      'lotteryWinners(\n    activityId: ID!\n',
      'enum TeamStatus',
      'input OpenTeamInput',
      'type Team ',
      'type TeamMember',
      'type SeatLock ',
      'type SeatLocked',
      'union LockTeamSeatResult = AlreadyMember | NotFound | SeatLockLimitReached | SeatLocked | TeamClosed | TeamFull | TeamLimitReached',
      'type TeamFull implements Problem',
      'union ConfirmTeamSeatResult = NoSeatLock | NotFound | Team | TeamClosed',
      'openTeam(input: OpenTeamInput!): OpenTeamResult!',
      'union OpenTeamResult = GroupBuyNotActive | NotFound | OpenTeamLimitReached | Team',
      'createGroupBuyActivity(input: CreateGroupBuyActivityInput!): GroupBuyActivity!',
      'groupBuyActivity(id: ID!): GroupBuyActivity',
      'groupBuyActivities(after: String, before: String, first: Int, last: Int): QueryGroupBuyActivitiesConnection!',
      'topUpWallet(amountCents: Int!): PaymentIntent!',
      'sandboxPay(paymentRef: String!): SandboxPayment!',
      'lockTeamSeat(teamId: ID!): LockTeamSeatResult!',
      'releaseTeamSeat(teamId: ID!): Team!',
      'confirmTeamSeat(paymentRef: String!, teamId: ID!, userId: ID!): ConfirmTeamSeatResult!',
      'team(id: ID!): Team',
      'teams(',
      'teamStatus(teamId: ID!): Team!',
    ]) {
      expect(sdl).toContain(name);
    }
  });
});

describe('the schema without the payment sandbox (production, or a real payment secret)', () => {
  it('has no payment sandbox: sandboxPay and its type do not exist there', () => {
    const production = schemaFor({ sandboxPayments: false });
    expect(production.getMutationType()?.getFields().sandboxPay).toBeUndefined();
    expect(production.getType('SandboxPayment')).toBeUndefined();
    expect(printSchema(production)).not.toContain('sandbox');
    // Everything else is there, the payments included.
    expect(Object.keys(production.getMutationType()!.getFields()).sort()).toEqual(
      Object.keys(schemaFor({ sandboxPayments: true }).getMutationType()!.getFields())
        .filter((name) => name !== 'sandboxPay')
        .sort(),
    );
    expect(schemaFor({ sandboxPayments: true }).getMutationType()?.getFields().sandboxPay).toBeDefined();
  });
});
