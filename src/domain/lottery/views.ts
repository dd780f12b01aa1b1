import type { LotterySettings, LotteryStatus } from './settings.ts';
import type { PrizeSnapshot } from './store.ts';

export interface PrizeView extends PrizeSnapshot {
  activityId: string;
  /** [] when the prize is not scheduled, or when the view is a win's snapshot. */
  hourlyQuota: number[];
  /** Filled in when the activity is read; otherwise the resolver reads it. */
  remainingStock?: number;
}

export interface LotteryActivityView {
  id: string;
  settings: LotterySettings;
  status: LotteryStatus;
  /** The lottery clock's time (Redis TIME, plus the test clock) that status was judged at. */
  serverTime: Date;
  prizes: PrizeView[];
}

interface DrawView {
  drawId: string;
  activityId: string;
  userId: string;
  drawnAt: Date;
  settingsVersion: number;
}

export interface LotteryWinView extends DrawView {
  outcome: 'win';
  /** The prize as it was when won. */
  prize: PrizeView;
}

export interface LotteryLoseView extends DrawView {
  outcome: 'lose';
}

export type DrawOutcome = LotteryWinView | LotteryLoseView;

/** A winning draw as operators list it (lotteryWins): who won what, when, for which request. */
export interface WinRecordView {
  drawId: string;
  activityId: string;
  userId: string;
  /** The prize as it was when won. */
  prize: PrizeView;
  drawnAt: Date;
  /** The requestId the draw was made with; null for a draw made without one. */
  requestId: string | null;
  settingsVersion: number;
  costPoints: number;
}

export function prizeView(activityId: string, prize: PrizeSnapshot & { hourlyQuota?: number[] }): PrizeView {
  return { ...prize, activityId, hourlyQuota: prize.hourlyQuota ?? [] };
}

/** A draw as its user sees it: won (with the prize as it was) or lost. */
export function drawOutcome(activityId: string, userId: string, draw: { drawId: string; prize: PrizeSnapshot | null; drawnAtMs: number; settingsVersion: number }): DrawOutcome {
  const base = { drawId: draw.drawId, activityId, userId, drawnAt: new Date(draw.drawnAtMs), settingsVersion: draw.settingsVersion };
  return draw.prize ? { ...base, outcome: 'win', prize: prizeView(activityId, draw.prize) } : { ...base, outcome: 'lose' };
}
