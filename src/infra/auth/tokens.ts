import { webcrypto } from 'node:crypto';
import { type JWTPayload, type JWTVerifyGetKey, type JWTVerifyOptions, SignJWT, createRemoteJWKSet, errors, jwtVerify } from 'jose';
import { isUserId } from '../../domain/ids.ts';
import { DEFAULT_LOCALE, type ErrorWording, type RuleValues, errorMessage } from '../../i18n/messages.ts';

export const ADMIN_ROLE = 'admin';

/** How far ahead of this server's clock a token's `iat` may be: the issuer's clock may run a little fast. */
const ISSUED_AHEAD_TOLERANCE_SECONDS = 60;

export interface Viewer {
  userId: string;
  roles: string[];
  /** When the token that named this viewer expires (its `exp`): a subscription ends there (src/guards/tokenExpiry.ts). */
  expiresAtMs?: number;
}

/** An operator may run the operators' fields, introspect in production and see user ids in full. */
export function isOperator(viewer: Viewer | null): boolean {
  return viewer?.roles.includes(ADMIN_ROLE) ?? false;
}

/**
 * Why a request counts as not signed in, in `extensions.reason` of UNAUTHENTICATED.
 * Stable codes of the public contract (README, "Signing in").
 */
export const AuthFailure = {
  /** No Authorization at all, on a field that needs a signed-in caller. */
  missing: 'MISSING',
  /** Not `Bearer <token>`, not a JWT, or a JWT without `sub` or `exp`. */
  malformed: 'MALFORMED',
  /** `exp` has passed, `nbf` has not come yet, or `iat` is over a minute ahead. */
  expired: 'EXPIRED',
  /** Signed with another key, or with an algorithm this server does not take. */
  badSignature: 'BAD_SIGNATURE',
  /** `iss` or `aud` is not the one configured (JWT_ISSUER, JWT_AUDIENCE). */
  wrongIssuer: 'WRONG_ISSUER',
  wrongAudience: 'WRONG_AUDIENCE',
  /** `exp` lies further from `iat` (or from now) than JWT_MAX_LIFETIME_SECONDS. */
  lifetimeTooLong: 'LIFETIME_TOO_LONG',
} as const;
export type AuthFailure = (typeof AuthFailure)[keyof typeof AuthFailure];

/** A refused token: its reason, and the catalog's wording of why (in English as its message). */
export class TokenRefusedError extends Error {
  constructor(
    readonly reason: AuthFailure,
    readonly wording: ErrorWording,
    readonly values: RuleValues = {},
  ) {
    super(errorMessage(wording, DEFAULT_LOCALE, values));
  }
}

const encoder = new TextEncoder();

// Importing the key costs more than checking the signature; do it once per secret. A
// WebCrypto key, because jose works in WebCrypto and would import any other kind of key
// again on every call (a KeyObject verified 20,000 tokens/s here, a CryptoKey 28,000-37,000).
const keys = new Map<string, Promise<webcrypto.CryptoKey>>();
function keyFor(secret: string): Promise<webcrypto.CryptoKey> {
  let key = keys.get(secret);
  if (!key) {
    key = webcrypto.subtle.importKey('raw', encoder.encode(secret), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
    keys.set(secret, key);
  }
  return key;
}

export interface SignOptions {
  expiresInSeconds?: number;
  issuer?: string;
  audience?: string;
}

/** An HS256 token, as `npm run token` and the tests mint them. */
export async function signToken(secret: string, viewer: Viewer, options: SignOptions = {}): Promise<string> {
  const jwt = new SignJWT({ roles: viewer.roles })
    .setProtectedHeader({ alg: 'HS256' })
    .setSubject(viewer.userId)
    .setIssuedAt()
    .setExpirationTime(`${options.expiresInSeconds ?? 86_400}s`);
  if (options.issuer) jwt.setIssuer(options.issuer);
  if (options.audience) jwt.setAudience(options.audience);
  return jwt.sign(await keyFor(secret));
}

export interface TokenRules {
  /** HS256 secret; used unless `jwksUrl` is set. */
  secret: string;
  /** RS256/ES256 keys of an identity provider; when set, only its tokens are accepted. */
  jwksUrl?: string;
  issuer?: string;
  audience?: string;
  maxLifetimeSeconds: number;
}

const CACHE_LIMIT = 50_000;
const CACHE_TTL_MS = 10 * 60_000;

/**
 * Verifies bearer tokens. A flash crowd sends the same tokens again and again, and a
 * signature check costs more than the rest of a small request, so verified tokens are
 * remembered (bounded, and never past their own expiry). Refused tokens are not.
 */
export class TokenVerifier {
  private readonly verified = new Map<string, { viewer: Viewer; validUntilMs: number }>();
  /** jose's remote key set fetches, imports and caches the provider's keys itself. */
  private readonly jwks: JWTVerifyGetKey | undefined;
  private readonly options: JWTVerifyOptions;

  constructor(private readonly rules: TokenRules) {
    this.jwks = rules.jwksUrl ? createRemoteJWKSet(new URL(rules.jwksUrl)) : undefined;
    this.options = {
      algorithms: this.jwks ? ['RS256', 'ES256'] : ['HS256'],
      requiredClaims: ['exp', 'sub'],
      ...(rules.issuer ? { issuer: rules.issuer } : {}),
      ...(rules.audience ? { audience: rules.audience } : {}),
    };
  }

  /**
   * The token's viewer. Throws TokenRefusedError saying why a token is refused; any other
   * error (the identity provider's keys unreachable) is an outage, not the caller's fault.
   */
  async verify(token: string): Promise<Viewer> {
    const remembered = this.verified.get(token);
    if (remembered && remembered.validUntilMs > Date.now()) return remembered.viewer;
    this.verified.delete(token);
    let payload: JWTPayload;
    try {
      ({ payload } = this.jwks ? await jwtVerify(token, this.jwks, this.options) : await jwtVerify(token, await keyFor(this.rules.secret), this.options));
    } catch (error) {
      throw refusal(error);
    }
    const exp = payload.exp!;
    if (typeof payload.sub !== 'string' || !isUserId(payload.sub)) {
      throw new TokenRefusedError(AuthFailure.malformed, 'TOKEN_WITHOUT_SUB');
    }
    // Counted from now at the latest: a token dated in the future must not stretch its lifetime.
    const nowSeconds = Math.floor(Date.now() / 1000);
    const lifetime = exp - Math.min(payload.iat ?? nowSeconds, nowSeconds);
    if (lifetime > this.rules.maxLifetimeSeconds) {
      throw new TokenRefusedError(AuthFailure.lifetimeTooLong, 'TOKEN_LIVES_TOO_LONG', { maxSeconds: this.rules.maxLifetimeSeconds });
    }
    // Issued later than now (a minute of clock skew aside): no issuer whose clock is right
    // signs that, so the token is refused as one not valid yet.
    if (payload.iat !== undefined && payload.iat > nowSeconds + ISSUED_AHEAD_TOLERANCE_SECONDS) throw new TokenRefusedError(AuthFailure.expired, 'TOKEN_ISSUED_AHEAD');
    const roles = Array.isArray(payload.roles) ? payload.roles.filter((role): role is string => typeof role === 'string') : [];
    const viewer = { userId: payload.sub, roles, expiresAtMs: exp * 1000 };
    this.remember(token, viewer, Math.min(Date.now() + CACHE_TTL_MS, exp * 1000));
    return viewer;
  }

  /** True when `authorization` carries an operator's token; a missing or refused one is no operator's. */
  async fromOperator(authorization: string | null | undefined): Promise<boolean> {
    const token = bearerToken(authorization ?? '');
    if (!token) return false;
    try {
      return isOperator(await this.verify(token));
    } catch {
      return false;
    }
  }

  private remember(token: string, viewer: Viewer, validUntilMs: number): void {
    // Maps iterate in insertion order: the first key is the oldest entry.
    if (this.verified.size >= CACHE_LIMIT) this.verified.delete(this.verified.keys().next().value!);
    this.verified.set(token, { viewer, validUntilMs });
  }
}

/** jose's verdict as a reason; errors that are not about the token are passed on. */
function refusal(error: unknown): unknown {
  if (error instanceof errors.JWTExpired) return new TokenRefusedError(AuthFailure.expired, 'TOKEN_EXPIRED');
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'iss') return new TokenRefusedError(AuthFailure.wrongIssuer, 'TOKEN_WRONG_ISSUER');
    if (error.claim === 'aud') return new TokenRefusedError(AuthFailure.wrongAudience, 'TOKEN_WRONG_AUDIENCE');
    if (error.claim === 'nbf') return new TokenRefusedError(AuthFailure.expired, 'TOKEN_NOT_YET_VALID');
    return new TokenRefusedError(AuthFailure.malformed, 'TOKEN_CLAIM_UNUSABLE', { claim: error.claim, detail: error.message });
  }
  if (error instanceof errors.JWSSignatureVerificationFailed || error instanceof errors.JWKSNoMatchingKey) {
    return new TokenRefusedError(AuthFailure.badSignature, 'TOKEN_BAD_SIGNATURE');
  }
  if (error instanceof errors.JOSEAlgNotAllowed) return new TokenRefusedError(AuthFailure.badSignature, 'TOKEN_ALGORITHM_REFUSED', { detail: error.message });
  if (error instanceof errors.JWSInvalid || error instanceof errors.JWTInvalid || error instanceof errors.JOSENotSupported) {
    return new TokenRefusedError(AuthFailure.malformed, 'TOKEN_NOT_A_JWT');
  }
  return error;
}

/** Reads `Bearer <token>`; null for anything else. */
export function bearerToken(header: string): string | null {
  const match = /^Bearer\s+(\S+)$/i.exec(header.trim());
  return match ? match[1]! : null;
}
