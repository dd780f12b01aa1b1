import { Prisma } from '../../generated/prisma/client.ts';

/** The PostgreSQL array types a batch column is sent as. */
export type ColumnType = 'text' | 'int' | 'bigint' | 'bool' | 'jsonb';

/** A column of a batch: its type and how a row gives its value (null for SQL NULL). */
export type Column<Row> = readonly [ColumnType, (row: Row) => unknown];

/**
 * `unnest($1::text[], $2::int[], …) AS alias(col, …)`: a batch of rows as one table in a
 * single statement, one array parameter per column. Every batch insert of the journal
 * handlers goes through here, so no statement aligns positional parameters by hand.
 */
export function unnest<Row>(alias: string, rows: readonly Row[], columns: Record<string, Column<Row>>): Prisma.Sql {
  const entries = Object.entries(columns);
  const arrays = entries.map(([, [type, value]]) => Prisma.sql`${rows.map((row) => value(row) ?? null)}::${Prisma.raw(type)}[]`);
  return Prisma.sql`unnest(${Prisma.join(arrays)}) AS ${Prisma.raw(alias)}(${Prisma.raw(entries.map(([name]) => name).join(', '))})`;
}
