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

/** An operator took the goods item off sale (updateGoods), or it is outside its sale window; nothing was spent. */
export class GoodsOffSale extends Problem {
  /** `opensAt`: the sale's start, when that is all that keeps the item off sale now; `endedAt`: its end, once passed. */
  constructor(
    readonly opensAt: Date | null = null,
    readonly endedAt: Date | null = null,
  ) {
    super();
  }
}
