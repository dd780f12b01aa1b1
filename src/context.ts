import type { App } from './app.ts';
import { type Viewer, bearerToken } from './infra/auth/tokens.ts';

export interface Context {
  app: App;
  /** Who is calling; null without a valid token. */
  viewer: Viewer | null;
}

/** Builds the context from `Authorization` (HTTP) or `connectionParams.authorization` (graphql-ws). */
export async function buildContext(app: App, authorization: unknown): Promise<Context> {
  const token = typeof authorization === 'string' ? bearerToken(authorization) : null;
  const viewer = token ? await app.tokens.verify(token) : null;
  return { app, viewer };
}

/** The caller of a field that requires `signedIn`; scope auth has already checked it. */
export function viewerOf(context: Context): Viewer {
  if (!context.viewer) throw new Error('viewerOf called on a field without the signedIn scope');
  return context.viewer;
}
