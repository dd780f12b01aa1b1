// npm run schema:print: rewrites schema.graphql from the code.
import { writeFileSync } from 'node:fs';
import { printSchemaSdl } from '../src/schema/index.ts';

writeFileSync(new URL('../schema.graphql', import.meta.url), printSchemaSdl());
process.stdout.write('wrote schema.graphql\n');
