// TEMPORARY shim while the teams, lottery and points flows move to src/infra/campaign/;
// deleted by the last of them.
import type { LockDeps } from '../campaign/rebuild.ts';
import { RebuildTimeoutError, rebuildOnce, underRebuildLock } from '../campaign/rebuild.ts';

export const HydrationTimeoutError = RebuildTimeoutError;

export function hydrate(deps: LockDeps, keys: { meta: string; hydrating: string }, rebuild: () => Promise<boolean>): Promise<boolean> {
  return rebuildOnce(deps, { meta: keys.meta, rebuilding: keys.hydrating }, rebuild);
}

export const withHydrationLock = underRebuildLock;

export async function withRebuild<Reply extends { kind: string }>(call: () => Promise<Reply>, rebuild: () => Promise<boolean>): Promise<Exclude<Reply, { kind: 'missing' }> | null> {
  for (let attempt = 1; attempt <= 3; attempt++) {
    const reply = await call();
    if (reply.kind !== 'missing') return reply as Exclude<Reply, { kind: 'missing' }>;
    if (!(await rebuild())) return null;
  }
  throw new RebuildTimeoutError('campaign keys vanished again right after each rebuild');
}
