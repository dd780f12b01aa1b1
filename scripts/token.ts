// npm run token -- <userId> [--admin]: prints a token signed with the configured JWT_SECRET.
import { ADMIN_ROLE, signToken } from '../src/infra/auth/tokens.ts';
import { loadConfig } from '../src/config.ts';

const args = process.argv.slice(2);
const userId = args.find((arg) => !arg.startsWith('--'));
if (!userId) {
  process.stderr.write('usage: npm run token -- <userId> [--admin]\n');
  process.exit(2);
}
const config = loadConfig();
const roles = args.includes('--admin') ? [ADMIN_ROLE] : [];
process.stdout.write(`${await signToken(config.jwtSecret, { userId, roles })}\n`);
