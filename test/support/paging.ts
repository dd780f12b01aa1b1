import { expect } from 'vitest';
import { type GraphqlResponse, errorCodes } from './client.ts';

/** A page that mixes paging directions, and the forward and backward arguments its refusal names. */
export interface MixedPage {
  variables: { first?: number; after?: string; last?: number; before?: string };
  forward: 'first' | 'after';
  backward: 'last' | 'before';
}

/** Every way to mix the directions around two cursors of a list, `early` before `late` in its order. */
export function mixedPages(early: string, late: string): MixedPage[] {
  return [
    { variables: { last: 3, after: early }, forward: 'after', backward: 'last' },
    { variables: { first: 2, before: late }, forward: 'first', backward: 'before' },
    { variables: { after: early, before: late }, forward: 'after', backward: 'before' },
    { variables: { first: 2, last: 1 }, forward: 'first', backward: 'last' },
    { variables: { first: 2, after: early, last: 1, before: late }, forward: 'first', backward: 'last' },
  ];
}

/** The response refuses the mixed page with BAD_USER_INPUT, naming both arguments, rather than answering rows. */
export function expectRefusedAsMixed(response: GraphqlResponse<unknown>, { forward, backward, variables }: MixedPage): void {
  const what = JSON.stringify(variables);
  expect(errorCodes(response), what).toEqual(['BAD_USER_INPUT']);
  expect(response.body.data ?? null, what).toBeNull();
  expect(response.body.errors?.[0]?.extensions?.issues, what).toEqual([
    {
      path: [backward],
      code: 'MIXED_PAGING_DIRECTIONS',
      message: `${forward} and ${backward} cannot be given together: page forwards with first and after, or backwards with last and before`,
      values: { forward, backward },
    },
  ]);
}

/** One page of a connection, read through its edges or its nodes. */
type ConnectionPage<Node> = { pageInfo: { hasNextPage: boolean; endCursor?: string | null } } & ({ edges: { node: Node }[] } | { nodes: Node[] });

/** Every node of a connection, page by page forwards from `after`. */
export async function everyPage<Node>(read: (after: string | null) => Promise<ConnectionPage<Node>>, after: string | null = null): Promise<Node[]> {
  const nodes: Node[] = [];
  for (let pages = 0; pages < 100; pages++) {
    const page = await read(after);
    nodes.push(...('edges' in page ? page.edges.map((edge) => edge.node) : page.nodes));
    if (!page.pageInfo.hasNextPage) return nodes;
    after = page.pageInfo.endCursor ?? null;
  }
  throw new Error('more than 100 pages');
}

/** A cursor as the lists write it, naming the row `id`: to hand a list a row of another list, or no row at all. */
export function cursorOf(id: string): string {
  return Buffer.from(`c1:${id}`).toString('base64url');
}

/** The response refuses the cursor in `argument` as no cursor of the list (INVALID_CURSOR), rather than answering a page placed by it. */
export function expectInvalidCursor(response: GraphqlResponse<unknown>, what: string, argument: 'after' | 'before' = 'after'): void {
  expect(errorCodes(response), what).toEqual(['BAD_USER_INPUT']);
  expect(response.body.errors?.[0]?.extensions?.issues, what).toEqual([
    { path: [argument], code: 'INVALID_CURSOR', message: `${argument} is not a cursor of this list`, values: { argument } },
  ]);
}
