import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // graphql ships CJS and ESM builds. Node (and so Pothos and Yoga, which vitest does not
    // transform) loads the CJS one; test code must meet the same copy, not the "module" build.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    reporters: ['default', './test/support/plainSummaryReporter.ts'],
    // Files start real servers against real Redis and PostgreSQL; two at a time fits two cores.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 120_000,
    hookTimeout: 60_000,
  },
});
