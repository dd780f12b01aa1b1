/*
 * Validation issues as clients get them in BAD_USER_INPUT's `extensions.issues`: a
 * machine code (zod's issue code in CONSTANT_CASE: TOO_SMALL, TOO_BIG, INVALID_TYPE,
 * INVALID_FORMAT…) with its limits, and a message in the caller's language. A flow's
 * own rule (ruleIssue) is coded by its name in the catalog, with the values its
 * wording uses. In zh-CN a bound is worded from its code and limits, so a schema's
 * English message for it does not leak through.
 */
import { BadInputError, type InputIssue } from '../domain/errors.ts';
import { type InputRule, type Locale, type RuleValues, ruleMessages } from './messages.ts';

/** What the standard-schema issue of a zod schema carries beside its message and path. */
interface ZodIssueFields {
  code?: string;
  minimum?: number | bigint;
  maximum?: number | bigint;
  origin?: string;
  expected?: string;
  inclusive?: boolean;
  params?: { rule?: string; values?: RuleValues };
}

interface SchemaIssue extends ZodIssueFields {
  message: string;
  path?: ReadonlyArray<PropertyKey | { key: PropertyKey }>;
}

const limit = (value: number | bigint | undefined) => (value === undefined ? undefined : Number(value));

const ZH: Record<string, (issue: ZodIssueFields) => string> = {
  TOO_SMALL: (issue) =>
    issue.origin === 'string' ? `长度至少为 ${limit(issue.minimum)}` : issue.origin === 'array' ? `至少需要 ${limit(issue.minimum)} 项` : `不能小于 ${limit(issue.minimum)}`,
  TOO_BIG: (issue) => (issue.origin === 'string' ? `长度最多为 ${limit(issue.maximum)}` : issue.origin === 'array' ? `最多 ${limit(issue.maximum)} 项` : `不能大于 ${limit(issue.maximum)}`),
  INVALID_TYPE: (issue) => `类型应为 ${issue.expected}`,
  INVALID_FORMAT: () => '格式不正确',
  INVALID_VALUE: () => '取值无效',
};

const isRule = (name: string | undefined): name is InputRule => name !== undefined && Object.hasOwn(ruleMessages, name);

/** A custom issue for a zod refinement that breaks `rule`: English words, the rule and its values for the edge. */
export function ruleIssue(rule: InputRule, values: RuleValues = {}) {
  return { code: 'custom' as const, message: ruleMessages[rule].en(values), params: { rule, values } };
}

/** An issue coded by the rule it breaks. */
export interface RuleInputIssue extends InputIssue {
  code: InputRule;
}

/** An issue the domain finds outside a schema, worded in English until the edge words it again (inLocale). */
export function ruleInputIssue(path: (string | number)[], rule: InputRule, values: RuleValues = {}): RuleInputIssue {
  return { path, code: rule, message: ruleMessages[rule].en(values), ...(Object.keys(values).length > 0 ? { values } : {}) };
}

/** The issue worded in `locale`, when its code is a rule of the catalog. */
export function inLocale(issue: InputIssue, locale: Locale): InputIssue {
  return isRule(issue.code) ? { ...issue, message: ruleMessages[issue.code][locale](issue.values ?? {}) } : issue;
}

export function inputIssue(issue: SchemaIssue, locale: Locale): InputIssue {
  const path = issue.path?.map((part) => (typeof part === 'object' ? part.key : part) as string | number);
  const rule = issue.params?.rule;
  if (isRule(rule)) return inLocale(ruleInputIssue(path ?? [], rule, issue.params?.values), locale);
  const code = (issue.code ?? 'custom').toUpperCase();
  const zh = locale === 'zh-CN' ? ZH[code] : undefined;
  return {
    path,
    message: zh ? zh(issue) : issue.message,
    code,
    ...(issue.minimum === undefined ? {} : { minimum: limit(issue.minimum) }),
    ...(issue.maximum === undefined ? {} : { maximum: limit(issue.maximum) }),
  };
}

/** For a resolver's catch: a BadInputError the domain threw, its rule issues worded in `locale`; anything else as it is. */
export function rethrowInLocale(locale: Locale) {
  return (error: unknown): never => {
    if (error instanceof BadInputError && error.issues) throw BadInputError.of(error.issues.map((issue) => inLocale(issue, locale)));
    throw error;
  };
}
