import { Problem } from '../problems.ts';
import type { RedPacketShareView } from './store.ts';

export class AlreadyGrabbed extends Problem {
  constructor(readonly share: RedPacketShareView) {
    super('you already grabbed a share of this red packet');
  }
}

export class RedPacketEmpty extends Problem {
  constructor() {
    super('every share of this red packet has been grabbed');
  }
}

export class RedPacketExpired extends Problem {
  constructor(readonly expiresAt: Date) {
    super('this red packet has expired');
  }
}
