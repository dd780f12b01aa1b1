import { vi } from 'vitest';

// Files share a worker process (isolate: false in vitest.config.ts) to keep what packages
// cost to load; the project's own modules (src/, test/support/) start afresh in each file,
// so no cache or singleton of one file's stores meets another's.
vi.resetModules();
