import { Problem } from '../problems.ts';
import type { TeamStatus } from './store.ts';

export class TeamFull extends Problem {
  constructor(
    /** The earliest expiry among the live locks: when a seat may free up. */
    readonly nextUnlockAt: Date | null,
    readonly serverTime: Date,
  ) {
    super();
  }
}

export class AlreadyMember extends Problem {}

export class TeamClosed extends Problem {
  constructor(readonly status: TeamStatus) {
    super();
  }
}

export class NoSeatLock extends Problem {
  constructor(readonly nextUnlockAt: Date | null) {
    super();
  }
}

export class GroupBuyNotActive extends Problem {
  constructor(
    readonly startsAt: Date,
    readonly endsAt: Date,
    readonly serverTime: Date,
    /** Within its window, but an operator paused it. */
    readonly paused = false,
  ) {
    super();
  }
}

export class OpenTeamLimitReached extends Problem {
  constructor(readonly maxOpenTeamsPerLeader: number) {
    super();
  }
}

export class SeatLockLimitReached extends Problem {
  constructor(readonly maxLocks: number) {
    super();
  }
}

export class TeamLimitReached extends Problem {
  constructor(readonly maxTeamsPerUser: number) {
    super();
  }
}
