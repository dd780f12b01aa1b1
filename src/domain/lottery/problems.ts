import { Problem } from '../problems.ts';
import type { InactiveReason } from './store.ts';

const REASONS: Record<InactiveReason, string> = {
  NOT_STARTED: 'this lottery has not started yet',
  ENDED: 'this lottery has ended',
  PAUSED: 'this lottery is paused',
  SOLD_OUT: 'every prize of this lottery has been given away',
};

export class ActivityNotActive extends Problem {
  constructor(
    readonly reason: InactiveReason,
    readonly startsAt: Date,
    readonly endsAt: Date,
  ) {
    super(REASONS[reason]);
  }
}

export class DrawLimitReached extends Problem {
  constructor(
    readonly dailyDrawLimit: number,
    readonly resetsAt: Date,
  ) {
    super(`you have drawn ${dailyDrawLimit} times today, the daily limit`);
  }
}
