import type { Scripts } from './redis/scripts.ts';

export interface RateDecision {
  allowed: boolean;
  retryAfterMs: number;
}

/** A fixed-window budget per caller kept in Redis, so it holds across instances. */
export class RateLimiter {
  constructor(
    private readonly scripts: Scripts,
    /** Units per window; 0 turns the limit off. */
    readonly limit: number,
    private readonly windowMs: number,
  ) {}

  get enabled(): boolean {
    return this.limit > 0;
  }

  /** Takes `cost` units from the caller's budget, or nothing when they do not fit. */
  async consume(scope: string, caller: string, cost = 1): Promise<RateDecision> {
    const [allowed, ttl] = (await this.scripts.run('rateLimit', [`ratelimit:${scope}:${caller}`], [this.limit, this.windowMs, cost])) as [number, number];
    return { allowed: allowed === 1, retryAfterMs: Math.max(0, ttl) };
  }
}
