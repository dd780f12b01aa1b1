import { z } from 'zod';

const TEAM_LIMITS = {
  minCapacity: 2,
  maxCapacity: 50,
  maxLockSeconds: 3600,
  maxFormationSeconds: 7 * 24 * 3600,
};

/** Activity ids become part of Redis keys (the hash tag), so they are kept to a plain alphabet. */
export const activityId = z.string().regex(/^[\w.-]{1,64}$/, 'activityId must be 1 to 64 letters, digits, "_", "-" or "."');

export const openTeamInput = z.object({
  activityId,
  capacity: z.number().int().min(TEAM_LIMITS.minCapacity).max(TEAM_LIMITS.maxCapacity),
  lockSeconds: z.number().int().min(1).max(TEAM_LIMITS.maxLockSeconds),
  formationSeconds: z.number().int().min(1).max(TEAM_LIMITS.maxFormationSeconds),
});

export type OpenTeamInput = z.infer<typeof openTeamInput>;

/** A payment system's reference; the key that makes confirmTeamSeat idempotent. */
export const paymentRef = z.string().max(128, 'paymentRef must be at most 128 characters').regex(/\S/, 'paymentRef must not be blank');

export const teamListLimit = z.number().int().min(1).max(200);
