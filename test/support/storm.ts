import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { Agent, fetch } from 'undici';
import { expect } from 'vitest';
import type { GraphqlResponse } from './client.ts';

/**
 * One request per token, all sent at once over 50 connections, so the server always has a
 * few dozen in hand: what an operator's change meets in a crowd. `progress.answered` counts
 * the answers so far, to send the change mid-storm.
 */
export function stormOf<T, V>(url: string, document: TypedDocumentNode<T, V>, variables: V, tokens: string[]) {
  const connections = new Agent({ connections: 50 });
  const query = print(document);
  const progress = { answered: 0 };
  const answers = Promise.all(
    tokens.map(async (token) => {
      const response = await fetch(url, {
        method: 'POST',
        dispatcher: connections,
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ query, variables }),
      });
      progress.answered++;
      return (await response.json()) as GraphqlResponse<T>['body'];
    }),
  ).finally(() => connections.close());
  return { progress, answers };
}

/** How many of a storm's answers were of each kind (`kindOf` names it); every answer is a result, none an error. */
export async function tallyOf<T>(answers: Promise<GraphqlResponse<T>['body'][]>, kindOf: (data: T) => string): Promise<Map<string, number>> {
  const kinds = new Map<string, number>();
  for (const body of await answers) {
    expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
    const kind = kindOf(body.data!);
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  return kinds;
}
