import { lexicographicSortSchema, printSchema } from 'graphql';
import { builder } from '../builder.ts';
import './common.ts';
import './lottery.ts';
import './operations.ts';
import './points.ts';
import './redPackets.ts';
import './teams.ts';

export const schema = builder.toSchema();

/** The SDL committed as schema.graphql; a test fails when it is stale. */
export function printSchemaSdl(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
