/**
 * Control characters other than tab, line feed and carriage return (C0, DEL and C1),
 * and UTF-16 halves without their partner. PostgreSQL refuses NUL in text, an unpaired
 * surrogate has no UTF-8 form (Redis would get U+FFFD, so two ids could meet in one key),
 * and none of them belongs in a title, an id or a request id.
 */
const LONE_SURROGATE = String.raw`[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]`;
const UNACCEPTABLE = new RegExp(String.raw`[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]|` + LONE_SURROGATE);

/**
 * In an identifier (a token's `sub`), tab, line feed and carriage return too: ids are
 * joined with a line feed in some Redis fields, and no real id spans lines. And the
 * invisible format characters (bidi overrides and isolates, zero-width spaces and joiners,
 * the BOM): operators read ids in full to ship prizes and pay refunds, and "\u202E…" can
 * pass for another user's id there.
 */
const UNACCEPTABLE_IN_ID = new RegExp(String.raw`[\u0000-\u001F\u007F-\u009F\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]|` + LONE_SURROGATE);

/** Every UTF-16 half without its partner (for `replace`: global). */
export const LONE_SURROGATES = new RegExp(LONE_SURROGATE, 'g');

/** What is wrong with `text`, or undefined when every character is acceptable (in an identifier, with `inIdentifier`). */
export function unacceptableCharacter(text: string, inIdentifier = false): string | undefined {
  const match = (inIdentifier ? UNACCEPTABLE_IN_ID : UNACCEPTABLE).exec(text);
  if (!match) return undefined;
  const code = match[0].charCodeAt(0);
  const name = `U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
  return code >= 0xd800 && code <= 0xdfff ? `an unpaired surrogate (${name})` : `the control character ${name}`;
}
