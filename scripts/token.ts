// npm run token -- <userId> [--admin]: prints a token signed with the configured JWT_SECRET,
// with the configured issuer and audience, living JWT_MAX_LIFETIME_SECONDS (at most a day).

import { loadConfig } from '../src/config.ts';
import { signLocalToken } from '../src/infra/auth/devTokens.ts';

const args = process.argv.slice(2);
const userId = args.find((arg) => !arg.startsWith('--'));
if (!userId) {
  process.stderr.write('usage: npm run token -- <userId> [--admin]\n');
  process.exit(2);
}
const token = await signLocalToken(loadConfig(), userId, args.includes('--admin'));
if (!token) {
  process.stderr.write('JWT_JWKS_URL is set: the server takes only tokens of that identity provider, ask it for one\n');
  process.exit(2);
}
process.stdout.write(`${token}\n`);
