import { Problem } from '../problems.ts';
import type { InactiveReason } from './store.ts';

export class ActivityNotActive extends Problem {
  constructor(
    readonly reason: InactiveReason,
    readonly startsAt: Date,
    readonly endsAt: Date,
    /** The draw's own clock when it was refused: clients count down to startsAt against it. */
    readonly serverTime: Date,
    /** SOLD_OUT_TODAY: the next day; NOTHING_RELEASED: the end of the next release's hour (endsAt at the latest), when scheduled. */
    readonly availableAt: Date | null = null,
  ) {
    super();
  }
}

/** A paid draw at the user's daily win limit, which could only have lost. */
export class WinLimitReached extends Problem {
  constructor(
    readonly dailyWinLimit: number,
    readonly resetsAt: Date,
  ) {
    super();
  }
}

export class DrawLimitReached extends Problem {
  constructor(
    readonly dailyDrawLimit: number,
    readonly resetsAt: Date,
  ) {
    super();
  }
}
