import { Problem } from '../problems.ts';

export interface GrabbedShareView {
  packetId: string;
  userId: string;
  amount: number;
  grabbedAt: Date;
}

export class AlreadyGrabbed extends Problem {
  constructor(readonly share: GrabbedShareView) {
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
