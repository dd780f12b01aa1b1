import { recentWins } from './persistence.ts';
import type { LotteryDeps } from './service.ts';
import { LOTTERY_LIMITS, type LotterySettings } from './settings.ts';
import { type PrizeSnapshot, lotteryKeys } from './store.ts';
import { type LotteryWinView, prizeView } from './views.ts';

/** How many of the last wins a winners stream checks for ones it missed when the activity ends. */
const LATE_WINS_MAX = 1000;

/** The topic (under the key prefix) on which the ticker announces an activity's wins, a turn's wins in one message. */
export const winnersTopic = (activityId: string) => `lottery:${activityId}:winners`;
/** Announces a change of an activity's settings, whose end may have moved. */
const settingsTopic = (activityId: string) => `lottery:${activityId}:settings`;

/** The winners ticker: every win announced once committed, and streams of them that end with the activity. */
export class LotteryWinners {
  /** activityId -> the last wins being read for the streams ending now: a ticker's viewers all end at once. */
  private readonly lastWinsLoads = new Map<string, Promise<LotteryWinView[]>>();

  constructor(
    private readonly deps: Pick<LotteryDeps, 'prisma' | 'journal' | 'events' | 'clock'>,
    private readonly settings: (activityId: string) => Promise<LotterySettings | null>,
  ) {}

  announce(win: LotteryWinView): void {
    this.deps.events.publishEvent(winnersTopic(win.activityId), win);
  }

  /** The activity's settings changed: its streams, on every instance, check their end again. */
  settingsChanged(activityId: string): void {
    this.deps.events.publishEvent(settingsTopic(activityId), activityId);
  }

  /**
   * The latest `recent` wins, then every new win as it is committed, until the activity
   * has ENDED: then the wins of draws that were still committing, and completion. An
   * operator may move endsAt: the end is checked again when it comes, and at each change.
   */
  stream(activityId: string, recent: number): AsyncIterableIterator<LotteryWinView> {
    let startedAtMs = Infinity;
    const loadRecent = async () => {
      startedAtMs = await this.deps.clock.nowMs();
      return this.latest(activityId, Math.min(recent, LOTTERY_LIMITS.maxRecentWins));
    };
    return this.deps.events.recentThenEvents(winnersTopic(activityId), loadRecent, (win) => win.drawId, {
      msUntilEnd: async () => {
        const settings = await this.settings(activityId);
        return settings ? settings.endsAtMs - (await this.deps.clock.nowMs()) : 0;
      },
      lastEvents: async () => (await this.lastWins(activityId)).filter((win) => win.drawnAt.getTime() >= startedAtMs),
      movedTopic: settingsTopic(activityId),
    });
  }

  private async latest(activityId: string, limit: number): Promise<LotteryWinView[]> {
    return (await recentWins(this.deps.prisma, activityId, limit)).map((row) => ({
      outcome: 'win',
      drawId: row.drawId,
      activityId,
      userId: row.userId,
      drawnAt: row.drawnAt,
      settingsVersion: row.settingsVersion,
      prize: prizeView(activityId, row.prizeSnapshot as PrizeSnapshot),
    }));
  }

  /**
   * No draw starts after the end, but draws made before it may still be committing, and
   * their wins would be published after the streams completed: commit the journal, then
   * read the last wins.
   */
  private lastWins(activityId: string): Promise<LotteryWinView[]> {
    let load = this.lastWinsLoads.get(activityId);
    if (!load) {
      load = this.deps.journal
        .commitStream(lotteryKeys(activityId).journal)
        .then(() => this.latest(activityId, LATE_WINS_MAX))
        .finally(() => this.lastWinsLoads.delete(activityId));
      this.lastWinsLoads.set(activityId, load);
    }
    return load;
  }
}
