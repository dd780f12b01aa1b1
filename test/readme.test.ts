import { readFileSync } from 'node:fs';
import { buildSchema, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { projectFile } from '../src/projectFiles.ts';
import { fieldNames, inputStrings, readmeJsonBlocks, readmeOperations, responseKeys, variableNames } from './support/readme.ts';

// The README's "Your first campaigns" is pasted into GraphiQL by newcomers: each block must
// stay valid against the public contract, say whose token it needs, and take its variables
// from answers before it. test/miniprogram.test.ts runs them on its server.

const schema = buildSchema(readFileSync(projectFile('schema.graphql'), 'utf8'));
const operations = readmeOperations();

describe("the README's first campaigns", () => {
  it('make a campaign of each kind and play each as a user', () => {
    const fields = new Set(operations.flatMap(({ document }) => fieldNames(document)));
    for (const field of [
      'createRedPacket',
      'grabRedPacket',
      'createGroupBuyActivity',
      'openTeam',
      'lockTeamSeat',
      'sandboxPay',
      'createLotteryActivity',
      'drawLottery',
      'createGoods',
      'awardPoints',
      'redeemPoints',
    ]) {
      expect(fields, field).toContain(field);
    }
    const text = operations.map((operation) => operation.text).join('\n');
    for (const kind of ['fundedBy: SHOP', 'capacity: 3', 'dailyStock:', 'strategy: TIMED', 'kind: CONSOLATION', 'voucherCodes:']) expect(text).toContain(kind);
  });

  it.each(operations.map((operation) => [operation.line, operation] as const))('validate against schema.graphql (the block at line %i)', (_line, { document, caller }) => {
    expect(validate(schema, document).map((error) => error.message)).toEqual([]);
    expect(caller, 'its first line says whose token: # as <user>').toMatch(/^(ops|alice|bob)$/);
  });

  it('take every variable from an answer before it', () => {
    const answered = new Set<string>();
    for (const { line, document } of operations) {
      for (const name of variableNames(document)) expect(answered.has(name), `$${name} in the block at line ${line}`).toBe(true);
      for (const key of responseKeys(document)) answered.add(key);
    }
  });

  it('end more than a month from now (else move their dates a year on)', () => {
    const monthAhead = Date.now() + 30 * 86_400_000;
    for (const { line, document } of operations) {
      for (const endsAt of inputStrings(document, 'endsAt')) expect(Date.parse(endsAt), `endsAt ${endsAt} in the block at line ${line}`).toBeGreaterThan(monthAhead);
    }
  });

  it('show the Headers tab as JSON', () => {
    const blocks = readmeJsonBlocks();
    expect(blocks.length).toBeGreaterThan(0);
    for (const block of blocks) expect(() => JSON.parse(block)).not.toThrow();
  });
});
