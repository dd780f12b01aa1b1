import { readFileSync } from 'node:fs';
import { type DocumentNode, Kind, type OperationDefinitionNode, parse, visit } from 'graphql';
import { projectFile } from '../../src/projectFiles.ts';
import { gql } from './client.ts';
import { tokenOf } from './tokens.ts';

/**
 * One ```graphql block of the README's "Your first campaigns": an operation a newcomer
 * pastes into GraphiQL as it is, sent with the token of the user its first line names
 * (`# as alice`; `ops` is the operator the README mints with --admin).
 */
export interface ReadmeOperation {
  /** The README's line where the block's text starts, for failure messages. */
  line: number;
  text: string;
  caller: string | undefined;
  document: DocumentNode;
}

/** The README's ```graphql blocks, in order. */
export function readmeOperations(markdown = readFileSync(projectFile('README.md'), 'utf8')): ReadmeOperation[] {
  return [...markdown.matchAll(/^```graphql\n([\s\S]*?)^```$/gm)].map((match) => {
    const text = match[1]!;
    return {
      line: markdown.slice(0, match.index).split('\n').length + 1,
      text,
      caller: /^# as (\w+)/.exec(text)?.[1],
      document: parse(text),
    };
  });
}

/** The README's ```json blocks (the Headers tab's object), in order. */
export function readmeJsonBlocks(markdown = readFileSync(projectFile('README.md'), 'utf8')): string[] {
  return [...markdown.matchAll(/^```json\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
}

const operationsOf = (document: DocumentNode) => document.definitions.filter((definition): definition is OperationDefinitionNode => definition.kind === Kind.OPERATION_DEFINITION);

/** The `$variables` an operation declares: ids the newcomer copies from earlier answers. */
export function variableNames(document: DocumentNode): string[] {
  return operationsOf(document).flatMap((operation) => (operation.variableDefinitions ?? []).map((definition) => definition.variable.name.value));
}

/** The keys an answer to the document may have (aliases, else field names): what a later block's variables can be named after. */
export function responseKeys(document: DocumentNode): string[] {
  const keys: string[] = [];
  visit(document, { Field: (field) => void keys.push(field.alias?.value ?? field.name.value) });
  return keys;
}

/** The schema fields the document selects, by name. */
export function fieldNames(document: DocumentNode): string[] {
  const names: string[] = [];
  visit(document, { Field: (field) => void names.push(field.name.value) });
  return names;
}

/** Every string value of an input field `name` in the document (`endsAt: "2027-…"`). */
export function inputStrings(document: DocumentNode, name: string): string[] {
  const values: string[] = [];
  visit(document, {
    ObjectField: (field) => {
      if (field.name.value === name && field.value.kind === Kind.STRING) values.push(field.value.value);
    },
  });
  return values;
}

/** Every object of an answer with a Problem's `code`: a business refusal the README's reader would see. */
function refusals(value: unknown): unknown[] {
  if (Array.isArray(value)) return value.flatMap(refusals);
  if (value === null || typeof value !== 'object') return [];
  return 'code' in value ? [value] : Object.values(value).flatMap(refusals);
}

/** Every string an answer holds under a key, so a later block's `$key` can take it, as the reader copies it. */
function collectStrings(value: unknown, into: Record<string, string>): void {
  if (Array.isArray(value)) for (const item of value) collectStrings(item, into);
  else if (value !== null && typeof value === 'object')
    for (const [key, item] of Object.entries(value)) {
      if (typeof item === 'string') into[key] = item;
      else collectStrings(item, into);
    }
}

/**
 * Runs the README's operations in order against a server, as a newcomer does in GraphiQL:
 * each with its caller's token, its variables taken from the answers before it. Throws,
 * naming the block, on an error or a refusal; resolves with the ids the answers gave.
 */
export async function runReadmeOperations(url: string, operations = readmeOperations()): Promise<Record<string, string>> {
  const ids: Record<string, string> = {};
  for (const { line, text, caller, document } of operations) {
    if (!caller) throw new Error(`README line ${line}: the block names no caller (# as <user>)`);
    const variables = Object.fromEntries(variableNames(document).map((name) => [name, ids[name]]));
    const { body } = await gql(url, text, variables, await tokenOf(caller, { admin: caller === 'ops' }));
    const refused = refusals(body.data);
    if (body.errors?.length || !body.data || refused.length > 0) {
      throw new Error(`README line ${line}, as ${caller}, with ${JSON.stringify(variables)}: ${JSON.stringify(body.errors ?? refused)}`);
    }
    collectStrings(body.data, ids);
  }
  return ids;
}
