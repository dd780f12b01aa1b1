import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Outside production an unset JWT_SECRET falls back to a secret generated once and
 * kept in `.data/`, so tokens minted by `npm run token` keep working across restarts.
 */
const DEV_SECRET_FILE = '.data/jwt-secret';

export function readOrCreateDevSecret(file = DEV_SECRET_FILE): string {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    const secret = randomBytes(32).toString('base64url');
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, `${secret}\n`, { mode: 0o600 });
    return secret;
  }
}
