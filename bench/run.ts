// npm run bench -- <scenario>: runs one load scenario against real Redis and PostgreSQL.
import { readdirSync } from 'node:fs';

const scenarios = readdirSync(new URL('./scenarios/', import.meta.url))
  .filter((file) => file.endsWith('.ts'))
  .map((file) => file.slice(0, -3));
/** Short names of scenarios whose file says more. */
const aliases: Record<string, string> = { buckets: 'pointsBuckets' };
const name = aliases[process.argv[2] ?? ''] ?? process.argv[2];
if (!name || !scenarios.includes(name)) {
  process.stderr.write(`usage: npm run bench -- <scenario>\nscenarios: ${scenarios.join(', ')}\n`);
  process.exit(2);
}
const scenario = (await import(`./scenarios/${name}.ts`)) as { run(args: string[]): Promise<void> };
await scenario.run(process.argv.slice(3));
process.exit(0);
