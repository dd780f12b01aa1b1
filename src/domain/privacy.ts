import { createHmac } from 'node:crypto';
import { type Viewer, isOperator } from '../infra/auth/tokens.ts';

/**
 * The campaign a user id is shown in. Aliases are per campaign: the same user has one
 * alias throughout a red packet, a group-buy activity (all its teams) or a lottery, and
 * unrelated aliases in any other.
 */
export type AliasScope = `${'redPacket' | 'teamActivity' | 'lottery'}:${string}` | 'logs';

export const aliasScope = {
  redPacket: (packetId: string): AliasScope => `redPacket:${packetId}`,
  teamActivity: (activityId: string): AliasScope => `teamActivity:${activityId}`,
  lottery: (activityId: string): AliasScope => `lottery:${activityId}`,
  /** With LOG_USER_IDS=alias: one alias per user across every log line, unlinkable to the campaigns' aliases. */
  logs: 'logs' as AliasScope,
};

/** The rule, in words, for the schema's descriptions; `campaign` names where the alias holds. */
export function userIdRule(campaign: string): string {
  return (
    'The full user id for that user and for operators; for anyone else an opaque alias ("u_" and 16 characters), ' +
    `the same for that user everywhere in ${campaign} and different in any other campaign.`
  );
}

const ALIAS_PREFIX = 'u_';
/** 12 bytes are 16 base64url characters. */
const ALIAS_BYTES = 12;
/** Aliases remembered across requests and subscribers: a 10,000-share packet is resolved on every push. */
const CACHE_LIMIT = 100_000;

/**
 * Shows a user id to a viewer: in full to the user and to operators, as an alias to
 * anyone else (other users, anonymous callers, subscribers). An alias is an HMAC of the
 * campaign and the user id under a key derived from a server secret, so instances that
 * share the secret agree on it, and nobody without the secret can map it back to the id
 * or link a user's aliases in two campaigns.
 */
export class UserAliases {
  private readonly key: Buffer;
  /** Per campaign, so a lookup hashes only the user id; the first campaign cached is the first forgotten. */
  private readonly campaigns = new Map<AliasScope, Map<string, string>>();
  private cached = 0;

  constructor(secret: string) {
    // A key of its own, so an alias reveals nothing about the secret's other uses (tokens).
    this.key = createHmac('sha256', secret).update('campaign-backend user alias v1').digest();
  }

  shownTo(viewer: Viewer | null, scope: AliasScope, userId: string): string {
    if (viewer?.userId === userId || isOperator(viewer)) return userId;
    return this.alias(scope, userId);
  }

  alias(scope: AliasScope, userId: string): string {
    let campaign = this.campaigns.get(scope);
    let alias = campaign?.get(userId);
    if (alias !== undefined) return alias;
    // The scope's length makes the message unambiguous whatever characters ids contain.
    const digest = createHmac('sha256', this.key).update(`${scope.length}:${scope}:${userId}`).digest();
    alias = ALIAS_PREFIX + digest.subarray(0, ALIAS_BYTES).toString('base64url');
    if (!campaign) {
      campaign = new Map();
      this.campaigns.set(scope, campaign);
    }
    campaign.set(userId, alias);
    if (++this.cached > CACHE_LIMIT) {
      const [oldestScope, oldest] = this.campaigns.entries().next().value!;
      this.campaigns.delete(oldestScope);
      this.cached -= oldest.size;
    }
    return alias;
  }
}

/** What a user id becomes in log lines with LOG_USER_IDS=alias (`npm run log-alias -- <userId>` finds a user's lines). */
export function logAliases(secret: string): (userId: string) => string {
  const aliases = new UserAliases(secret);
  return (userId) => aliases.alias(aliasScope.logs, userId);
}
