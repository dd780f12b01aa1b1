import {
  CreateLotteryDocument,
  type CreateLotteryInput,
  DrawLotteryDocument,
  LotteryActivityDocument,
  LotteryDrawAuditDocument,
  UpdateLotteryDocument,
  type UpdateLotteryInput,
} from '../gql/generated.ts';
import { requestsAt } from './client.ts';
import type { As } from './tokens.ts';

/** The lottery operations as one user at a time, against one server; operators' ones signed as operators. */
export function lotteryAt(url: string) {
  const { raw, data, attempt } = requestsAt(url);
  return {
    raw,
    async create(operator: string, input: CreateLotteryInput) {
      return (await data(CreateLotteryDocument, { input }, operator, { admin: true })).createLotteryActivity;
    },
    async update(operator: string, activityId: string, input: UpdateLotteryInput) {
      return (await data(UpdateLotteryDocument, { activityId, input }, operator, { admin: true })).updateLotteryActivity;
    },
    async draw(user: string, activityId: string, requestId?: string) {
      return (await data(DrawLotteryDocument, { activityId, requestId }, user)).drawLottery;
    },
    /** A draw that answers its errors instead of throwing them. */
    tryDraw(user: string, activityId: string, requestId?: string) {
      return attempt(DrawLotteryDocument, { activityId, requestId }, 'drawLottery', user);
    },
    async activity(viewer: string, id: string, as: As = {}) {
      return (await data(LotteryActivityDocument, { id }, viewer, as)).lotteryActivity;
    },
    async audit(operator: string, drawId: string) {
      return (await data(LotteryDrawAuditDocument, { drawId }, operator, { admin: true })).lotteryDrawAudit;
    },
  };
}

export type LotteryClient = ReturnType<typeof lotteryAt>;

/** startsAt a minute ago, endsAt in an hour. */
export function runningWindow(): { startsAt: string; endsAt: string } {
  const now = Date.now();
  return { startsAt: new Date(now - 60_000).toISOString(), endsAt: new Date(now + 3_600_000).toISOString() };
}
