// npm run log-alias -- <userId>: the alias a user's id has in log lines with LOG_USER_IDS=alias,
// keyed with the configured USER_ALIAS_SECRET (else the JWT secret), to find that user's lines.

import { loadConfig } from '../src/config.ts';
import { logAliases } from '../src/domain/privacy.ts';

const [userId] = process.argv.slice(2);
if (!userId) {
  process.stderr.write('usage: npm run log-alias -- <userId>\n');
  process.exit(2);
}
process.stdout.write(`${logAliases(loadConfig().userAliasSecret)(userId)}\n`);
