import { expect } from 'vitest';
import { GrabRedPacketDocument, type GrabRedPacketMutation } from '../gql/generated.ts';
import type { GraphqlResponse } from './client.ts';
import { waitFor } from './poll.ts';
import { expectRedPacketInvariants } from './redPacketInvariants.ts';
import { type RedPacketsClient, redPacketsAt } from './redPackets.ts';
import type { Stores } from './stores.ts';

export type Grab = GrabRedPacketMutation['grabRedPacket'];

/** One request of a storm that a store outage hits: its answer, its error codes, or no answer at all. */
export interface Outcome<R = Grab> {
  user: string;
  result?: R;
  codes?: unknown[];
  retryAfterMs?: unknown[];
  status?: number;
  failed?: unknown;
  ms: number;
  /** When the answer came (Date.now()). */
  at: number;
}

/** Sends one request as `user` and tells what became of it: the result of `field`, its errors, or no answer. */
export async function attemptOnce<T, K extends keyof T>(user: string, field: K, send: () => Promise<GraphqlResponse<T>>): Promise<Outcome<T[K]>> {
  const started = Date.now();
  try {
    const { status, body } = await send();
    const at = Date.now();
    if (body.errors?.length || !body.data) {
      return {
        user,
        status,
        ms: at - started,
        at,
        codes: (body.errors ?? []).map((error) => error.extensions?.code),
        retryAfterMs: (body.errors ?? []).map((error) => error.extensions?.retryAfterMs),
      };
    }
    return { user, status, ms: at - started, at, result: body.data[field] };
  } catch (error) {
    return { user, failed: error, ms: Date.now() - started, at: Date.now() };
  }
}

export function grabOnce(redPackets: RedPacketsClient, packetId: string, user: string): Promise<Outcome> {
  return attemptOnce(user, 'grabRedPacket', () => redPackets.raw(GrabRedPacketDocument, { packetId }, user));
}

/**
 * A storm, `CONCURRENCY` requests in flight at all times: each user once, then users
 * again at random until the outage is over, so it lands on requests at every stage.
 * After `outageAfter` acknowledged answers `outage()` runs; the storm goes on for a
 * second after it returns.
 */
export async function stormWithOutageOf<R>(
  users: string[],
  ask: (user: string) => Promise<Outcome<R>>,
  acknowledged: (result: R) => boolean,
  outageAfter: number,
  outage: () => Promise<void>,
): Promise<Outcome<R>[]> {
  const CONCURRENCY = 150;
  const outcomes: Outcome<R>[] = [];
  let next = 0;
  let acknowledgedCount = 0;
  let started: Promise<void> | undefined;
  let over = false;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < users.length || !over) {
        const user = next < users.length ? users[next++]! : users[Math.floor(Math.random() * users.length)]!;
        const outcome = await ask(user);
        outcomes.push(outcome);
        if (outcome.result !== undefined && acknowledged(outcome.result) && ++acknowledgedCount >= outageAfter) {
          started ??= outage().finally(() => setTimeout(() => (over = true), 1000));
        }
      }
    }),
  );
  await started;
  return outcomes;
}

/** A storm of grabs (repeated ones answered AlreadyGrabbed) that `outage()` hits after `outageAfter` shares. */
export function stormWithOutage(url: string, packetId: string, users: string[], outageAfter: number, outage: () => Promise<void>): Promise<Outcome[]> {
  const redPackets = redPacketsAt(url);
  return stormWithOutageOf(
    users,
    (user) => grabOnce(redPackets, packetId, user),
    (result) => result.__typename === 'GrabbedShare',
    outageAfter,
    outage,
  );
}

/** Every answer is a typed result or SERVICE_UNAVAILABLE with a retry hint; never a dropped connection or an unexpected error. */
export function expectSuccessOrUnavailable<R>(outcomes: Outcome<R>[]): Outcome<R>[] {
  const tally = new Map<string, number>();
  for (const { result, codes, failed } of outcomes) {
    const kind = result ? 'result' : failed ? 'no answer' : String(codes);
    tally.set(kind, (tally.get(kind) ?? 0) + 1);
  }
  console.info(`answers: ${JSON.stringify(Object.fromEntries(tally))}`);
  const unavailable: Outcome<R>[] = [];
  for (const outcome of outcomes) {
    expect(outcome.failed, `${outcome.user}: ${String(outcome.failed)}`).toBeUndefined();
    expect(outcome.status, outcome.user).toBe(200);
    if (outcome.result !== undefined) continue;
    expect(outcome.codes, outcome.user).toEqual(['SERVICE_UNAVAILABLE']);
    expect(outcome.retryAfterMs![0], outcome.user).toBeGreaterThan(0);
    unavailable.push(outcome);
  }
  return unavailable;
}

/** Each user asks until answered (not SERVICE_UNAVAILABLE); the service must recover without a restart. Returns the answers. */
export async function answerEach<R>(users: string[], ask: (user: string) => Promise<Outcome<R>>): Promise<Map<string, R>> {
  const answers = new Map<string, R>();
  await waitFor(
    'every user answered after the outage',
    async () => {
      const pending = users.filter((user) => !answers.has(user));
      const outcomes = await Promise.all(pending.map(ask));
      expectSuccessOrUnavailable(outcomes);
      for (const outcome of outcomes) if (outcome.result !== undefined) answers.set(outcome.user, outcome.result);
      return answers.size === users.length;
    },
    { timeoutMs: 60_000, intervalMs: 500 },
  );
  return answers;
}

/** Each user grabs until answered. */
export function grabUntilAnswered(url: string, packetId: string, users: string[]): Promise<Map<string, Grab>> {
  const redPackets = redPacketsAt(url);
  return answerEach(users, (user) => grabOnce(redPackets, packetId, user));
}

/** Acknowledged grants are durable, a retry gives each user their share back, and the books balance in both stores. */
export async function expectGrantsKept(stores: Stores, packetId: string, outcomes: Outcome[], answers: Map<string, Grab>) {
  const { rows } = await stores.sql.query<{ user_id: string; amount: number }>('SELECT user_id, amount FROM red_packet_grab WHERE packet_id = $1', [packetId]);
  const durable = new Map(rows.map((row) => [row.user_id, row.amount]));
  for (const { user, result } of outcomes) {
    if (result?.__typename !== 'GrabbedShare') continue;
    expect(durable.get(user), `acknowledged grant of ${user}`).toBe(result.amount);
    const again = answers.get(user);
    if (again) expect(again.__typename === 'AlreadyGrabbed' && again.share.amount, user).toBe(result.amount);
  }
  for (const [user, answer] of answers) expect(['GrabbedShare', 'AlreadyGrabbed'], user).toContain(answer.__typename);
  await expectRedPacketInvariants(stores, packetId);
}
