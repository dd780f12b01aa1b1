import { readFileSync } from 'node:fs';
import { MANIFEST_FILE } from '../../src/trustedDocuments.ts';

/** The web app's documents by the ids its build sends (`npm test` builds it first), as the server loads them. */
export function webManifest(): Record<string, string> {
  return JSON.parse(readFileSync(MANIFEST_FILE, 'utf8')) as Record<string, string>;
}

/** The documentId of the web app's operation `operationName` (its fragments come first in the text). */
export function webDocumentId(operationName: string): string {
  const named = new RegExp(`(^|\\s)(query|mutation|subscription) ${operationName}\\b`);
  const found = Object.entries(webManifest()).find(([, text]) => named.test(text));
  if (!found) throw new Error(`the web app has no operation ${operationName}`);
  return found[0];
}
