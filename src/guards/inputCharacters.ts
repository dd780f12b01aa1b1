import { type ASTNode, type ASTVisitor, type DocumentNode, GraphQLError, Kind, type ValidationContext, visit } from 'graphql';
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

type Steps = (string | number)[];

/**
 * Where a node of the document sits in the arguments of a field: the argument, then the
 * input fields and list positions down to it, as BAD_USER_INPUT issues name them
 * (`input.prizes[0].title`). Undefined outside any argument (a variable's default value).
 * `path`, `parent` and `ancestors` are what graphql-js's visitor passes for the node:
 * `path[i]` is the key into the i-th of the ancestors, and then of the parent.
 */
function argumentSteps(path: readonly (string | number)[], parent: ASTNode | readonly ASTNode[] | undefined, ancestors: readonly (ASTNode | readonly ASTNode[])[]): Steps | undefined {
  const chain = parent ? [...ancestors, parent] : ancestors;
  let steps: Steps | undefined;
  chain.forEach((ancestor, i) => {
    if (!('kind' in ancestor)) {
      // A list value's items: the key into them is the position.
      const list = chain[i - 1];
      if (steps && list && 'kind' in list && list.kind === Kind.LIST) steps.push(path[i]!);
    } else if (ancestor.kind === Kind.ARGUMENT) steps = [ancestor.name.value];
    else if (steps && ancestor.kind === Kind.OBJECT_FIELD) steps.push(ancestor.name.value);
  });
  return steps;
}

function describeSteps([first, ...rest]: Steps): string {
  return `${first}${rest.map((step) => (typeof step === 'number' ? `[${step}]` : `.${step}`)).join('')}`;
}

/** The argument path each variable of the document is first used at. */
function variablePlaces(document: DocumentNode): Map<string, Steps> {
  const places = new Map<string, Steps>();
  visit(document, {
    Variable(node, _key, parent, path, ancestors) {
      const steps = argumentSteps(path, parent, ancestors);
      if (steps && !places.has(node.name.value)) places.set(node.name.value, steps);
    },
  });
  return places;
}

/**
 * A bad value's place as the client wrote the field, not the variable that carried it
 * (`$i.title` is `input.title`, where `$i` is passed as `input`); `$name` for a variable
 * the document does not use.
 */
function describePlace([variable, ...rest]: Steps, document: DocumentNode): string {
  const place = variablePlaces(document).get(String(variable));
  return place ? describeSteps([...place, ...rest]) : describeSteps([`$${variable}`, ...rest]);
}

/** Refuses string literals (arguments, defaults) with unacceptable characters; validation results are cached per document. */
function stringLiteralRule(context: ValidationContext): ASTVisitor {
  return {
    StringValue(node, _key, parent, path, ancestors) {
      const problem = unacceptableCharacter(node.value);
      if (problem) {
        const steps = argumentSteps(path, parent, ancestors);
        context.reportError(new GraphQLError(`${steps ? describeSteps(steps) : 'a string'} must not contain ${problem}`, { nodes: [node], extensions: { code: ErrorCode.badUserInput } }));
      }
    },
  };
}

function refuseBadVariables({ args, setResultAndStopExecution }: { args: { document: DocumentNode; variableValues?: unknown }; setResultAndStopExecution(result: unknown): void }) {
  const variables = args.variableValues;
  if (typeof variables !== 'object' || variables === null) return;
  const bad = findBadValue(variables, -1);
  if (bad) setResultAndStopExecution({ errors: [graphqlError(ErrorCode.badUserInput, `${describePlace(bad.path, args.document)} ${bad.problem}`)] });
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
