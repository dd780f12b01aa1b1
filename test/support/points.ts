import { randomUUID } from 'node:crypto';
import {
  AwardPointsDocument,
  type AwardPointsMutationVariables,
  CreateGoodsDocument,
  type CreateGoodsInput,
  GoodsDocument,
  GoodsRedemptionsDocument,
  type GoodsRedemptionsQueryVariables,
  MeDocument,
  RedeemPointsDocument,
  type RedeemPointsMutation,
  RestockGoodsDocument,
  type RestockGoodsInput,
  UpdateGoodsDocument,
  type UpdateGoodsInput,
} from '../gql/generated.ts';
import { requestsAt } from './client.ts';
import type { As } from './tokens.ts';

export type RedeemResult = RedeemPointsMutation['redeemPoints'];

/** The points shop as one user at a time, against one server; operators' operations signed as operators. */
export function pointsAt(url: string) {
  const { raw, data, attempt } = requestsAt(url);
  return {
    raw,
    /** Awards points (for a reason 'test' and a new requestId unless given); resolves with the new balance. */
    async award(operator: string, award: Omit<AwardPointsMutationVariables, 'reason' | 'requestId'> & Partial<AwardPointsMutationVariables>): Promise<number> {
      const variables = { reason: 'test', requestId: randomUUID(), ...award };
      return (await data(AwardPointsDocument, variables, operator, { admin: true })).awardPoints;
    },
    async createGoods(operator: string, input: CreateGoodsInput) {
      return (await data(CreateGoodsDocument, { input }, operator, { admin: true })).createGoods;
    },
    /** Adds stock (a new requestId unless given); answers the item or its problem. */
    async restock(operator: string, input: Omit<RestockGoodsInput, 'requestId'> & Partial<RestockGoodsInput>) {
      return (await data(RestockGoodsDocument, { input: { requestId: randomUUID(), ...input } }, operator, { admin: true })).restockGoods;
    },
    async updateGoods(operator: string, goodsId: string, input: UpdateGoodsInput) {
      const updated = (await data(UpdateGoodsDocument, { goodsId, input }, operator, { admin: true })).updateGoods;
      if (updated.__typename !== 'Goods') throw new Error(`updateGoods answered ${updated.__typename}`);
      return updated;
    },
    /** A redemption that answers its errors instead of throwing them. */
    tryRedeem(user: string, goodsId: string, requestId: string) {
      return attempt(RedeemPointsDocument, { goodsId, requestId }, 'redeemPoints', user);
    },
    async me(user: string) {
      return (await data(MeDocument, {}, user)).me;
    },
    async goods(viewer: string, id: string, as: As = {}) {
      return (await data(GoodsDocument, { id }, viewer, as)).goods;
    },
    async redemptions(operator: string, variables: GoodsRedemptionsQueryVariables) {
      return (await data(GoodsRedemptionsDocument, variables, operator, { admin: true })).goodsRedemptions;
    },
  };
}

export type PointsClient = ReturnType<typeof pointsAt>;

export const voucherCodes = (prefix: string, count: number) => Array.from({ length: count }, (_, i) => `${prefix}-${String(i).padStart(5, '0')}`);
