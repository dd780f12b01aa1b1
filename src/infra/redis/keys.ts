/**
 * Every key of one campaign shares a Redis Cluster hash tag, `{<kind>:<id>}`,
 * so a script that gets several of them still runs on one cluster node.
 */
export function campaignKeys<const Suffix extends string>(
  kind: string,
  id: string,
  suffixes: readonly Suffix[],
): Record<Suffix, string> {
  const tag = `{${kind}:${id}}`;
  return Object.fromEntries(suffixes.map((suffix) => [suffix, `${tag}:${suffix}`])) as Record<Suffix, string>;
}
