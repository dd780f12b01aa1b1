import type { Config } from '../../config.ts';
import { ADMIN_ROLE, signToken } from './tokens.ts';

/**
 * A token this server accepts, signed with its own secret: for `npm run token` and the web
 * app's development sign-in. Null when tokens come from an identity provider (JWT_JWKS_URL).
 */
export function signLocalToken(config: Config, userId: string, admin: boolean): Promise<string> | null {
  if (config.JWT_JWKS_URL) return null;
  return signToken(
    config.jwtSecret,
    { userId, roles: admin ? [ADMIN_ROLE] : [] },
    { expiresInSeconds: Math.min(config.JWT_MAX_LIFETIME_SECONDS, 86_400), issuer: config.JWT_ISSUER, audience: config.JWT_AUDIENCE },
  );
}
