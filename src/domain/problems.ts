import { DEFAULT_LOCALE, problemMessage } from '../i18n/messages.ts';

/**
 * A business refusal, not a failure: services throw these and the GraphQL layer
 * (Pothos errors plugin) turns each class into a member of the field's result union.
 */
export abstract class Problem extends Error {
  override name = this.constructor.name;

  /**
   * The stable machine code clients branch on and translate by: the GraphQL type's name
   * in CONSTANT_CASE (TeamFull -> TEAM_FULL), so it cannot drift from the type.
   */
  get code(): string {
    return this.name.replace(/(?<=[a-z0-9])(?=[A-Z])/g, '_').toUpperCase();
  }
}

// The message is the catalog's English wording of the problem's fields, read when asked
// for: a subclass sets its fields after Error's constructor has run.
Object.defineProperty(Problem.prototype, 'message', {
  get(this: Problem) {
    return problemMessage(this, DEFAULT_LOCALE);
  },
  configurable: true,
});

/** The campaigns NotFound names, as the catalog words them (src/i18n/messages.ts). */
export type CampaignKind = 'team' | 'red packet' | 'goods' | 'lottery activity' | 'group-buy activity' | 'redemption' | 'payment';

export class NotFound extends Problem {
  constructor(
    readonly what: CampaignKind,
    readonly id: string,
  ) {
    super();
  }
}
