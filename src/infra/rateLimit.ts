import { type Scripts, defineScript } from './redis/scripts.ts';

const rateLimit = defineScript('rateLimit', ['budget'], {
  allowed: (values) => ({ retryAfterMs: values.num(0) }),
  refused: (values) => ({ retryAfterMs: values.num(0) }),
});

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
    const reply = await this.scripts.call(rateLimit, { budget: `ratelimit:${scope}:${caller}` }, [this.limit, this.windowMs, cost]);
    return { allowed: reply.kind === 'allowed', retryAfterMs: Math.max(0, reply.retryAfterMs) };
  }
}
