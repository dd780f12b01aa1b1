import { Problem } from '../problems.ts';

export class InsufficientPoints extends Problem {
  constructor(
    readonly balance: number,
    readonly pointsCost: number,
  ) {
    super(`this costs ${pointsCost} points; your balance is ${balance}`);
  }
}

export class OutOfStock extends Problem {
  constructor() {
    super('this goods item is out of stock');
  }
}

export class PerUserLimitReached extends Problem {
  constructor(readonly perUserLimit: number) {
    super(`you have already redeemed this goods item the most times allowed (${perUserLimit})`);
  }
}
