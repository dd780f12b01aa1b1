import {
  type DocumentNode,
  type GraphQLCompositeType,
  type GraphQLSchema,
  Kind,
  type OperationDefinitionNode,
  type SelectionSetNode,
  type ValueNode,
  getNamedType,
  isCompositeType,
  isInterfaceType,
  isObjectType,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { App } from '../app.ts';
import type { Context } from '../context.ts';
import { ErrorCode, graphqlError } from '../errors.ts';
import { errorMessage } from '../i18n/messages.ts';
import { isOperator } from '../infra/auth/tokens.ts';
import { LIST_SIZE_EXTENSION, PAGE_SIZE } from '../schema/connections.ts';
import { budgetOf, clientAddress, requestOf } from './clientAddress.ts';
import { fragmentsOf, operationOf } from './operation.ts';
import { refuseOverBudget } from './rateLimits.ts';

/** Arguments that say how many items a list field returns (`count`: RedPacket.latestShares). */
const LIST_SIZE_ARGUMENTS = new Set(['limit', 'count']);
/** A connection's page bounds: the page holds `first` or `last` items, or the default size when neither is given. */
const PAGE_BOUNDS = new Set(['first', 'last']);

type Variables = Record<string, unknown> | null | undefined;

/**
 * The cost of an operation: every field costs 1, and the fields beneath a field with a
 * `limit` or `count` argument count once per item it may return (the value given, or the
 * argument's default), beneath a connection once per item of its page (`first` or `last`,
 * or the default page size). `teams(limit: 200) { id members { userId } }` costs
 * 1 + 200 × 4. Fragments count where they are spread; a union's branches all count.
 * A list field without such an argument counts its declared `listSize` items, if any, each
 * at least as much as every field of its type: what it costs the server is the rows it reads,
 * however few fields a client picks of them.
 * `dependsOnVariables` says whether a list size came from a variable, so the cost of
 * the rest can be remembered per document.
 */
export function operationCost(schema: GraphQLSchema, document: DocumentNode, operation: OperationDefinitionNode, variables: Variables): { cost: number; dependsOnVariables: boolean } {
  const fragments = fragmentsOf(document);
  let dependsOnVariables = false;

  const listSize = (node: ValueNode | undefined, fallback: unknown): number => {
    let value: unknown = fallback;
    if (node?.kind === Kind.INT) value = Number(node.value);
    else if (node?.kind === Kind.VARIABLE) {
      dependsOnVariables = true;
      const given = variables?.[node.name.value];
      if (given !== undefined && given !== null) value = given;
      else {
        const definition = operation.variableDefinitions?.find((variable) => variable.variable.name.value === node.name.value);
        if (definition?.defaultValue?.kind === Kind.INT) value = Number(definition.defaultValue.value);
      }
    }
    // A size the field will refuse (negative, not a number) is the field's business, not the cost's.
    return typeof value === 'number' && Number.isFinite(value) && value > 1 ? value : 1;
  };

  // Memoized: a fragment spread 500 times in fragments spread 500 times is still costed once.
  const fragmentCosts = new Map<string, number>();
  const fragmentCost = (name: string): number => {
    let cost = fragmentCosts.get(name);
    if (cost !== undefined) return cost;
    const fragment = fragments.get(name);
    // Validation refuses fragment cycles; the 0 set first keeps a bad document from looping anyway.
    fragmentCosts.set(name, 0);
    if (!fragment) return 0;
    const type = schema.getType(fragment.typeCondition.name.value);
    cost = costOf(fragment.selectionSet, type && isCompositeType(type) ? type : undefined);
    fragmentCosts.set(name, cost);
    return cost;
  };

  function costOf(selectionSet: SelectionSetNode, parent: GraphQLCompositeType | undefined): number {
    let cost = 0;
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) {
        cost += 1;
        if (!selection.selectionSet) continue;
        const field = parent && (isObjectType(parent) || isInterfaceType(parent)) ? parent.getFields()[selection.name.value] : undefined;
        const type = field ? getNamedType(field.type) : undefined;
        let items = 1;
        let isPage = false;
        let pageItems: number | undefined;
        for (const argument of field?.args ?? []) {
          const given = selection.arguments?.find((node) => node.name.value === argument.name);
          if (PAGE_BOUNDS.has(argument.name)) {
            isPage = true;
            if (given) pageItems = Math.max(pageItems ?? 1, listSize(given.value, PAGE_SIZE.defaultSize));
          } else if (LIST_SIZE_ARGUMENTS.has(argument.name)) {
            items = Math.max(items, listSize(given?.value, argument.defaultValue));
          }
        }
        if (isPage) items = Math.max(items, pageItems ?? PAGE_SIZE.defaultSize);
        const declared = field?.extensions[LIST_SIZE_EXTENSION];
        let itemCost = costOf(selection.selectionSet, type && isCompositeType(type) ? type : undefined);
        if (typeof declared === 'number') {
          items = Math.max(items, declared);
          if (type && isObjectType(type)) itemCost = Math.max(itemCost, Object.keys(type.getFields()).length);
        }
        cost += items * itemCost;
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        const type = selection.typeCondition ? schema.getType(selection.typeCondition.name.value) : parent;
        cost += costOf(selection.selectionSet, type && isCompositeType(type) ? type : undefined);
      } else {
        cost += fragmentCost(selection.name.value);
      }
    }
    return cost;
  }

  const root = schema.getRootType(operation.operation) ?? undefined;
  return { cost: costOf(operation.selectionSet, root), dependsOnVariables };
}

/** An operation costing at least this draws its cost from its caller's budget (RATE_LIMIT_COST): about a full list of shares. */
export const COSTLY_OPERATION = 1_000;

/**
 * Refuses, with BAD_USER_INPUT and before any resolver runs, an operation that costs
 * more than GRAPHQL_MAX_COST (see operationCost). Checked at execution, where the variables
 * are known; an operation whose list sizes are all literals or defaults is costed once.
 * A costly operation (COSTLY_OPERATION or more) of anyone but an operator also takes its
 * cost from the caller's budget (RATE_LIMIT_COST per window: a user, or an anonymous
 * address), so one caller repeating it cannot slow everyone's reads; it is RATE_LIMITED
 * past the budget. Cheaper operations stay synchronous: no Redis round trip.
 */
export function useOperationCost(app: App): Plugin {
  const maxCost = app.config.GRAPHQL_MAX_COST;
  const budget = app.rateLimits.cost;
  const trustedProxies = app.config.TRUST_PROXY;
  const fixedCosts = new WeakMap<OperationDefinitionNode, number>();
  const refuseCostly = (payload: {
    args: { schema: GraphQLSchema; document: DocumentNode; operationName?: string | null; variableValues?: Variables; contextValue?: unknown };
    setResultAndStopExecution(result: unknown): void;
  }): Promise<void> | undefined => {
    const { args } = payload;
    const operation = operationOf(args);
    if (!operation) return undefined;
    let cost = fixedCosts.get(operation);
    if (cost === undefined) {
      const costed = operationCost(args.schema, args.document, operation, args.variableValues);
      cost = costed.cost;
      if (!costed.dependsOnVariables) fixedCosts.set(operation, cost);
    }
    const context = args.contextValue as Context;
    if (cost > maxCost) {
      payload.setResultAndStopExecution({
        errors: [graphqlError(ErrorCode.badUserInput, errorMessage('OPERATION_TOO_COSTLY', context.locale, { cost, maxCost }), { cost, maxCost })],
      });
      return undefined;
    }
    if (cost < COSTLY_OPERATION || !budget.enabled || isOperator(context.viewer)) return undefined;
    const caller = context.viewer ? `user:${context.viewer.userId}` : `address:${budgetOf(clientAddress(requestOf(context), trustedProxies))}`;
    return refuseOverBudget(payload, 'cost', budget.consume('cost', caller, cost), errorMessage('TOO_COSTLY_TOO_OFTEN', context.locale, { cost }));
  };
  return { onExecute: refuseCostly, onSubscribe: refuseCostly };
}
