import { buildServer } from '../../scripts/build-server.ts';

/**
 * vitest globalSetup: started servers run the bundle (test/support/server.ts), so it is
 * rebuilt from src/ before any file runs, however vitest was invoked.
 */
export default async function setup(): Promise<void> {
  await buildServer();
}
