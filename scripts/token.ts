// npm run token -- <userId> [--admin]: prints a token signed with the configured JWT_SECRET,
// with the configured issuer and audience, living JWT_MAX_LIFETIME_SECONDS (at most a day).

import { loadConfig } from '../src/config.ts';
import { ADMIN_ROLE, signToken } from '../src/infra/auth/tokens.ts';

const args = process.argv.slice(2);
const userId = args.find((arg) => !arg.startsWith('--'));
if (!userId) {
  process.stderr.write('usage: npm run token -- <userId> [--admin]\n');
  process.exit(2);
}
const config = loadConfig();
if (config.JWT_JWKS_URL) {
  process.stderr.write('JWT_JWKS_URL is set: the server takes only tokens of that identity provider, ask it for one\n');
  process.exit(2);
}
const roles = args.includes('--admin') ? [ADMIN_ROLE] : [];
const token = await signToken(
  config.jwtSecret,
  { userId, roles },
  {
    expiresInSeconds: Math.min(config.JWT_MAX_LIFETIME_SECONDS, 86_400),
    issuer: config.JWT_ISSUER,
    audience: config.JWT_AUDIENCE,
  },
);
process.stdout.write(`${token}\n`);
