import { type DocumentNode, type FragmentDefinitionNode, Kind, type OperationDefinitionNode, type SelectionSetNode, getOperationAST } from 'graphql';

const fragmentsByDocument = new WeakMap<DocumentNode, Map<string, FragmentDefinitionNode>>();

/** The document's fragments by name, read once per document (Yoga caches parsed documents). */
export function fragmentsOf(document: DocumentNode): Map<string, FragmentDefinitionNode> {
  let fragments = fragmentsByDocument.get(document);
  if (!fragments) {
    fragments = new Map();
    for (const definition of document.definitions) {
      if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
    }
    fragmentsByDocument.set(document, fragments);
  }
  return fragments;
}

const rootFieldCounts = new WeakMap<OperationDefinitionNode, number>();

/**
 * How many root fields (other than __typename) the operation runs: 15 aliased
 * mutations are 15, however they are spelled (aliases, fragments, inline fragments).
 * Directives are ignored, so @skip can only make the count higher than the work.
 */
export function rootFieldCount(document: DocumentNode, operation: OperationDefinitionNode): number {
  let count = rootFieldCounts.get(operation);
  if (count === undefined) {
    const fragments = fragmentsOf(document);
    const seen = new Set<string>();
    const countIn = (selectionSet: SelectionSetNode): number =>
      selectionSet.selections.reduce((sum, selection) => {
        if (selection.kind === Kind.FIELD) return sum + (selection.name.value === '__typename' ? 0 : 1);
        if (selection.kind === Kind.INLINE_FRAGMENT) return sum + countIn(selection.selectionSet);
        const fragment = fragments.get(selection.name.value);
        // Validation refuses fragment cycles; the guard keeps a bad document from looping anyway.
        if (!fragment || seen.has(fragment.name.value)) return sum;
        seen.add(fragment.name.value);
        return sum + countIn(fragment.selectionSet);
      }, 0);
    count = countIn(operation.selectionSet);
    rootFieldCounts.set(operation, count);
  }
  return count;
}

const operationsByDocument = new WeakMap<DocumentNode, Map<string, OperationDefinitionNode | null>>();

/** The operation to run, looked up once per cached document and name: several guards ask on every request. */
export function operationOf(args: { document: DocumentNode; operationName?: string | null | undefined }): OperationDefinitionNode | null {
  let byName = operationsByDocument.get(args.document);
  if (!byName) {
    byName = new Map();
    operationsByDocument.set(args.document, byName);
  }
  const name = args.operationName ?? '';
  let operation = byName.get(name);
  if (operation === undefined) {
    operation = getOperationAST(args.document, args.operationName) ?? null;
    byName.set(name, operation);
  }
  return operation;
}
