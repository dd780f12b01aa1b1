import { type AliasScope, UserAliases } from '../../src/domain/privacy.ts';
import { TEST_JWT_SECRET } from './env.ts';

/** What another user sees instead of a user id. */
export const ALIAS_PATTERN = /^u_[A-Za-z0-9_-]{16}$/;

const aliases = new UserAliases(TEST_JWT_SECRET);

/** The alias a server with the tests' secret shows others for `userId` in a campaign. */
export function aliasOf(scope: AliasScope, userId: string): string {
  return aliases.alias(scope, userId);
}
