import { z } from 'zod';

/**
 * A record a client names by id: a team, a red packet, a draw, a goods item, a user. The
 * ids the service mints are UUIDs; the bound keeps Redis keys, lookups and the messages
 * that repeat an id short, whatever a client sends.
 */
export const recordId = z.string().min(1).max(128);

/** Activity ids become part of Redis keys (the hash tag), so they are kept to a plain alphabet. */
export const activityId = z.string().regex(/^[\w.-]{1,64}$/, 'activityId must be 1 to 64 letters, digits, "_", "-" or "."');
