import { z } from 'zod';
import { ruleIssue } from '../i18n/issues.ts';
import { unacceptableCharacter } from './text.ts';

/**
 * A record a client names by id: a team, a red packet, a draw, a goods item (a user: userId). The
 * ids the service mints are UUIDs; the bound keeps Redis keys, lookups and the messages
 * that repeat an id short, whatever a client sends.
 */
export const recordId = z.string().min(1).max(128);

/** A client's name for one attempt; retries reuse it. */
export const requestId = z.string().min(1, 'requestId must not be empty').max(128);

/** Activity ids become part of Redis keys (the hash tag), so they are kept to a plain alphabet. */
export const activityId = z.string().regex(/^[\w.-]{1,64}$/, 'activityId must be 1 to 64 letters, digits, "_", "-" or "."');

/**
 * Whether `id` can be a user's id: a token's `sub` is refused unless it is, and an operator
 * naming a user (creditWallet, awardPoints, confirmTeamSeat) is held to the same rule, or
 * money, points and seats could go to ids no token carries, or that read as another user's.
 * 1 to 128 characters, no spaces at either end (two ids would look alike), and none of the
 * characters unacceptable in an identifier (line breaks, bidi overrides, invisibles).
 */
export function isUserId(id: string): boolean {
  return id.length > 0 && id.length <= 128 && id.trim() === id && unacceptableCharacter(id, true) === undefined;
}

/** A user an operator names. */
export const userId = z.string().refine(isUserId, ruleIssue('INVALID_USER_ID'));
