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
 * The schema a server of that NODE_ENV serves: in production, without the development-only
 * operations (the payment sandbox), so they cannot even be named there.
 */
export function schemaFor(nodeEnv: 'development' | 'production' | 'test'): GraphQLSchema {
  return nodeEnv === 'production' ? productionSchema : schema;
}

const productionSchema = (() => {
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
