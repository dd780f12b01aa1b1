import { randomUUID } from 'node:crypto';
import type { Campaign } from '../../infra/campaign/campaign.ts';
import { ServiceUnavailableError } from '../errors.ts';
import type { RandomSource } from '../random.ts';
import { timedActivitiesToSchedule } from './persistence.ts';
import type { LotteryDeps } from './service.ts';
import { type LotterySettings, RELEASE_RANDOM_RANGE } from './settings.ts';
import type { LotterySnapshot, LotteryStore, ScheduleReply } from './store.ts';
import { ONE_HOUR_MS, localHourOfDay, localHourStart } from './timezone.ts';

/**
 * The scheduler fills every hour that starts within two of its runs from now (at most an
 * hour): its releases are placed before it begins, and an operator's new quota still
 * reaches every hour more than that away.
 */
const lookAheadMs = (scheduleIntervalMs: number) => Math.min(2 * scheduleIntervalMs, ONE_HOUR_MS);

/** The first hour the scheduler fills: the local hour that holds the start. Each later one begins an hour after the one before. */
const firstHourStart = (settings: LotterySettings) => localHourStart(settings.utcOffsets, settings.startsAtMs);

/**
 * When the scheduler's hour that holds `atMs` ends, so that the hour of a release can be
 * told without its instant. Where the offset moves by half an hour (Australia/Lord_Howe),
 * these hours keep the start's alignment, which localHourStart of a later instant would not.
 */
export function scheduledHourEnd(settings: LotterySettings, atMs: number): number {
  const first = firstHourStart(settings);
  return first + (Math.floor((atMs - first) / ONE_HOUR_MS) + 1) * ONE_HOUR_MS;
}

/** What a schedule that clashed with PostgreSQL comes to: the hour was scheduled elsewhere. */
const SCHEDULED_ELSEWHERE = { kind: 'already' } as const;

/** What an hour still ahead of a paused activity comes to: not scheduled yet. */
const WAITING_FOR_RESUME = { kind: 'paused' } as const;

/**
 * TIMED activities: releases each hour's quota of every scheduled prize at random
 * instants of the hour, once per hour however many instances run the schedule.
 */
export class LotteryScheduler {
  constructor(
    private readonly deps: LotteryDeps,
    private readonly activities: Campaign<string, LotterySnapshot>,
    private readonly store: LotteryStore,
    private readonly random: RandomSource,
  ) {}

  /**
   * Schedules every hour of every running activity that starts within the look-ahead
   * and is not scheduled yet, past hours included (catch-up after downtime). Returns
   * how many prizes it released.
   */
  async scheduleDue(): Promise<number> {
    const nowMs = await this.deps.clock.nowMs();
    let released = 0;
    for (const activityId of await timedActivitiesToSchedule(this.deps.prisma, nowMs, lookAheadMs(this.deps.scheduleIntervalMs))) {
      released += await this.scheduleActivity(activityId, nowMs);
    }
    return released;
  }

  /** Schedules the activity's hours up to the look-ahead that are not scheduled yet. */
  async scheduleActivity(activityId: string, nowMs: number): Promise<number> {
    const settings = await this.activities.read(activityId, () => this.store.readSettings(activityId));
    if (settings?.strategy !== 'TIMED') return 0;
    const scheduled = await this.store.scheduledHours(activityId);
    const until = Math.min(nowMs + lookAheadMs(this.deps.scheduleIntervalMs), settings.endsAtMs);
    let released = 0;
    for (let hour = firstHourStart(settings); hour < until; hour += ONE_HOUR_MS) {
      if (!scheduled.has(hour)) released += await this.scheduleHour(activityId, hour, nowMs);
    }
    return released;
  }

  private async scheduleHour(activityId: string, hourStartMs: number, nowMs: number): Promise<number> {
    const reply = await this.activities.journaled(activityId, {
      call: () => this.store.overCurrentSettings(activityId, (settings) => this.scheduleOver(settings, activityId, hourStartMs, nowMs)),
      entryOf: (reply) => (reply.kind === 'scheduled' ? reply.entry : null),
      // PostgreSQL holds another schedule of the hour (Redis lost data meanwhile): the
      // rebuilt keys will show it scheduled, so trying again would release nothing.
      onConflict: async () => SCHEDULED_ELSEWHERE,
      unavailable: () => new ServiceUnavailableError('the lottery is being rebuilt; try again'),
    });
    return reply?.kind === 'scheduled' ? reply.released : 0;
  }

  /**
   * The hour's releases drawn for the quotas of these settings, which the script checks are
   * still current. Paused: an hour that has begun is scheduled empty (the script releases
   * nothing while paused); one still ahead waits, as a resume before it starts gives it its quota.
   */
  private async scheduleOver(settings: LotterySettings, activityId: string, hourStartMs: number, nowMs: number): Promise<ScheduleReply | typeof WAITING_FOR_RESUME> {
    if (settings.paused && hourStartMs > nowMs) return WAITING_FOR_RESUME;
    const localHour = localHourOfDay(settings.utcOffsets, hourStartMs);
    const randoms = settings.prizes.flatMap((prize) => Array.from({ length: prize.hourlyQuota[localHour] ?? 0 }, () => this.random.int(0, RELEASE_RANDOM_RANGE)));
    return this.store.scheduleHour(activityId, randomUUID(), hourStartMs, localHour, settings.version, randoms);
  }
}
