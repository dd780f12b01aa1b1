import type { Scripts } from './redis/scripts.ts';

export interface RateDecision {
  allowed: boolean;
  retryAfterMs: number;
}

/** A per-user fixed-window limit kept in Redis, so it holds across instances. */
export class RateLimiter {
  constructor(
    private readonly scripts: Scripts,
    private readonly limit: number,
    private readonly windowMs: number,
  ) {}

  get enabled(): boolean {
    return this.limit > 0;
  }

  async consume(scope: string, userId: string): Promise<RateDecision> {
    const [allowed, ttl] = (await this.scripts.run('rateLimit', [`ratelimit:${scope}:${userId}`], [this.limit, this.windowMs])) as [number, number];
    return { allowed: allowed === 1, retryAfterMs: Math.max(0, ttl) };
  }
}
