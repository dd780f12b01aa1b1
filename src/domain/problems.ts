/**
 * A business refusal, not a failure: services throw these and the GraphQL layer
 * (Pothos errors plugin) turns each class into a member of the field's result union.
 */
export abstract class Problem extends Error {
  override name = this.constructor.name;
}

export class NotFound extends Problem {
  constructor(what: string, id: string) {
    super(`${what} ${id} does not exist`);
  }
}
