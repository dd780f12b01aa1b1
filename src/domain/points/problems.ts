import { Problem } from '../problems.ts';

export class InsufficientPoints extends Problem {
  constructor(
    readonly balance: number,
    readonly pointsCost: number,
  ) {
    super();
  }
}

export class OutOfStock extends Problem {}

export class PerUserLimitReached extends Problem {
  constructor(readonly perUserLimit: number) {
    super();
  }
}

/** An operator took the goods item off sale (updateGoods); nothing was spent. */
export class GoodsOffSale extends Problem {}
