import { useEffect, useState } from 'preact/hooks';
import { ActionButton } from '../actionButton.tsx';
import { request } from '../api.ts';
import { CampaignList } from '../campaignList.tsx';
import { yuan } from '../clock.ts';
import type { WebGroupBuyTeamsQuery } from '../gql/graphql.ts';
import { graphql } from '../gql/index.ts';
import { Loading, unlessNetwork, useReloadWhenOnline } from '../loading.tsx';
import { useOncePerIntent } from '../oncePerIntent.ts';
import { useOneAtATime } from '../oneAtATime.ts';
import { handle } from '../users.ts';

const ActivitiesQuery = graphql(`
  query WebGroupBuyActivities {
    groupBuyActivities(first: 20) {
      nodes {
        id
        title
        capacity
        priceCents
        groupPriceCents
      }
    }
  }
`);

const TeamsQuery = graphql(`
  query WebGroupBuyTeams($activityId: ID!) {
    groupBuyActivity(id: $activityId) {
      id
      title
      description
      capacity
      priceCents
      groupPriceCents
      lockSeconds
    }
    teams(activityId: $activityId, status: OPEN, limit: 50) {
      id
      capacity
      freeSeats
      leaderId
      members {
        userId
      }
    }
  }
`);

const OpenTeam = graphql(`
  mutation WebOpenTeam($activityId: ID!, $requestId: String!) {
    openTeam(input: { activityId: $activityId, requestId: $requestId }) {
      __typename
      ... on Team {
        id
      }
      ... on Problem {
        code
        message
      }
    }
  }
`);

/** The group-buys on now, newest first: each leads to its open teams. */
export function GroupBuyActivities() {
  const load = () =>
    request(ActivitiesQuery, {}).then(({ groupBuyActivities }) =>
      groupBuyActivities.nodes.map((activity) => ({
        id: activity.id,
        href: `#/groupbuy/${activity.id}`,
        title: activity.title,
        terms: `${activity.capacity} 人团 ¥${yuan(activity.groupPriceCents)}`,
      })),
    );
  return <CampaignList heading="拼团活动" empty="暂无拼团活动" testId="groupbuy-activities" load={load} />;
}

/** One group-buy's open teams, those with free seats first: open a team or join one. */
export function GroupBuyTeams({ activityId }: { activityId: string }) {
  const [data, setData] = useState<WebGroupBuyTeamsQuery | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [loadProblem, setLoadProblem] = useState<string | null>(null);
  const [busy, oneAtATime] = useOneAtATime();
  // A tap again after an answer was lost on the way gets the team the first tap opened.
  const oncePerIntent = useOncePerIntent();
  const load = () =>
    request(TeamsQuery, { activityId }).then(
      (answer) => {
        setLoadProblem(null);
        setProblem(unlessNetwork);
        setData(answer);
      },
      (error: Error) => setLoadProblem(error.message),
    );
  useEffect(() => void load(), [activityId]);
  useReloadWhenOnline(load);

  // A second tap while the first is on its way would open a second team.
  const open = () =>
    oneAtATime(async () => {
      setProblem(null);
      try {
        const { openTeam: result } = await oncePerIntent(activityId, (requestId) => request(OpenTeam, { activityId, requestId }));
        if (result.__typename === 'Team') location.hash = `#/team/${result.id}`;
        else if ('message' in result) setProblem(result.message);
      } catch (error) {
        setProblem((error as Error).message);
      }
    });

  const activity = data?.groupBuyActivity;
  if (!data || !activity) return <Loading problem={loadProblem ?? (data ? '活动不存在' : null)} retry={loadProblem ? load : undefined} />;
  return (
    <>
      <div class="card">
        <h2>{activity.title}</h2>
        {activity.description && <p class="muted">{activity.description}</p>}
        <p>
          {/* A screen reader does not say a strikethrough: the prices are named for it. */}
          <span class="visually-hidden">拼团价 </span>
          <span class="big">¥{yuan(activity.groupPriceCents)}</span>{' '}
          <s class="muted">
            <span class="visually-hidden">原价 </span>¥{yuan(activity.priceCents)}
          </s>{' '}
          · {activity.capacity} 人成团
        </p>
        <ActionButton onClick={open} disabled={busy} acting={busy}>
          我要开团
        </ActionButton>
        {problem && (
          <p class="problem" role="alert">
            {problem}
          </p>
        )}
      </div>
      <div class="card">
        <h3>正在拼团</h3>
        {data.teams.length === 0 && <p class="muted">还没有人开团</p>}
        <ul class="plain" data-testid="open-teams">
          {data.teams.map((team) => {
            const label = team.freeSeats > 0 ? `参团（${team.freeSeats} 个空位）` : '查看';
            return (
              <li key={team.id} data-testid="open-team">
                <span>
                  {team.members.length}/{team.capacity} 人
                </span>
                {/* Every row's link reads alike: its name says whose team it opens. */}
                <a class="pill" href={`#/team/${team.id}`} aria-label={`${label}：${handle(team.leaderId, '拼友')} 的团`}>
                  {label}
                </a>
              </li>
            );
          })}
        </ul>
      </div>
    </>
  );
}
