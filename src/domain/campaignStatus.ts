export const CAMPAIGN_STATUSES = ['UPCOMING', 'ACTIVE', 'PAUSED', 'ENDED'] as const;

/** Where a campaign with a window and a pause switch stands at a given instant: the lottery's and the group-buy's. */
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];

/** An end reached wins over a pause: an ended campaign cannot be resumed. */
export function campaignStatus(window: { startsAtMs: number; endsAtMs: number; paused: boolean }, nowMs: number): CampaignStatus {
  if (nowMs >= window.endsAtMs) return 'ENDED';
  if (window.paused) return 'PAUSED';
  return nowMs < window.startsAtMs ? 'UPCOMING' : 'ACTIVE';
}
