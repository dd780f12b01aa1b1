import { type DocumentNode, Kind, type SelectionSetNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { ErrorCode, graphqlError } from '../errors.ts';
import { fragmentsOf } from './operation.ts';

/**
 * The most fields of one response name a selection set may hold. graphql-js's
 * OverlappingFieldsCanBeMergedRule compares every pair of them, and the sub-selections of
 * each pair: 440 × `me { userId }`, within the token limit, took 130 ms of CPU to validate.
 * Under the token limit the pairs grow with this bound (tokens / n names of n fields each,
 * n² / 2 pairs a name): at 10, the worst document costs a few milliseconds, about a normal
 * request. The web app, the test documents, the README and GraphiQL's introspection select
 * a name at most twice (a fragment's field beside the same field).
 */
export const MAX_SAME_NAME_FIELDS = 10;
/** Fields the check visits at most: a fragment spread in several places is visited in each, so nested spreads would multiply. */
const MAX_VISITED_FIELDS = 20_000;

type Refusal = { path: string; count: number } | { visited: number };
type Placed = { set: SelectionSetNode; chain: ReadonlySet<string> };

/**
 * The first place where a selection set holds more than MAX_SAME_NAME_FIELDS fields of one
 * response name, counted as the rule collects them: through inline fragments and named
 * fragments (each once per set), and with the sub-selections of the fields of one name
 * merged, since the rule compares those pairwise too (20 × `me { 20 × userId }` is 400
 * `me.userId`). Operations and fragment definitions are both checked, as the rule does.
 */
export function repeatedFields(document: DocumentNode): Refusal | undefined {
  const fragments = fragmentsOf(document);
  let visited = 0;

  /**
   * `sets` are selection sets merged into one (the sub-selections of fields of one name under
   * parents of one name), each with the fragments spread on the way to it: spreading one of
   * those again would be a cycle, which validation refuses and which must not loop here.
   */
  const check = (path: string, sets: Placed[]): Refusal | undefined => {
    const byName = new Map<string, { count: number; sets: Placed[] }>();
    const spread = new Set<string>();
    const collect = ({ set, chain }: Placed) => {
      for (const selection of set.selections) {
        if (selection.kind === Kind.FIELD) {
          visited += 1;
          const name = selection.alias?.value ?? selection.name.value;
          const entry = byName.get(name) ?? { count: 0, sets: [] };
          entry.count += 1;
          if (selection.selectionSet) entry.sets.push({ set: selection.selectionSet, chain });
          byName.set(name, entry);
        } else if (selection.kind === Kind.INLINE_FRAGMENT) collect({ set: selection.selectionSet, chain });
        else {
          const name = selection.name.value;
          const fragment = fragments.get(name);
          if (!fragment || spread.has(name) || chain.has(name)) continue;
          spread.add(name);
          collect({ set: fragment.selectionSet, chain: new Set([...chain, name]) });
        }
      }
    };
    for (const placed of sets) collect(placed);
    if (visited > MAX_VISITED_FIELDS) return { visited };
    for (const [name, entry] of byName) {
      const at = path ? `${path}.${name}` : name;
      if (entry.count > MAX_SAME_NAME_FIELDS) return { path: at, count: entry.count };
      if (entry.sets.length > 0) {
        const refusal = check(at, entry.sets);
        if (refusal) return refusal;
      }
    }
    return undefined;
  };

  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION && definition.kind !== Kind.FRAGMENT_DEFINITION) continue;
    const chain = new Set(definition.kind === Kind.FRAGMENT_DEFINITION ? [definition.name.value] : []);
    const refusal = check('', [{ set: definition.selectionSet, chain }]);
    if (refusal) return refusal;
  }
  return undefined;
}

/**
 * Refuses, with BAD_USER_INPUT and before graphql-js validates it, a document that
 * repeats a field more than MAX_SAME_NAME_FIELDS times (see repeatedFields): the check
 * walks the document once, where validation would compare every pair.
 */
export function useRepeatedFieldLimit(): Plugin {
  return {
    onValidate: ({ params, setResult }) => {
      const refusal = repeatedFields(params.documentAST);
      if (!refusal) return;
      const message =
        'count' in refusal
          ? `Field "${refusal.path}" is selected ${refusal.count} times in one selection set, at most ${MAX_SAME_NAME_FIELDS} are allowed: select it once (fields of one name are merged into one), or give different selections aliases.`
          : `The document selects over ${MAX_VISITED_FIELDS} fields once its fragments are spread: spread fewer fragments inside fragments.`;
      setResult([graphqlError(ErrorCode.badUserInput, message)]);
    },
  };
}
