/*
 * Validation issues as clients get them in BAD_USER_INPUT's `extensions.issues`: a
 * machine code (zod's issue code in CONSTANT_CASE: TOO_SMALL, TOO_BIG, INVALID_TYPE,
 * INVALID_FORMAT…) with its limits, and a message in the caller's language. A flow's
 * own rule (ruleIssue) is coded by its name in the catalog, with the values its
 * wording uses. A bound is worded from its code and limits as the catalog words bounds
 * (boundMessages): in zh-CN always, so a schema's English message for it does not leak
 * through, and in English where the schema left zod's own wording.
 */
import { BadInputError, type InputIssue } from '../domain/errors.ts';
import { DEFAULT_LOCALE, type InputRule, type Locale, type RuleValues, boundMessages, ruleMessages } from './messages.ts';

/** What the standard-schema issue of a zod schema carries beside its message and path. */
interface ZodIssueFields {
  code?: string;
  minimum?: number | bigint;
  maximum?: number | bigint;
  origin?: string;
  expected?: string;
  inclusive?: boolean;
  exact?: boolean;
  params?: { rule?: string; values?: RuleValues };
}

interface SchemaIssue extends ZodIssueFields {
  message: string;
  path?: ReadonlyArray<PropertyKey | { key: PropertyKey }>;
}

const limit = (value: number | bigint | undefined) => (value === undefined ? undefined : Number(value));

/** zod's own English for a bound (its en locale: "Too big: expected number to be <=200"), which the catalog words instead. */
const ZOD_BOUND_WORDING = /^Too (big|small): expected /;

/** What the issue at `path` bounds, for its wording: the last field named, with the indices after it (voucherCodes[3]). */
function subjectOf(path: readonly (string | number)[] | undefined): string | undefined {
  const named = path?.findLastIndex((part) => typeof part === 'string') ?? -1;
  if (!path || named < 0) return undefined;
  return `${String(path[named])}${path
    .slice(named + 1)
    .map((index) => `[${String(index)}]`)
    .join('')}`;
}

/**
 * The issue's message in `locale` when it is a bound: from its code and limits in zh-CN
 * (a schema's English for it does not leak through), and in English where the schema
 * left zod's wording. Null for anything else.
 */
function boundMessage(code: string, issue: SchemaIssue, path: (string | number)[] | undefined, locale: Locale): string | null {
  if (code !== 'TOO_SMALL' && code !== 'TOO_BIG') return null;
  const bound = limit(code === 'TOO_SMALL' ? issue.minimum : issue.maximum);
  if (bound === undefined) return null;
  if (locale === 'en' && !ZOD_BOUND_WORDING.test(issue.message)) return null;
  return boundMessages[code][locale]({ subject: subjectOf(path), origin: issue.origin, limit: bound, inclusive: issue.inclusive !== false, exact: issue.exact === true });
}

const ZH: Record<string, (issue: ZodIssueFields) => string> = {
  INVALID_TYPE: (issue) => `类型应为 ${issue.expected}`,
  INVALID_FORMAT: () => '格式不正确',
  INVALID_VALUE: () => '取值无效',
};

const isRule = (name: string | undefined): name is InputRule => name !== undefined && Object.hasOwn(ruleMessages, name);

/** A custom issue for a zod refinement that breaks `rule`: English words, the rule and its values for the edge. */
export function ruleIssue(rule: InputRule, values: RuleValues = {}) {
  return { code: 'custom' as const, message: ruleMessages[rule].en(values), params: { rule, values } };
}

/** An update's refinement: one whose every field is left out or null changes nothing (NOTHING_TO_CHANGE). */
export function requireAChange(input: Record<string, unknown>, ctx: { addIssue(issue: ReturnType<typeof ruleIssue> & { path: never[] }): void }): void {
  if (Object.values(input).every((value) => value == null)) ctx.addIssue({ ...ruleIssue('NOTHING_TO_CHANGE'), path: [] });
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
    message: boundMessage(code, issue, path, locale) ?? (zh ? zh(issue) : issue.message),
    code,
    ...(issue.minimum === undefined ? {} : { minimum: limit(issue.minimum) }),
    ...(issue.maximum === undefined ? {} : { maximum: limit(issue.maximum) }),
  };
}

/**
 * BAD_USER_INPUT for the issues a schema found, each worded in `locale`. In Chinese an
 * issue's message leaves its field out (a form shows it beside the field, in its own
 * words), so the error's message, which a client may show alone, names each field.
 */
export function badInput(issues: readonly SchemaIssue[], locale: Locale): BadInputError {
  const worded = issues.map((issue) => inputIssue(issue, locale));
  if (locale === DEFAULT_LOCALE) return BadInputError.of(worded);
  const named = worded.map((issue) => {
    const subject = isRule(issue.code) ? undefined : subjectOf(issue.path);
    return subject ? `${subject}：${issue.message}` : issue.message;
  });
  return new BadInputError(named.join('；'), worded);
}

/**
 * The domain words the rule issues it finds in English (ruleInputIssue); error masking
 * words them again in the caller's language here, for every resolver at once. An error
 * with nothing to reword is returned as it is.
 */
export function badInputInLocale(error: BadInputError, locale: Locale): BadInputError {
  const issues = error.issues;
  if (!issues || locale === DEFAULT_LOCALE) return error;
  const worded = issues.map((issue) => inLocale(issue, locale));
  return worded.some((issue, index) => issue.message !== issues[index]!.message) ? BadInputError.of(worded) : error;
}
