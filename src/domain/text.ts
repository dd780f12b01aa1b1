import { z } from 'zod';
import { ruleIssue } from '../i18n/issues.ts';

/**
 * Control characters other than tab, line feed and carriage return (C0, DEL and C1),
 * and UTF-16 halves without their partner. PostgreSQL refuses NUL in text, an unpaired
 * surrogate has no UTF-8 form (Redis would get U+FFFD, so two ids could meet in one key),
 * and none of them belongs in a title, an id or a request id. Nor do the bidi controls
 * (marks, embeddings, overrides, isolates), the zero-width space, the word joiner and the
 * BOM: "\u202Egnp.exe" reads as "exe.png", and a title of "\u200B" shows nothing. The
 * zero-width (non-)joiners stay: emoji sequences and some scripts need them.
 */
const LONE_SURROGATE = String.raw`[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]`;
const CONTROL = String.raw`\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F`;
const INVISIBLE = String.raw`\u061C\u200B\u200E\u200F\u202A-\u202E\u2060\u2066-\u2069\uFEFF`;
const UNACCEPTABLE = new RegExp(`[${CONTROL}${INVISIBLE}]|${LONE_SURROGATE}`);

/**
 * In an identifier (a token's `sub`), tab, line feed and carriage return too: ids are
 * joined with a line feed in some Redis fields, and no real id spans lines. And the
 * zero-width joiners and invisible operators as well: operators read ids in full to ship
 * prizes and pay refunds, and "\u202E…" or "bob\u200D" can pass for another user's id there.
 */
const UNACCEPTABLE_IN_ID = new RegExp(String.raw`[\u0000-\u001F\u007F-\u009F${INVISIBLE}\u200C\u200D\u2061-\u2064]|${LONE_SURROGATE}`);

/** Every UTF-16 half without its partner (for `replace`: global). */
export const LONE_SURROGATES = new RegExp(LONE_SURROGATE, 'g');

/** What is wrong with `text`, or undefined when every character is acceptable (in an identifier, with `inIdentifier`). */
export function unacceptableCharacter(text: string, inIdentifier = false): string | undefined {
  const match = (inIdentifier ? UNACCEPTABLE_IN_ID : UNACCEPTABLE).exec(text);
  if (!match) return undefined;
  const code = match[0].charCodeAt(0);
  const name = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
  if (code >= 0xd800 && code <= 0xdfff) return `an unpaired surrogate (${name})`;
  return code < 0xa0 ? `the control character ${name}` : `the invisible character ${name}`;
}

/** Nothing but whitespace and format characters (joiners, invisible operators, the soft hyphen…). */
const SHOWS_NOTHING = /^[\s\p{Cf}]+$/u;

/**
 * A refinement for a text that must show something (a title, a reason): one of only
 * joiners and spaces passes `.trim().min(1)` but reads as blank. The empty text is left
 * to the bound.
 */
export const showsSomething = (field: string) => [(text: string) => !SHOWS_NOTHING.test(text), ruleIssue('INVISIBLE_TEXT', { field })] as const;

/** Why an operator credited a wallet or awarded points: shown beside the entry in the user's ledger. */
export const ledgerReason = z
  .string()
  .trim()
  .min(1, 'reason must not be empty')
  .max(200)
  .refine(...showsSomething('reason'));

/** A voucher code is handed to a user to type or paste: visible characters only, no space or format character. */
const VISIBLE_ONLY = /^[^\p{C}\p{Z}]*$/u;
export const onlyVisible = (code: string) => VISIBLE_ONLY.test(code);
