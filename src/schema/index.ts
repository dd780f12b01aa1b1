import { GraphQLObjectType, GraphQLSchema, lexicographicSortSchema, printSchema } from 'graphql';
import { builder } from '../builder.ts';
import './common.ts';
import './groupBuy.ts';
import './lottery.ts';
import './me.ts';
import './operations.ts';
import { DEVELOPMENT_ONLY } from './payments.ts';
import './points.ts';
import './redPackets.ts';
import './teams.ts';
import './wallets.ts';

/** The development schema: everything, the payment sandbox included. */
export const schema = builder.toSchema();

/**
 * The schema a server serves: without the payment sandbox unless it is open (never in
 * production: see SANDBOX_PAYMENTS), so sandboxPay cannot even be named where it would not pay.
 */
export function schemaFor({ sandboxPayments }: { sandboxPayments: boolean }): GraphQLSchema {
  return sandboxPayments ? schema : schemaWithoutSandbox;
}

const schemaWithoutSandbox = (() => {
  const config = schema.toConfig();
  const mutationConfig = config.mutation!.toConfig();
  const mutation = new GraphQLObjectType({
    ...mutationConfig,
    fields: Object.fromEntries(Object.entries(mutationConfig.fields).filter(([name]) => !DEVELOPMENT_ONLY.mutations.includes(name))),
  });
  const types = config.types.filter((type) => type !== config.mutation && !DEVELOPMENT_ONLY.types.includes(type.name));
  return new GraphQLSchema({ ...config, mutation, types });
})();

/** The SDL committed as schema.graphql; a test fails when it is stale. */
export function printSchemaSdl(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}
