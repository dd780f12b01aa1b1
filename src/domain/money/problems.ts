import { Problem } from '../problems.ts';

export class InsufficientFunds extends Problem {
  constructor(
    readonly balanceCents: number,
    readonly amountCents: number,
  ) {
    super();
  }
}
