import { Problem } from '../problems.ts';
import type { TeamStatus } from './store.ts';

export class TeamFull extends Problem {
  constructor(
    /** The earliest expiry among the live locks: when a seat may free up. */
    readonly nextUnlockAt: Date | null,
    readonly serverTime: Date,
  ) {
    super('every seat of this team is taken or locked by a paying buyer');
  }
}

export class AlreadyMember extends Problem {
  constructor() {
    super('you are already a member of this team');
  }
}

export class TeamClosed extends Problem {
  constructor(readonly status: TeamStatus) {
    super(status === 'COMPLETE' ? 'this team is complete' : status === 'FAILED' ? 'this team failed to form before its deadline' : 'this team is past its deadline');
  }
}

export class NoSeatLock extends Problem {
  constructor(readonly nextUnlockAt: Date | null) {
    super('you hold no seat lock on this team and no seat is free');
  }
}
