import { afterAll, beforeAll } from 'vitest';
import { CreateLotteryDocument, type CreateLotteryInput, type CreateLotteryMutation, DrawLotteryDocument, type DrawLotteryMutation } from '../gql/generated.ts';
import { gqlData, tokenFor } from './client.ts';
import { type TestEnv, testEnv } from './env.ts';
import { type ServerProcess, startServerProcess } from './server.ts';
import { type Stores, openStores } from './stores.ts';

export interface LotteryServer {
  env: TestEnv;
  server: ServerProcess;
  stores: Stores;
  /** An operator's token. */
  admin: string;
  create(input: CreateLotteryInput): Promise<CreateLotteryMutation['createLotteryActivity']>;
  draw(activityId: string, user: string, requestId?: string): Promise<DrawLotteryMutation['drawLottery']>;
}

/**
 * One server for the test file (its own schema and key prefix), direct connections to
 * its stores, and an operator; started before the file's tests, stopped after.
 */
export function lotteryServer(name: string, overrides: Record<string, string> = {}): LotteryServer {
  const env = testEnv(name, overrides);
  const context = { env } as LotteryServer;
  beforeAll(async () => {
    context.server = await startServerProcess(env.vars);
    context.stores = openStores(env);
    context.admin = await tokenFor(`${name}-op`, { admin: true });
  });
  afterAll(async () => {
    await context.server?.stop();
    await context.stores?.cleanup();
  });
  context.create = async (input) => (await gqlData(context.server.url, CreateLotteryDocument, { input }, context.admin)).createLotteryActivity;
  context.draw = async (activityId, user, requestId) =>
    (await gqlData(context.server.url, DrawLotteryDocument, { activityId, requestId }, await tokenFor(user))).drawLottery;
  return context;
}

/** startsAt a minute ago, endsAt in an hour. */
export function runningWindow(): { startsAt: string; endsAt: string } {
  const now = Date.now();
  return { startsAt: new Date(now - 60_000).toISOString(), endsAt: new Date(now + 3_600_000).toISOString() };
}
