import { type KeyObject, createSecretKey } from 'node:crypto';
import { SignJWT, jwtVerify } from 'jose';

export const ADMIN_ROLE = 'admin';

export interface Viewer {
  userId: string;
  roles: string[];
}

const encoder = new TextEncoder();

// Importing the key costs more than checking the signature; do it once per secret.
const keys = new Map<string, KeyObject>();
function keyFor(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    key = createSecretKey(encoder.encode(secret));
    keys.set(secret, key);
  }
  return key;
}

export async function signToken(secret: string, viewer: Viewer, expiresIn = '30d'): Promise<string> {
  return new SignJWT({ roles: viewer.roles })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(viewer.userId)
    .setIssuedAt()
    .setExpirationTime(expiresIn)
    .sign(keyFor(secret));
}

/** Null for a token that is malformed, expired, or signed with another secret. */
export async function verifyToken(secret: string, token: string): Promise<Viewer | null> {
  try {
    const { payload } = await jwtVerify(token, keyFor(secret), { algorithms: ['HS256'] });
    if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 128) return null;
    const roles = Array.isArray(payload.roles) ? payload.roles.filter((role): role is string => typeof role === 'string') : [];
    return { userId: payload.sub, roles };
  } catch {
    return null;
  }
}

/** Reads `Bearer <token>`; anything else counts as no credential. */
export function bearerToken(header: string | null | undefined): string | null {
  const match = /^Bearer\s+(\S+)$/i.exec(header?.trim() ?? '');
  return match ? match[1]! : null;
}
