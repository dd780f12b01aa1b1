import { Problem } from '../problems.ts';
import type { RedPacketShareView } from './store.ts';

export class AlreadyGrabbed extends Problem {
  constructor(readonly share: RedPacketShareView) {
    super();
  }
}

export class RedPacketEmpty extends Problem {}

export class RedPacketExpired extends Problem {
  constructor(readonly expiresAt: Date) {
    super();
  }
}
