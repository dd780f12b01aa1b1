import { randomUUID } from 'node:crypto';
import { AwardPointsDocument, CreateGoodsDocument, type CreateGoodsInput, RedeemPointsDocument, type RedeemPointsMutation } from '../gql/generated.ts';
import { gql, gqlData, tokenFor } from './client.ts';

export type RedeemResult = RedeemPointsMutation['redeemPoints'];

/** A points shop over HTTP, as an operator and its users see it. Tokens are minted once per user. */
export class ShopClient {
  private readonly tokens = new Map<string, Promise<string>>();

  constructor(readonly url: () => string) {}

  tokenOf(userId: string, admin = false): Promise<string> {
    const key = `${admin ? 'admin' : 'user'}:${userId}`;
    if (!this.tokens.has(key)) this.tokens.set(key, tokenFor(userId, { admin }));
    return this.tokens.get(key)!;
  }

  async award(userId: string, amount: number, requestId = randomUUID()): Promise<number> {
    const data = await gqlData(this.url(), AwardPointsDocument, { userId, amount, reason: 'test', requestId }, await this.tokenOf('operator', true));
    return data.awardPoints;
  }

  async createGoods(input: CreateGoodsInput) {
    return (await gqlData(this.url(), CreateGoodsDocument, { input }, await this.tokenOf('operator', true))).createGoods;
  }

  /** One redemption that never throws: a failed request shows up as `errors` or `failed`. */
  async redeem(userId: string, goodsId: string, requestId: string): Promise<{ userId: string; requestId: string; result?: RedeemResult; errors?: unknown; failed?: unknown }> {
    try {
      const { body } = await gql(this.url(), RedeemPointsDocument, { goodsId, requestId }, await this.tokenOf(userId));
      if (body.errors?.length || !body.data) return { userId, requestId, errors: body.errors };
      return { userId, requestId, result: body.data.redeemPoints };
    } catch (error) {
      return { userId, requestId, failed: error };
    }
  }
}

export const voucherCodes = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(5, '0')}`);
