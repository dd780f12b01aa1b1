// `prisma generate` needs no schema engine, but the CLI insists on locating (or
// downloading) one first. Pointing PRISMA_SCHEMA_ENGINE_BINARY at any existing
// file satisfies the check on machines that cannot download it.
import { spawnSync } from 'node:child_process';

const env = { ...process.env };
env.PRISMA_SCHEMA_ENGINE_BINARY ??= process.execPath;
env.PRISMA_HIDE_UPDATE_MESSAGE = '1';
const result = spawnSync('npx', ['--no-install', 'prisma', 'generate'], { stdio: 'inherit', env });
process.exit(result.status ?? 1);
