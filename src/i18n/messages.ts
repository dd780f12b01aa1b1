/*
 * Every message a client may show, in each language the service speaks: one catalog.
 * Problems are keyed by their stable code (Problem.code) and worded from their own
 * fields; validation issues by their machine code (src/i18n/issues.ts). A client that
 * keeps its own texts branches on the codes and ignores these.
 */
import type { ActivityNotActive, DrawLimitReached, WinLimitReached } from '../domain/lottery/problems.ts';
import type { InsufficientFunds } from '../domain/money/problems.ts';
import type { GoodsOffSale, InsufficientPoints, PerUserLimitReached } from '../domain/points/problems.ts';
import type { CampaignKind, NotFound, Problem } from '../domain/problems.ts';
import type { GroupBuyNotActive, OpenTeamLimitReached, SeatLockLimitReached, TeamClosed, TeamLimitReached } from '../domain/teams/problems.ts';

export const LOCALES = ['en', 'zh-CN'] as const;
export type Locale = (typeof LOCALES)[number];
export const DEFAULT_LOCALE: Locale = 'en';

type Wording<P> = Record<Locale, (problem: P) => string>;

/** A catalog entry for problems of type P (its fields are what a message may use). */
const wording = <P extends Problem>(entry: Wording<P>) => entry as Wording<Problem>;

const CAMPAIGN_ZH: Record<CampaignKind, string> = {
  team: '拼团',
  'red packet': '红包',
  goods: '商品',
  'lottery activity': '抽奖活动',
  'group-buy activity': '拼团活动',
  redemption: '兑换记录',
  payment: '支付单',
};

const yuan = (cents: number) => (cents / 100).toFixed(2);

/** "once", "2 times": English counts its times by number. */
const times = (count: number) => (count === 1 ? 'once' : `${count} times`);
const countOf = (count: number, one: string, many: string) => `${count} ${count === 1 ? one : many}`;

export const problemMessages: Record<string, Wording<Problem>> = {
  NOT_FOUND: wording<NotFound>({ en: (p) => `${p.what} ${p.id} does not exist`, 'zh-CN': (p) => `${CAMPAIGN_ZH[p.what]} ${p.id} 不存在` }),
  TEAM_FULL: wording({ en: () => 'every seat of this team is taken or locked by a paying buyer', 'zh-CN': () => '该团的座位已满或正被其他买家锁定付款中' }),
  ALREADY_MEMBER: wording({ en: () => 'you are already a member of this team', 'zh-CN': () => '你已经是该团成员' }),
  TEAM_CLOSED: wording<TeamClosed>({
    en: (p) => (p.status === 'COMPLETE' ? 'this team is complete' : 'this team failed to form before its deadline'),
    'zh-CN': (p) => (p.status === 'COMPLETE' ? '该团已成团' : '该团未能在截止时间前成团'),
  }),
  GROUP_BUY_NOT_ACTIVE: wording<GroupBuyNotActive>({
    en: (p) =>
      p.serverTime < p.startsAt ? 'this group-buy has not started yet' : p.serverTime >= p.endsAt ? 'this group-buy has ended' : 'this group-buy is paused: no new team opens for now',
    'zh-CN': (p) => (p.serverTime < p.startsAt ? '该拼团活动尚未开始' : p.serverTime >= p.endsAt ? '该拼团活动已结束' : '该拼团活动已暂停开团'),
  }),
  OPEN_TEAM_LIMIT_REACHED: wording<OpenTeamLimitReached>({
    en: (p) => `you lead ${countOf(p.maxOpenTeamsPerLeader, 'open team', 'open teams')} of this group-buy, as many as it allows`,
    'zh-CN': (p) => `你在该拼团活动中已开 ${p.maxOpenTeamsPerLeader} 个进行中的团，已达上限`,
  }),
  SEAT_LOCK_LIMIT_REACHED: wording<SeatLockLimitReached>({
    en: (p) => `you took ${countOf(p.maxLocks, 'seat lock', 'seat locks')} in this team, as many as one user may`,
    'zh-CN': (p) => `你在该团已锁定座位 ${p.maxLocks} 次，已达上限`,
  }),
  TEAM_LIMIT_REACHED: wording<TeamLimitReached>({
    en: (p) => `you joined ${countOf(p.maxTeamsPerUser, 'team', 'teams')} of this group-buy, as many as it allows`,
    'zh-CN': (p) => `你在该拼团活动中已参加 ${p.maxTeamsPerUser} 个团，已达上限`,
  }),
  NO_SEAT_LOCK: wording({ en: () => 'you hold no seat lock on this team and no seat is free', 'zh-CN': () => '你在该团没有锁定的座位，且没有空位' }),
  ALREADY_GRABBED: wording({ en: () => 'you already grabbed a share of this red packet', 'zh-CN': () => '你已经抢过这个红包' }),
  RED_PACKET_EMPTY: wording({ en: () => 'every share of this red packet has been grabbed', 'zh-CN': () => '红包已被抢完' }),
  RED_PACKET_EXPIRED: wording({ en: () => 'this red packet has expired', 'zh-CN': () => '红包已过期' }),
  ACTIVITY_NOT_ACTIVE: wording<ActivityNotActive>({
    en: (p) =>
      ({
        NOT_STARTED: 'this lottery has not started yet',
        ENDED: 'this lottery has ended',
        PAUSED: 'this lottery is paused',
        SOLD_OUT: 'every prize of this lottery has been given away',
        SOLD_OUT_TODAY: "today's prizes have all been given away; come back tomorrow",
        NOTHING_RELEASED: 'no prize is released right now; more come later',
      })[p.reason],
    'zh-CN': (p) =>
      ({
        NOT_STARTED: '抽奖尚未开始',
        ENDED: '抽奖已结束',
        PAUSED: '抽奖已暂停',
        SOLD_OUT: '奖品已全部抽完',
        SOLD_OUT_TODAY: '今日奖品已抽完，明天再来',
        NOTHING_RELEASED: '当前暂无可抽的奖品，稍后会放出更多',
      })[p.reason],
  }),
  WIN_LIMIT_REACHED: wording<WinLimitReached>({
    en: (p) => `you have won ${times(p.dailyWinLimit)} today, the daily limit; come back tomorrow`,
    'zh-CN': (p) => `你今天已中奖 ${p.dailyWinLimit} 次，已达每日上限，明天再来`,
  }),
  DRAW_LIMIT_REACHED: wording<DrawLimitReached>({
    en: (p) => `you have drawn ${times(p.dailyDrawLimit)} today, the daily limit`,
    'zh-CN': (p) => `你今天已抽奖 ${p.dailyDrawLimit} 次，已达每日上限`,
  }),
  INSUFFICIENT_POINTS: wording<InsufficientPoints>({
    en: (p) => `this costs ${p.pointsCost} points; your balance is ${p.balance}`,
    'zh-CN': (p) => `需要 ${p.pointsCost} 积分，你的余额为 ${p.balance}`,
  }),
  OUT_OF_STOCK: wording({ en: () => 'this goods item is out of stock', 'zh-CN': () => '该商品已售罄' }),
  GOODS_OFF_SALE: wording<GoodsOffSale>({
    en: (p) => (p.opensAt ? 'the sale of this goods item has not started yet' : p.endedAt ? 'the sale of this goods item has ended' : 'this goods item is off sale for now'),
    'zh-CN': (p) => (p.opensAt ? '该商品尚未开始兑换' : p.endedAt ? '该商品兑换已结束' : '该商品已暂停兑换'),
  }),
  PER_USER_LIMIT_REACHED: wording<PerUserLimitReached>({
    en: (p) => `you have already redeemed this goods item the most times allowed (${p.perUserLimit})`,
    'zh-CN': (p) => `你兑换该商品的次数已达上限（${p.perUserLimit} 次）`,
  }),
  INSUFFICIENT_FUNDS: wording<InsufficientFunds>({
    en: (p) => `this needs ${yuan(p.amountCents)} yuan; your wallet holds ${yuan(p.balanceCents)}`,
    'zh-CN': (p) => `需要 ${yuan(p.amountCents)} 元，你的钱包余额为 ${yuan(p.balanceCents)} 元`,
  }),
};

/** What a rule's wording may use: the numbers and names of the input that broke it. */
export type RuleValues = Record<string, string | number>;

/**
 * The flows' own input rules, those that span fields or that a bound cannot say: a
 * validation issue broken by one has the rule as its code and these words.
 */
export const ruleMessages = {
  MAX_BELOW_MIN: { en: () => 'maxAmount must be at least minAmount', 'zh-CN': () => '最大金额不能小于最小金额' },
  IMPOSSIBLE_SPLIT: {
    en: (v: RuleValues) => `impossible split: count × ${v.bound}Amount (${v.product}) ${v.bound === 'min' ? 'exceeds' : 'is below'} totalAmount (${v.total})`,
    'zh-CN': (v: RuleValues) => `无法拆分：个数 × ${v.bound === 'min' ? '最小' : '最大'}金额（${v.product}）${v.bound === 'min' ? '超过' : '小于'}总金额（${v.total}）`,
  },
  STOCK_NOT_CODE_COUNT: {
    en: (v: RuleValues) => `stock must equal the number of voucher codes (${v.codes})`,
    'zh-CN': (v: RuleValues) => `库存必须等于券码数量（${v.codes}）`,
  },
  UNITS_NOT_CODE_COUNT: {
    en: (v: RuleValues) => `units must equal the number of voucher codes (${v.codes})`,
    'zh-CN': (v: RuleValues) => `补货数量必须等于券码数量（${v.codes}）`,
  },
  DUPLICATE_VOUCHER_CODE: { en: (v: RuleValues) => `voucher code ${v.code} appears twice`, 'zh-CN': (v: RuleValues) => `券码 ${v.code} 重复` },
  ZERO_AMOUNT: { en: () => 'amount must not be 0', 'zh-CN': () => '数量不能为 0' },
  UNKNOWN_TIMEZONE: {
    en: () => 'unknown timezone (use an IANA name such as Asia/Shanghai)',
    'zh-CN': () => '未知时区（请使用 IANA 时区名，如 Asia/Shanghai）',
  },
  INVALID_CURSOR: { en: (v: RuleValues) => `${v.argument} is not a cursor of this list`, 'zh-CN': (v: RuleValues) => `${v.argument} 不是该列表的游标` },
  MIXED_PAGING_DIRECTIONS: {
    en: (v: RuleValues) => `${v.forward} and ${v.backward} cannot be given together: page forwards with first and after, or backwards with last and before`,
    'zh-CN': (v: RuleValues) => `${v.forward} 与 ${v.backward} 不能同时使用：正向翻页用 first 和 after，反向翻页用 last 和 before`,
  },
  INVALID_USER_ID: {
    en: () => 'userId is no id a user can have: 1 to 128 characters, without spaces at either end, line breaks, or control, invisible or bidi characters',
    'zh-CN': () => 'userId 不是有效的用户 ID：须为 1 到 128 个字符，首尾不能有空格，不能含换行、控制字符、不可见字符或双向控制字符',
  },
  NOTHING_TO_CHANGE: { en: () => 'nothing to change', 'zh-CN': () => '没有要修改的内容' },
  DUPLICATE_PRIZE: { en: () => 'each prize at most once', 'zh-CN': () => '每个奖品最多出现一次' },
  GROUP_PRICE_ABOVE_PRICE: { en: () => 'groupPriceCents must not exceed priceCents', 'zh-CN': () => '拼团价不能高于原价' },
  ENDS_BEFORE_STARTS: { en: () => 'endsAt must be after startsAt', 'zh-CN': () => '结束时间必须晚于开始时间' },
  SALE_ENDS_BEFORE_STARTS: { en: () => 'saleEndsAt must be after saleStartsAt', 'zh-CN': () => '售卖结束时间必须晚于开始时间' },
  SALE_ENDS_IN_THE_PAST: {
    en: () => 'saleEndsAt has passed: an item cannot be created with its sale already over',
    'zh-CN': () => '售卖结束时间已过，不能创建已结束售卖的商品',
  },
  SET_AND_CLEARED: {
    en: (v: RuleValues) => `${v.field} cannot be set and cleared at once`,
    'zh-CN': (v: RuleValues) => `${v.field} 不能同时设置和清除`,
  },
  ENDS_IN_THE_PAST: { en: () => 'endsAt has passed: an activity cannot be created already ended', 'zh-CN': () => '结束时间已过，不能创建已结束的活动' },
  ACTIVITY_TOO_LONG: { en: (v: RuleValues) => `an activity lasts at most ${v.days} days`, 'zh-CN': (v: RuleValues) => `活动最长 ${v.days} 天` },
  TIMED_STARTS_IN_THE_PAST: {
    en: () => 'a TIMED lottery starts at most an hour ago: the prizes of every hour before would all be released at once',
    'zh-CN': () => '按时段发放的抽奖最多从一小时前开始：之前每小时的奖品会一次全部放出',
  },
  ENDED_NO_CHANGE: { en: () => 'the activity has ended: its settings no longer change', 'zh-CN': () => '活动已结束，设置不能再修改' },
  ENDED_STAYS_ENDED: {
    en: () => 'the activity has ended: its end cannot move, or its winners and their subscribers would see it start again',
    'zh-CN': () => '活动已结束：结束时间不能再修改，否则已结束的活动会重新开始',
  },
  GROUP_BUY_ENDED: {
    en: () => 'the group-buy has ended: its end and pause no longer change (its title and description still may)',
    'zh-CN': () => '拼团活动已结束：结束时间和暂停状态不能再修改（标题和说明仍可修改）',
  },
  GROUP_BUY_NOT_STARTED: {
    en: () => 'the group-buy has not started: it has no team to cancel (pause it so that none opens)',
    'zh-CN': () => '拼团活动尚未开始，没有可取消的团（可暂停活动，使其不再开团）',
  },
  POINTS_PRIZE_NEEDS_POINTS: { en: () => 'a POINTS prize needs points', 'zh-CN': () => '积分奖品（POINTS）需要设置积分' },
  POINTS_ONLY_ON_POINTS_PRIZE: { en: () => 'only a POINTS prize has points', 'zh-CN': () => '只有积分奖品（POINTS）可以设置积分' },
  HOURLY_QUOTA_ONLY_TIMED: { en: () => 'hourlyQuota is for TIMED activities', 'zh-CN': () => 'hourlyQuota 仅用于定时（TIMED）活动' },
  NO_POSITIVE_WEIGHT: {
    en: () => 'a WEIGHTED activity needs a positive weight (a prize or noPrizeWeight)',
    'zh-CN': () => '按权重（WEIGHTED）抽奖的活动至少需要一个正权重（奖品或 noPrizeWeight）',
  },
  PAID_DRAW_CANNOT_WIN: {
    en: () => 'a paid draw must be able to win: give a prize a positive weight, or make draws free (drawCostPoints 0)',
    'zh-CN': () => '付费抽奖必须有中奖的可能：请给至少一个奖品设置正权重，或将抽奖费用（drawCostPoints）设为 0',
  },
  TIMED_NO_PRIZE_WEIGHT: { en: () => 'every TIMED draw wins: noPrizeWeight must be 0', 'zh-CN': () => '定时（TIMED）活动每次必中：noPrizeWeight 必须为 0' },
  TIMED_ONE_CONSOLATION: {
    en: () => 'a TIMED activity needs exactly one CONSOLATION prize, without hourlyQuota',
    'zh-CN': () => '定时（TIMED）活动需要恰好一个不设 hourlyQuota 的安慰奖（CONSOLATION）',
  },
  TIMED_RELEASED_BY_QUOTA: {
    en: (v: RuleValues) => `TIMED prizes are released by hourlyQuota, not by ${v.field}`,
    'zh-CN': (v: RuleValues) => `定时（TIMED）奖品按 hourlyQuota 发放，不使用 ${v.field}`,
  },
  ONLY_WEIGHTED: { en: (v: RuleValues) => `${v.field} is for WEIGHTED activities`, 'zh-CN': (v: RuleValues) => `${v.field} 仅用于按权重（WEIGHTED）抽奖的活动` },
  UNKNOWN_PRIZE: { en: (v: RuleValues) => `prize ${v.prizeId} is not in this activity`, 'zh-CN': (v: RuleValues) => `奖品 ${v.prizeId} 不属于该活动` },
  HOURLY_QUOTA_ONLY_SCHEDULED: {
    en: () => 'hourlyQuota is for the scheduled prizes of TIMED activities',
    'zh-CN': () => 'hourlyQuota 仅用于定时（TIMED）活动中按小时发放的奖品',
  },
  TOTAL_STOCK_TOO_BIG: { en: (v: RuleValues) => `a prize's totalStock is at most ${v.max}`, 'zh-CN': (v: RuleValues) => `奖品总库存最多为 ${v.max}` },
  WALLET_BALANCE_LIMIT: {
    en: (v: RuleValues) => `a wallet holds at most ${yuan(Number(v.maxCents))} yuan; this one holds ${yuan(Number(v.balanceCents))}, so it can take ${yuan(Number(v.roomCents))} more`,
    'zh-CN': (v: RuleValues) => `钱包余额最多为 ${yuan(Number(v.maxCents))} 元；当前余额 ${yuan(Number(v.balanceCents))} 元，最多还能存入 ${yuan(Number(v.roomCents))} 元`,
  },
  TIMED_PRIZE_NEEDS_QUOTA: {
    en: () => 'a TIMED prize other than the CONSOLATION prize needs an hourlyQuota',
    'zh-CN': () => '定时（TIMED）活动中除安慰奖外的奖品都需要 hourlyQuota',
  },
  ACTIVITY_ID_TAKEN: { en: (v: RuleValues) => `activity ${v.id} exists already`, 'zh-CN': (v: RuleValues) => `活动 ${v.id} 已存在` },
  INVISIBLE_TEXT: {
    en: (v: RuleValues) => `${v.field} shows nothing: it holds only spaces and invisible characters`,
    'zh-CN': (v: RuleValues) => `${v.field} 不能只包含空格和不可见字符`,
  },
  VOUCHER_CODE_NOT_VISIBLE: {
    en: () => 'a voucher code holds visible characters only: no space, line break or invisible character',
    'zh-CN': () => '券码只能包含可见字符，不能有空格、换行或不可见字符',
  },
  VOUCHER_CODE_IN_ANOTHER_POOL: {
    en: (v: RuleValues) => `voucher code ${v.code} is already in a goods item's pool (this one's or another's)`,
    'zh-CN': (v: RuleValues) => `券码 ${v.code} 已在商品的券码池中（本商品或其他商品）`,
  },
  REQUEST_ID_OF_ANOTHER_ITEM: {
    en: (v: RuleValues) => `requestId ${v.requestId} was already used to redeem another goods item`,
    'zh-CN': (v: RuleValues) => `requestId ${v.requestId} 已用于兑换其他商品`,
  },
  REQUEST_ID_OF_ANOTHER_RESTOCK: {
    en: (v: RuleValues) => `requestId ${v.requestId} was already used for another restock of this goods item`,
    'zh-CN': (v: RuleValues) => `requestId ${v.requestId} 已用于该商品的另一次补货`,
  },
  VOUCHER_CODES_REQUIRED: {
    en: () => 'each unit of this goods item is a voucher code: restock it with voucherCodes',
    'zh-CN': () => '该商品每件都是一个券码：补货时请提供 voucherCodes',
  },
  VOUCHER_CODES_NOT_POOLED: {
    en: () => 'this goods item has no voucher code pool: restock it without voucherCodes',
    'zh-CN': () => '该商品没有券码池：补货时不能提供 voucherCodes',
  },
  STOCK_ABOVE_MAX: { en: (v: RuleValues) => `a goods item's stock is at most ${v.max}`, 'zh-CN': (v: RuleValues) => `商品库存最多为 ${v.max}` },
  REQUEST_ID_OF_ANOTHER_AWARD: {
    en: (v: RuleValues) => `requestId ${v.requestId} was already used for another award`,
    'zh-CN': (v: RuleValues) => `requestId ${v.requestId} 已用于另一笔积分发放`,
  },
  REQUEST_ID_OF_ANOTHER_CREATE: {
    en: (v: RuleValues) => `requestId ${v.requestId} was already used to create something else`,
    'zh-CN': (v: RuleValues) => `requestId ${v.requestId} 已用于另一次创建`,
  },
  REQUEST_ID_OF_ANOTHER_PACKET: {
    en: (v: RuleValues) => `requestId ${v.requestId} was already used for another red packet`,
    'zh-CN': (v: RuleValues) => `requestId ${v.requestId} 已用于另一个红包`,
  },
  REQUEST_ID_OF_ANOTHER_TEAM: {
    en: (v: RuleValues) => `requestId ${v.requestId} was already used to open a team of another group-buy activity`,
    'zh-CN': (v: RuleValues) => `requestId ${v.requestId} 已用于在另一个拼团活动中开团`,
  },
  REQUEST_ID_OF_ANOTHER_CHANGE: {
    en: (v: RuleValues) => `requestId ${v.requestId} was already used for another change of this lottery activity`,
    'zh-CN': (v: RuleValues) => `requestId ${v.requestId} 已用于该抽奖活动的另一次修改`,
  },
  REQUEST_ID_OF_ANOTHER_CREDIT: {
    en: (v: RuleValues) => `requestId ${v.requestId} was already used for another credit`,
    'zh-CN': (v: RuleValues) => `requestId ${v.requestId} 已用于另一笔钱包入账`,
  },
  BALANCE_BELOW_ZERO: { en: () => 'the balance would go below zero', 'zh-CN': () => '积分余额将低于 0' },
  BALANCE_ABOVE_MAX: {
    en: (v: RuleValues) => `the balance, with the points paid draws hold, would exceed ${v.max}`,
    'zh-CN': (v: RuleValues) => `积分余额（含付费抽奖预留的积分）将超过 ${v.max}`,
  },
  PAYMENT_OF_ANOTHER_SEAT: {
    en: () => "this paymentRef is another user's or another team's payment",
    'zh-CN': () => '该 paymentRef 是其他用户或其他团的付款',
  },
  PAYMENT_SEATED_ANOTHER: {
    en: () => 'this paymentRef already confirmed another member of the team',
    'zh-CN': () => '该 paymentRef 已确认过该团的另一名成员',
  },
  LATE_PAYMENT_SEATS_NO_ONE: {
    en: () => 'this payment came after its seat lock ended and is being refunded; seat the buyer without it, or with a new payment',
    'zh-CN': () => '该付款在座位锁定结束后才到达，正在退款；请不带该付款为买家入座，或使用新的付款',
  },
} satisfies Record<string, Record<Locale, (values: RuleValues) => string>>;

export type InputRule = keyof typeof ruleMessages;

/** What a bound's wording uses: what is bounded (a field, `limit` or `voucherCodes[3]`; none at the root), its kind and the limit. */
export interface Bound {
  subject?: string;
  /** zod's origin: number, int, bigint, string, array, set, file… */
  origin?: string;
  limit: number;
  /** False for an exclusive bound (a positive number: greater than 0). */
  inclusive: boolean;
  /** An exact length (too small and too big at once). */
  exact: boolean;
}

/** How many of what a bounded string or list holds, in English. */
function englishSize({ origin, limit }: Bound): string | null {
  if (origin === 'string') return countOf(limit, 'character', 'characters');
  if (origin === 'array' || origin === 'set') return countOf(limit, 'item', 'items');
  return null;
}

/**
 * The validation issues TOO_SMALL and TOO_BIG, worded from their limits as the catalog's
 * own bounds are ("first must be at most 100"): zod's wording ("Too big: expected number
 * to be <=200") stays out of answers.
 */
export const boundMessages = {
  TOO_SMALL: {
    en: (b: Bound) => {
      const size = englishSize(b);
      const subject = b.subject ?? 'the value';
      if (size) return b.exact ? `${subject} must have exactly ${size}` : `${subject} must have at least ${size}`;
      return b.inclusive ? `${subject} must be at least ${b.limit}` : `${subject} must be greater than ${b.limit}`;
    },
    'zh-CN': (b: Bound) => {
      if (b.origin === 'string') return b.exact ? `长度必须为 ${b.limit}` : `长度至少为 ${b.limit}`;
      if (b.origin === 'array' || b.origin === 'set') return b.exact ? `必须恰好 ${b.limit} 项` : `至少需要 ${b.limit} 项`;
      return b.inclusive ? `不能小于 ${b.limit}` : `必须大于 ${b.limit}`;
    },
  },
  TOO_BIG: {
    en: (b: Bound) => {
      const size = englishSize(b);
      const subject = b.subject ?? 'the value';
      if (size) return b.exact ? `${subject} must have exactly ${size}` : `${subject} must have at most ${size}`;
      return b.inclusive ? `${subject} must be at most ${b.limit}` : `${subject} must be less than ${b.limit}`;
    },
    'zh-CN': (b: Bound) => {
      if (b.origin === 'string') return b.exact ? `长度必须为 ${b.limit}` : `长度最多为 ${b.limit}`;
      if (b.origin === 'array' || b.origin === 'set') return b.exact ? `必须恰好 ${b.limit} 项` : `最多 ${b.limit} 项`;
      return b.inclusive ? `不能大于 ${b.limit}` : `必须小于 ${b.limit}`;
    },
  },
} satisfies Record<string, Record<Locale, (bound: Bound) => string>>;

/**
 * GraphQL errors that are not about one input issue, under a stable key: refusals of
 * sign-in (UNAUTHENTICATED, its `extensions.reason` from the token's failure), of a role
 * (FORBIDDEN), of a budget (RATE_LIMITED), of a too costly operation (BAD_USER_INPUT).
 * The English wording is the default, as it always was.
 */
export const errorMessages = {
  // The HTTP header first, as GraphiQL's Headers tab sends it (over HTTP and graphql-ws alike);
  // connectionParams only for a graphql-ws client of one's own.
  SIGN_IN: {
    en: () =>
      'sign in: send the HTTP header Authorization: Bearer <token> (in GraphiQL, {"authorization": "Bearer <token>"} in the Headers tab; from a graphql-ws client, connectionParams.authorization)',
    'zh-CN': () =>
      '请先登录：发送 HTTP 请求头 Authorization: Bearer <token>（GraphiQL 中在 Headers 标签页填写 {"authorization": "Bearer <token>"}；graphql-ws 客户端放在 connectionParams.authorization 中）',
  },
  BEARER_EXPECTED: {
    en: () =>
      'send the token as the HTTP header Authorization: Bearer <token> (in GraphiQL, {"authorization": "Bearer <token>"} in the Headers tab; from a graphql-ws client, connectionParams.authorization)',
    'zh-CN': () =>
      '请按 HTTP 请求头 Authorization: Bearer <token> 的格式发送令牌（GraphiQL 中在 Headers 标签页填写 {"authorization": "Bearer <token>"}；graphql-ws 客户端放在 connectionParams.authorization 中）',
  },
  SIGN_IN_TO_RESERVE_STREAM: { en: () => 'reserving a stream needs a signed-in caller', 'zh-CN': () => '预留事件流需要先登录' },
  SIGN_IN_TO_RESERVED_STREAM: { en: () => 'a reserved stream answers only the user who reserved it', 'zh-CN': () => '预留的事件流只应答预留它的用户，请先登录' },
  TOKEN_WITHOUT_SUB: {
    en: () => 'the token has no usable sub (1 to 128 characters, no control characters)',
    'zh-CN': () => '令牌没有可用的 sub（1 到 128 个字符，不含控制字符）',
  },
  TOKEN_LIVES_TOO_LONG: {
    en: (v: RuleValues) => `the token lives longer than the ${v.maxSeconds} s accepted (from iat, or from now)`,
    'zh-CN': (v: RuleValues) => `令牌的有效期超过允许的 ${v.maxSeconds} 秒（从 iat 或当前时间算起）`,
  },
  TOKEN_EXPIRED: { en: () => 'the token has expired', 'zh-CN': () => '令牌已过期' },
  TOKEN_NOT_YET_VALID: { en: () => 'the token is not valid yet (nbf)', 'zh-CN': () => '令牌尚未生效（nbf）' },
  TOKEN_ISSUED_AHEAD: { en: () => 'the token was issued in the future (iat): check the issuer’s clock', 'zh-CN': () => '令牌的签发时间（iat）在未来，请检查签发方的时钟' },
  TOKEN_WRONG_ISSUER: { en: () => 'the token was issued by another issuer', 'zh-CN': () => '令牌由其他签发者签发' },
  TOKEN_WRONG_AUDIENCE: { en: () => 'the token is meant for another audience', 'zh-CN': () => '令牌的受众（aud）不是本服务' },
  TOKEN_CLAIM_UNUSABLE: {
    en: (v: RuleValues) => `the token's ${v.claim} claim is unusable: ${v.detail}`,
    'zh-CN': (v: RuleValues) => `令牌的 ${v.claim} 声明不可用：${v.detail}`,
  },
  TOKEN_BAD_SIGNATURE: { en: () => 'the token was not signed by a key this server trusts', 'zh-CN': () => '令牌的签名密钥不受本服务信任' },
  TOKEN_ALGORITHM_REFUSED: {
    en: (v: RuleValues) => `the token's algorithm is not accepted: ${v.detail}`,
    'zh-CN': (v: RuleValues) => `不接受令牌的签名算法：${v.detail}`,
  },
  TOKEN_NOT_A_JWT: { en: () => 'the token is not a well-formed JWT', 'zh-CN': () => '令牌不是格式正确的 JWT' },
  ROLE_MISSING: { en: () => 'you do not have the role this operation needs', 'zh-CN': () => '你没有执行该操作所需的角色' },
  SHOP_PACKET_FOR_OPERATORS: { en: () => 'only operators create shop-funded red packets', 'zh-CN': () => '只有运营人员可以创建商城出资的红包' },
  INTROSPECTION_FOR_OPERATORS: {
    en: () => 'introspection is disabled; only operators may introspect the schema',
    'zh-CN': () => '内省已关闭；只有运营人员可以内省 schema',
  },
  STREAM_OF_ANOTHER: {
    en: () => 'this stream was reserved by another user or in another server process, or its token is no token this server minted',
    'zh-CN': () => '该事件流由其他用户预留，或预留在另一个服务进程中，或其令牌并非本服务签发',
  },
  NO_STREAM_NAMED: {
    en: () => 'this request names no stream: reserve one with PUT and send its token, or ask with Accept: text/event-stream for a stream of its own',
    'zh-CN': () => '该请求未指明事件流：请先用 PUT 预留并带上其令牌，或以 Accept: text/event-stream 请求单独的事件流',
  },
  STREAM_GONE: {
    en: () => 'this stream no longer exists (a reservation not connected in time is dropped, a closed stream ends): reserve a new one with PUT',
    'zh-CN': () => '该事件流已不存在（预留后未及时连接会被丢弃，关闭的流即结束），请用 PUT 重新预留',
  },
  SLOW_DOWN: { en: () => 'too many requests; slow down', 'zh-CN': () => '请求过于频繁，请放慢速度' },
  BODY_TOO_LARGE: {
    en: (v: RuleValues) => `the request body is larger than the ${v.maxBytes} bytes this caller may send`,
    'zh-CN': (v: RuleValues) => `请求体超过了该调用方允许的 ${v.maxBytes} 字节`,
  },
  LENGTH_REQUIRED: {
    en: () => 'send the request body with a Content-Length, not chunked',
    'zh-CN': () => '请求体须带 Content-Length 发送，不能分块传输',
  },
  TOO_MANY_MUTATIONS: {
    en: (v: RuleValues) => `this operation has ${v.count} mutations, more than the ${v.limit} allowed per window; send fewer at once`,
    'zh-CN': (v: RuleValues) => `该操作包含 ${v.count} 个变更，超过每个时间窗口允许的 ${v.limit} 个；请分开发送`,
  },
  SLOW_DOWN_OR_SIGN_IN: {
    en: () => 'too many requests without a token from this address; slow down or sign in',
    'zh-CN': () => '该地址未登录的请求过于频繁，请放慢速度或先登录',
  },
  TOO_MANY_STREAMS_OF_USER: {
    en: (v: RuleValues) => `at most ${v.max} streams per user at once, reserved or connected; close one first`,
    'zh-CN': (v: RuleValues) => `每个用户最多同时持有 ${v.max} 个事件流（已预留或已连接），请先关闭一个`,
  },
  TOO_MANY_OPERATIONS_BEFORE_CONNECT: {
    en: (v: RuleValues) => `at most ${v.max} operations on a stream not connected yet; connect it first (GET with Accept: text/event-stream)`,
    'zh-CN': (v: RuleValues) => `尚未连接的事件流最多接收 ${v.max} 个操作，请先连接（GET，Accept: text/event-stream）`,
  },
  TOO_MANY_SUBSCRIPTIONS_OF_USER: {
    en: (v: RuleValues) => `at most ${v.limit} subscriptions per user at once; close one first`,
    'zh-CN': (v: RuleValues) => `每个用户最多同时 ${v.limit} 个订阅，请先关闭一个`,
  },
  TOO_MANY_SUBSCRIPTIONS_ON_SOCKET: {
    en: (v: RuleValues) => `at most ${v.limit} subscriptions per connection at once; close one first`,
    'zh-CN': (v: RuleValues) => `每个连接最多同时 ${v.limit} 个订阅，请先关闭一个`,
  },
  TOO_MANY_OPEN_CONNECTIONS: {
    en: (v: RuleValues) => `at most ${v.max} open connections from this address; close one first`,
    'zh-CN': (v: RuleValues) => `该地址最多 ${v.max} 个打开的连接，请先关闭一个`,
  },
  TOO_MANY_NEW_CONNECTIONS: { en: () => 'too many new connections from this address; retry later', 'zh-CN': () => '该地址新建连接过于频繁，请稍后重试' },
  TOO_COSTLY_TOO_OFTEN: {
    en: (v: RuleValues) => `this operation costs ${v.cost}, and costly operations were sent too often; wait, or ask for fewer items (limit) or fewer fields`,
    'zh-CN': (v: RuleValues) => `该操作的开销为 ${v.cost}，高开销操作过于频繁；请稍后再试，或减少条数（limit）或字段`,
  },
  OPERATION_TOO_COSTLY: {
    en: (v: RuleValues) => `the operation costs ${v.cost}, more than the limit of ${v.maxCost}: ask for fewer items (limit) or fewer fields`,
    'zh-CN': (v: RuleValues) => `该操作的开销为 ${v.cost}，超过上限 ${v.maxCost}：请减少条数（limit）或字段`,
  },
  TOKENS_UNVERIFIABLE: { en: () => 'cannot verify tokens right now; retry shortly', 'zh-CN': () => '暂时无法校验令牌，请稍后重试' },
  BRIEFLY_UNAVAILABLE: { en: () => 'the service is briefly unavailable; retry shortly', 'zh-CN': () => '服务暂时不可用，请稍后重试' },
  UNEXPECTED_ERROR: { en: () => 'Unexpected error.', 'zh-CN': () => '服务器出现意外错误' },
} satisfies Record<string, Record<Locale, (values: RuleValues) => string>>;

export type ErrorWording = keyof typeof errorMessages;

/** An error's message in `locale` (English by default). */
export function errorMessage(wording: ErrorWording, locale: Locale = DEFAULT_LOCALE, values: RuleValues = {}): string {
  return errorMessages[wording][locale](values);
}

/** The problem's message in the caller's language; its code where the catalog has no entry (a test checks there is none). */
export function problemMessage(problem: Problem, locale: Locale): string {
  return problemMessages[problem.code]?.[locale](problem) ?? problem.code;
}

/**
 * The language to answer in, from an Accept-Language value: the supported locale the
 * caller ranks highest (any zh-* counts as zh-CN, any en-* as en), English otherwise.
 */
export function localeOf(acceptLanguage: string | null | undefined): Locale {
  let best: { locale: Locale; q: number } | null = null;
  for (const part of (acceptLanguage ?? '').split(',')) {
    const [tag = '', ...params] = part.trim().toLowerCase().split(';');
    const q = Number(
      params
        .find((param) => param.trim().startsWith('q='))
        ?.trim()
        .slice(2) ?? 1,
    );
    const locale: Locale | null = tag.startsWith('zh') ? 'zh-CN' : tag.startsWith('en') ? 'en' : null;
    if (locale && Number.isFinite(q) && q > 0 && (!best || q > best.q)) best = { locale, q };
  }
  return best?.locale ?? DEFAULT_LOCALE;
}
