import { type ASTVisitor, GraphQLError, type ValidationContext } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { unacceptableCharacter } from '../domain/text.ts';
import { ErrorCode, graphqlError } from '../errors.ts';

/** No input type of the schema nests nearly this deep; deeper variables are refused rather than walked. */
const MAX_NESTING = 32;

interface BadValue {
  path: (string | number)[];
  problem: string;
}

/** The first string in `value`, however nested, that holds an unacceptable character. */
function findBadValue(value: unknown, depth: number): BadValue | undefined {
  if (typeof value === 'string') {
    const character = unacceptableCharacter(value);
    return character ? { path: [], problem: `must not contain ${character}` } : undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  if (depth >= MAX_NESTING) return { path: [], problem: `is nested more than ${MAX_NESTING} levels deep` };
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const bad = findBadValue(value[index], depth + 1);
      if (bad) {
        bad.path.unshift(index);
        return bad;
      }
    }
    return undefined;
  }
  for (const key in value) {
    const bad = findBadValue((value as Record<string, unknown>)[key], depth + 1);
    if (bad) {
      bad.path.unshift(key);
      return bad;
    }
  }
  return undefined;
}

function describePath([variable, ...rest]: (string | number)[]): string {
  return `$${variable}${rest.map((step) => (typeof step === 'number' ? `[${step}]` : `.${step}`)).join('')}`;
}

/** Refuses string literals (arguments, defaults) with unacceptable characters; validation results are cached per document. */
function stringLiteralRule(context: ValidationContext): ASTVisitor {
  return {
    StringValue(node) {
      const problem = unacceptableCharacter(node.value);
      if (problem) {
        context.reportError(new GraphQLError(`a string must not contain ${problem}`, { nodes: [node], extensions: { code: ErrorCode.badUserInput } }));
      }
    },
  };
}

function refuseBadVariables({ args, setResultAndStopExecution }: { args: { variableValues?: unknown }; setResultAndStopExecution(result: unknown): void }) {
  const variables = args.variableValues;
  if (typeof variables !== 'object' || variables === null) return;
  const bad = findBadValue(variables, -1);
  if (bad) setResultAndStopExecution({ errors: [graphqlError(ErrorCode.badUserInput, `${describePath(bad.path)} ${bad.problem}`)] });
}

/**
 * Every String and ID input of every operation, checked in one place: literals by a
 * validation rule, variables (every string in them, at any depth) before execution
 * starts, so a refused request reaches neither the rate limiter nor a resolver. Both the
 * fast lane and graphql-ws run these hooks through Yoga's `getEnveloped`.
 */
export function useInputCharacters(): Plugin {
  return {
    onValidate: ({ addValidationRule }) => addValidationRule(stringLiteralRule),
    onExecute: refuseBadVariables,
    onSubscribe: refuseBadVariables,
  };
}
