import { useEffect, useState } from 'preact/hooks';
import { Loading, useReloadWhenOnline } from './loading.tsx';

/** One campaign of a list: a link to its page, and a line on its terms. */
export interface CampaignLink {
  id: string;
  href: string;
  title: string;
  terms: string;
}

/**
 * The campaigns of one kind on now, each leading to its own page: loaded on arrival, again
 * when the device is back online, or on 重试.
 */
export function CampaignList({ heading, empty, testId, load }: { heading: string; empty: string; testId: string; load: () => Promise<CampaignLink[]> }) {
  const [campaigns, setCampaigns] = useState<CampaignLink[] | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const reload = () =>
    load().then(
      (links) => {
        setProblem(null);
        setCampaigns(links);
      },
      (error: Error) => setProblem(error.message),
    );
  useEffect(() => void reload(), []);
  useReloadWhenOnline(reload);
  if (!campaigns) return <Loading problem={problem} retry={reload} />;
  return (
    <div class="card">
      <h2>{heading}</h2>
      {campaigns.length === 0 && <p class="muted">{empty}</p>}
      <ul class="plain" data-testid={testId}>
        {campaigns.map((campaign) => (
          <li key={campaign.id}>
            <a href={campaign.href}>{campaign.title}</a>
            <span class="muted">{campaign.terms}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}
