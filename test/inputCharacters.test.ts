import { readFileSync } from 'node:fs';
import {
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
  type GraphQLSchema,
  astFromValue,
  buildSchema,
  getNamedType,
  isInputObjectType,
  isLeafType,
  isListType,
  isNonNullType,
  print,
} from 'graphql';
import { fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LotteryWinnersDocument, RedPacketUpdatedDocument, TeamStatusDocument } from './gql/generated.ts';
import { type GraphqlResponse, errorCodes, gql, subscribeSse, subscribeWs } from './support/client.ts';
import { testEnv } from './support/env.ts';
import { stopAll } from './support/lifecycle.ts';
import { lotteryAt, runningWindow } from './support/lottery.ts';
import { pointsAt } from './support/points.ts';
import { sleep } from './support/poll.ts';
import { redPacketsAt } from './support/redPackets.ts';
import { type ServerProcess, startServerProcesses } from './support/server.ts';
import { type Stores, openStores, snapshotStores } from './support/stores.ts';
import { teamsAt } from './support/teams.ts';
import { tokenOf } from './support/tokens.ts';

const schema: GraphQLSchema = buildSchema(readFileSync(new URL('../schema.graphql', import.meta.url), 'utf8'));
const POISONS = {
  NUL: 'a\u0000b',
  'a lone surrogate': 'a\uD800b',
  'a trailing low surrogate': 'b\uDC00',
  'a bidi override': '\u202Egnp.exe',
  'a zero-width space': 'a\u200Bb',
};
/** The bidi controls, the zero-width space, the word joiner and the BOM: refused in text too, not only in ids. */
const INVISIBLES = [...'\u202A\u202B\u202C\u202D\u202E\u2066\u2067\u2068\u2069\u200E\u200F\u061C\u200B\u2060\uFEFF'];

// Both lanes of one deployment: the fast lane serves JSON POSTs beside Yoga, which serves them all on the other.
const env = testEnv('input_chars');
let fastLane: ServerProcess;
let yogaOnly: ServerProcess;
let stores: Stores;
const CALLERS = ['admin', 'sender', 'grabber', 'leader', 'buyer', 'other'] as const;
type Caller = (typeof CALLERS)[number];
const userOf = (caller: Caller) => `chars-${caller}`;
const tokenOfCaller = (caller: Caller) => tokenOf(userOf(caller), { admin: caller === 'admin' });
/** Live campaigns the poisoned mutations aim at, so that without the check they would change something. */
const live = { packetId: '', teamId: '', activityId: '', prizeId: '', goodsId: '' };

beforeAll(async () => {
  stores = openStores(env);
  [fastLane, yogaOnly] = await startServerProcesses([env.vars, { ...env.vars, GRAPHQL_FAST_LANE: '0' }]);
  const url = fastLane.url;
  live.packetId = (await redPacketsAt(url).create(userOf('sender'), { totalAmount: 1000, count: 10 })).id;
  const teams = teamsAt(url);
  live.teamId = (await teams.open(userOf('leader'), { activityId: 'chars-activity', capacity: 5 })).id;
  expect((await teams.lock(userOf('buyer'), live.teamId)).__typename).toBe('SeatLocked');
  const lottery = await lotteryAt(url).create(userOf('admin'), { title: 'Chars', ...runningWindow(), prizes: [{ title: 'Mug', totalStock: 100, weight: 1 }] });
  live.activityId = lottery.id;
  live.prizeId = lottery.prizes[0]!.id;
  const points = pointsAt(url);
  live.goodsId = (await points.createGoods(userOf('admin'), { title: 'Voucher', pointsCost: 1, stock: 2, voucherCodes: ['V-1', 'V-2'] })).id;
  await points.award(userOf('admin'), { userId: userOf('buyer'), amount: 100, reason: 'start', requestId: 'start' });
});

afterAll(async () => {
  await stopAll(fastLane, yogaOnly);
  await stores?.cleanup();
});

/**
 * A valid call of every mutation, with every String and ID input it has (list items and
 * nested input fields included), by a caller it would succeed for.
 */
function validMutations(): Record<string, { caller: Caller; args: Record<string, unknown> }> {
  const { packetId, teamId, activityId, prizeId, goodsId } = live;
  return {
    awardPoints: { caller: 'admin', args: { userId: 'chars-other', amount: 5, reason: 'bonus', requestId: 'award-1' } },
    cancelGroupBuyActivity: { caller: 'admin', args: { activityId: 'chars-activity' } },
    closeRedPacket: { caller: 'admin', args: { packetId } },
    confirmTeamSeat: { caller: 'admin', args: { teamId, userId: 'chars-other', paymentRef: 'pay-1' } },
    createGroupBuyActivity: {
      caller: 'admin',
      args: { input: { id: 'chars-gb', title: 'Tea', description: 'for two', priceCents: 200, groupPriceCents: 100, capacity: 2, ...runningWindow(), requestId: 'gb-1' } },
    },
    creditWallet: { caller: 'admin', args: { userId: 'chars-other', amountCents: 100, reason: 'bonus', requestId: 'credit-1' } },
    createGoods: { caller: 'admin', args: { input: { title: 'Cup', pointsCost: 1, stock: 1, voucherCodes: ['C-1'], requestId: 'goods-1' } } },
    createLotteryActivity: {
      caller: 'admin',
      args: { input: { title: 'Draw', ...runningWindow(), timezone: 'Asia/Shanghai', prizes: [{ title: 'Pen', totalStock: 1, weight: 1 }], requestId: 'lottery-1' } },
    },
    createRedPacket: { caller: 'sender', args: { input: { totalAmount: 100, count: 2, greeting: 'hi', requestId: 'rp-1' } } },
    drawLottery: { caller: 'other', args: { activityId, requestId: 'draw-1' } },
    grabRedPacket: { caller: 'grabber', args: { packetId } },
    lockTeamSeat: { caller: 'other', args: { teamId } },
    openTeam: { caller: 'other', args: { input: { activityId: 'chars-activity', requestId: 'open-1' } } },
    redeemPoints: { caller: 'buyer', args: { goodsId, requestId: 'redeem-1' } },
    releaseTeamSeat: { caller: 'buyer', args: { teamId } },
    restockGoods: { caller: 'admin', args: { input: { goodsId, requestId: 'restock-1', units: 1, voucherCodes: ['V-3'] } } },
    sandboxPay: { caller: 'buyer', args: { paymentRef: 'pay_chars' } },
    topUpWallet: { caller: 'buyer', args: { amountCents: 100 } },
    updateGoods: { caller: 'admin', args: { goodsId, input: { title: 'Voucher 2' } } },
    updateGroupBuyActivity: { caller: 'admin', args: { activityId: 'chars-activity', input: { title: 'Tea 2', description: 'for three' } } },
    updateLotteryActivity: { caller: 'admin', args: { activityId, input: { prizes: [{ prizeId, weight: 2 }], requestId: 'update-1' } } },
  };
}

/** Paths of every String and ID position an input type has: `input.prizes[].title`. */
function stringPositions(type: GraphQLInputType, path: string): string[] {
  if (isNonNullType(type)) return stringPositions(type.ofType, path);
  if (isListType(type)) return stringPositions(type.ofType, `${path}[]`);
  if (isInputObjectType(type)) return Object.values(type.getFields()).flatMap((field) => stringPositions(field.type, `${path}.${field.name}`));
  return ['String', 'ID'].includes(type.name) ? [path] : [];
}

/** Paths of the strings in a value, and a copy of it with the string at `path` replaced by `poison`. */
function stringPaths(value: unknown, path: string): string[] {
  if (typeof value === 'string') return [path];
  if (Array.isArray(value)) return value.flatMap((item) => stringPaths(item, `${path}[]`));
  if (typeof value === 'object' && value !== null) return Object.entries(value).flatMap(([key, item]) => stringPaths(item, `${path}.${key}`));
  return [];
}
function poisoned(value: unknown, path: string, at: string, poison: string): unknown {
  if (typeof value === 'string') return path === at ? poison : value;
  if (Array.isArray(value)) return value.map((item) => poisoned(item, `${path}[]`, at, poison));
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, poisoned(item, `${path}.${key}`, at, poison)]));
  return value;
}

/** Every String and ID position of a field's arguments, as stringPaths spells them. */
function positionsOf(field: GraphQLField<unknown, unknown>): string[] {
  return field.args.flatMap((arg) => stringPositions(arg.type, `.${arg.name}`));
}

function selectionOf(field: GraphQLField<unknown, unknown>): string {
  return isLeafType(getNamedType(field.type)) ? '' : ' { __typename }';
}

/** The call with its arguments as variables, and with them inline as literals. */
function documents(operation: 'query' | 'mutation', field: GraphQLField<unknown, unknown>, args: Record<string, unknown>) {
  const given = field.args.filter((arg) => args[arg.name] !== undefined);
  const definitions = given.map((arg) => `$${arg.name}: ${arg.type}`).join(', ');
  const viaVariables = `${operation} Poisoned${definitions ? `(${definitions})` : ''} { ${field.name}(${given.map((arg) => `${arg.name}: $${arg.name}`).join(', ')})${selectionOf(field)} }`;
  const literal = (arg: GraphQLArgument) => print(astFromValue(args[arg.name], arg.type)!);
  const inline = `${operation} { ${field.name}(${given.map((arg) => `${arg.name}: ${literal(arg)}`).join(', ')})${selectionOf(field)} }`;
  return { viaVariables, inline };
}

/** With `field`, the first error names it as the client wrote it (`input.prizes[0].title`), not the variable that carried it. */
function expectRefused(response: GraphqlResponse<unknown>, what: string, field?: string) {
  const codes = errorCodes(response);
  expect(codes.length > 0 && codes.every((code) => code === 'BAD_USER_INPUT'), `${what}: ${JSON.stringify(response.body)}`).toBe(true);
  expect(response.body.data ?? null, what).toBeNull();
  const named = `${field} must not contain `;
  if (field) expect(response.body.errors?.[0]?.message.slice(0, named.length), what).toBe(named);
}

describe('a control character, a lone surrogate or an invisible character in any String or ID input', () => {
  it('the valid calls cover every String and ID input of every mutation in schema.graphql', () => {
    const mutations = schema.getMutationType()!.getFields();
    const calls = validMutations();
    expect(Object.keys(calls).sort()).toEqual(Object.keys(mutations).sort());
    for (const [name, { args }] of Object.entries(calls)) {
      expect(stringPaths(args, ''), name).toEqual(expect.arrayContaining(positionsOf(mutations[name]!)));
    }
  });

  it.each([
    ['the fast lane', () => fastLane],
    ['Yoga', () => yogaOnly],
  ])('refuses every mutation with BAD_USER_INPUT over %s, via variables and inline, and changes nothing', async (_lane, server) => {
    const mutations = schema.getMutationType()!.getFields();
    await sleep(300);
    const before = await snapshotStores(stores, env);
    for (const [name, { caller, args }] of Object.entries(validMutations())) {
      for (const path of positionsOf(mutations[name]!)) {
        // `.input.prizes[].title`, poisoned in every item: the first is named.
        const field = path.slice(1).replaceAll('[]', '[0]');
        for (const [poisonName, poison] of Object.entries(POISONS)) {
          const bad = poisoned(args, '', path, poison) as Record<string, unknown>;
          const { viaVariables, inline } = documents('mutation', mutations[name]!, bad);
          expectRefused(await gql(server().url, viaVariables, bad, await tokenOfCaller(caller)), `${name} ${path} ${poisonName} via variables`, field);
          // A literal's lone surrogate is a syntax error, before any field is known.
          expectRefused(await gql(server().url, inline, {}, await tokenOfCaller(caller)), `${name} ${path} ${poisonName} inline`, poison === POISONS.NUL ? field : undefined);
        }
      }
    }
    expect(await snapshotStores(stores, env)).toEqual(before);
  });

  it('names the field, however the variable that carried it is named or nested', async () => {
    const { activityId, prizeId } = live;
    const token = await tokenOfCaller('admin');
    const named = [
      ['mutation($i: UpdateLotteryInput!) { updateLotteryActivity(activityId: "x", input: $i) { __typename } }', { i: { prizes: [{ prizeId }, { prizeId: 'a\u0000' }] } }],
      ['mutation($p: ID!) { updateLotteryActivity(activityId: "x", input: { prizes: [{ prizeId: "p" }, { prizeId: $p }] }) { __typename } }', { p: 'b\uDC00' }],
      ['mutation { updateLotteryActivity(activityId: "x", input: { prizes: [{ prizeId: "p" }, { prizeId: "a\\u0000" }] }) { __typename } }', {}],
    ] as const;
    for (const server of [fastLane, yogaOnly]) {
      for (const [query, variables] of named) expectRefused(await gql(server.url, query, variables, token), query, 'input.prizes[1].prizeId');
      // A variable no argument takes has no field: it is named as sent.
      const unused = await gql(server.url, 'mutation($id: ID!) { closeRedPacket(packetId: $id) { __typename } }', { id: activityId, extra: { note: 'c\u0007' } }, token);
      expectRefused(unused, 'an unused variable', '$extra.note');
    }
  });

  it('in a query id (POST on both lanes, and GET): never an internal error, only BAD_USER_INPUT', async () => {
    const queries = schema.getQueryType()!.getFields();
    for (const field of Object.values(queries)) {
      const idArgs = field.args.filter((arg) => isNonNullType(arg.type) && ['String', 'ID'].includes(getNamedType(arg.type).name));
      for (const arg of idArgs) {
        for (const [poisonName, poison] of Object.entries(POISONS)) {
          const { viaVariables, inline } = documents('query', field, { [arg.name]: poison });
          for (const server of [fastLane, yogaOnly]) {
            expectRefused(await gql(server.url, viaVariables, { [arg.name]: poison }, await tokenOfCaller('admin')), `${field.name}(${arg.name}) ${poisonName}`);
            expectRefused(await gql(server.url, inline, {}, await tokenOfCaller('admin')), `${field.name}(${arg.name}) ${poisonName} inline`);
          }
          const search = new URLSearchParams({ query: viaVariables, variables: JSON.stringify({ [arg.name]: poison }) });
          const viaGet = await fetch(`${fastLane.url}?${search}`, {
            // A GET must name itself to Yoga's CSRF prevention, as browsers' GraphQL clients do.
            headers: { authorization: `Bearer ${await tokenOfCaller('admin')}`, accept: 'application/json', 'x-graphql-yoga-csrf': '1' },
          });
          expectRefused({ status: viaGet.status, body: (await viaGet.json()) as GraphqlResponse<unknown>['body'] }, `${field.name}(${arg.name}) ${poisonName} via GET`);
        }
      }
    }
  });

  it('in a subscription argument, over graphql-ws and SSE', async () => {
    const cases = [
      [RedPacketUpdatedDocument, { packetId: `${live.packetId}\u0000` }],
      [TeamStatusDocument, { teamId: `${live.teamId}\uD800` }],
      [LotteryWinnersDocument, { activityId: `\u0007${live.activityId}` }],
    ] as const;
    for (const [document, variables] of cases) {
      for (const subscribe of [subscribeWs, subscribeSse]) {
        const subscription = subscribe(fastLane.url, document as never, variables as never, await tokenOfCaller('admin'));
        try {
          const [first] = await subscription.until((events) => events.length > 0);
          expect(
            first!.errors?.map((error) => (error as { extensions?: { code?: string } }).extensions?.code),
            JSON.stringify(first),
          ).toEqual(['BAD_USER_INPUT']);
        } finally {
          subscription.close();
        }
      }
    }
  });

  it('refuses each bidi control, the zero-width space, the word joiner and the BOM in text, on both lanes', async () => {
    const createGoods = schema.getMutationType()!.getFields().createGoods!;
    const { args } = validMutations().createGoods!;
    const before = await snapshotStores(stores, env);
    for (const character of INVISIBLES) {
      const name = `U+${character.charCodeAt(0).toString(16).toUpperCase()}`;
      const bad = poisoned(args, '', '.input.title', `Cup${character}`) as Record<string, unknown>;
      const { viaVariables, inline } = documents('mutation', createGoods, bad);
      expectRefused(await gql(fastLane.url, viaVariables, bad, await tokenOfCaller('admin')), `${name} via variables`);
      expectRefused(await gql(yogaOnly.url, inline, {}, await tokenOfCaller('admin')), `${name} inline`);
    }
    expect(await snapshotStores(stores, env)).toEqual(before);
  });

  it('refuses a title or reason of only joiners and spaces in every campaign (INVISIBLE_TEXT), and changes nothing', async () => {
    const mutations = schema.getMutationType()!.getFields();
    const calls = validMutations();
    const blanks: [mutation: string, path: string, issuePath: (string | number)[]][] = [
      ['createGoods', '.input.title', ['input', 'title']],
      ['updateGoods', '.input.title', ['input', 'title']],
      ['createGroupBuyActivity', '.input.title', ['input', 'title']],
      ['updateGroupBuyActivity', '.input.title', ['input', 'title']],
      ['createLotteryActivity', '.input.title', ['input', 'title']],
      ['createLotteryActivity', '.input.prizes[].title', ['input', 'prizes', 0, 'title']],
      ['awardPoints', '.reason', ['reason']],
      ['creditWallet', '.reason', ['reason']],
    ];
    const before = await snapshotStores(stores, env);
    for (const [name, path, issuePath] of blanks) {
      const { caller, args } = calls[name]!;
      const bad = poisoned(args, '', path, '\u200D \u200C\u200D') as Record<string, unknown>;
      const response = await gql(fastLane.url, documents('mutation', mutations[name]!, bad).viaVariables, bad, await tokenOfCaller(caller));
      expectRefused(response, `${name} ${path}`);
      expect(response.body.errors?.[0]?.extensions?.issues, `${name} ${path}`).toEqual([expect.objectContaining({ code: 'INVISIBLE_TEXT', path: issuePath })]);
    }
    expect(await snapshotStores(stores, env)).toEqual(before);
  });

  it('trims a group-buy title, as every other title is', async () => {
    const mutations = schema.getMutationType()!.getFields();
    const titleOf = async (id: string) => (await stores.sql.query<{ title: string }>('SELECT title FROM group_buy_activity WHERE id = $1', [id])).rows[0]?.title;
    const create = validMutations().createGroupBuyActivity!.args;
    const created = { input: { ...(create.input as object), id: 'chars-trimmed', title: '  Tea \n', requestId: 'gb-trimmed' } };
    expect(errorCodes(await gql(fastLane.url, documents('mutation', mutations.createGroupBuyActivity!, created).viaVariables, created, await tokenOfCaller('admin')))).toEqual([]);
    expect(await titleOf('chars-trimmed')).toBe('Tea');
    const updated = { activityId: 'chars-trimmed', input: { title: '\tTea for two  ' } };
    expect(errorCodes(await gql(fastLane.url, documents('mutation', mutations.updateGroupBuyActivity!, updated).viaVariables, updated, await tokenOfCaller('admin')))).toEqual([]);
    expect(await titleOf('chars-trimmed')).toBe('Tea for two');
  });

  it('accepts tabs, line breaks, joiners and every other character in text', async () => {
    const greeting = 'line one\r\nline two\tand 红包 🧧,\u2028"quoted" \\ end 👩\u200D💻 می\u200Cخواهم';
    const createRedPacket = await redPacketsAt(fastLane.url).create(userOf('sender'), { totalAmount: 100, count: 1, greeting });
    expect(createRedPacket).toMatchObject({ remainingCount: 1 });
    const { rows } = await stores.sql.query<{ greeting: string }>('SELECT greeting FROM red_packet WHERE id = $1', [createRedPacket.id]);
    expect(rows[0]!.greeting).toBe(greeting);
  });
});
