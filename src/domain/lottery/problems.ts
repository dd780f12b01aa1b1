import { Problem } from '../problems.ts';
import type { InactiveReason } from './store.ts';

export class ActivityNotActive extends Problem {
  constructor(
    readonly reason: InactiveReason,
    readonly startsAt: Date,
    readonly endsAt: Date,
    /** The draw's own clock when it was refused: clients count down to startsAt against it. */
    readonly serverTime: Date,
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
