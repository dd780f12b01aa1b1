import { ADMIN_ROLE, signToken } from '../../src/infra/auth/tokens.ts';
import { TEST_JWT_SECRET } from './env.ts';

/** How a user calls besides their id: an operator holds the admin role. */
export interface As {
  admin?: boolean;
}

/** A new token of the tests' secret for `userId`, valid for a day. */
export function tokenFor(userId: string, as: As = {}): Promise<string> {
  return signToken(TEST_JWT_SECRET, { userId, roles: as.admin ? [ADMIN_ROLE] : [] });
}

const tokens = new Map<string, Promise<string>>();

/**
 * The token of `userId` (an operator's with `admin`), signed once per test file: storms
 * send thousands of requests as the same users, and a signature each would cost more
 * than some of the requests.
 */
export function tokenOf(userId: string, as: As = {}): Promise<string> {
  const key = `${userId}\u0000${as.admin ? 'admin' : ''}`;
  let token = tokens.get(key);
  if (!token) {
    token = tokenFor(userId, as);
    tokens.set(key, token);
  }
  return token;
}

/** Signs the users' tokens before a storm, so that its first requests do not wait for signatures. */
export async function signAhead(users: readonly string[]): Promise<void> {
  await Promise.all(users.map((user) => tokenOf(user)));
}
