import { z } from 'zod';
import { activityId, requestId } from '../ids.ts';

export const openTeamInput = z.object({ activityId, requestId: requestId.nullish() });

export type OpenTeamInput = z.infer<typeof openTeamInput>;

/** A payment system's reference; the key that makes confirmTeamSeat idempotent. */
export const paymentRef = z.string().max(128, 'paymentRef must be at most 128 characters').regex(/\S/, 'paymentRef must not be blank');

export const teamListLimit = z.number().int().min(1).max(200);
