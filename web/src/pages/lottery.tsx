import { useEffect, useState } from 'preact/hooks';
import { ActionButton } from '../actionButton.tsx';
import { request, subscribe } from '../api.ts';
import { CampaignList } from '../campaignList.tsx';
import type { WebLotteryQuery } from '../gql/graphql.ts';
import { graphql } from '../gql/index.ts';
import { Status } from '../live.tsx';
import { Loading, unlessNetwork, useReloadWhenOnline } from '../loading.tsx';
import { useOncePerIntent } from '../oncePerIntent.ts';
import { useOneAtATime } from '../oneAtATime.ts';
import { handle } from '../users.ts';

const LotteryQuery = graphql(`
  query WebLottery($id: ID!) {
    lotteryActivity(id: $id) {
      id
      title
      status
      noPrizeWeight
      dailyDrawLimit
      prizes {
        id
        title
      }
    }
    # My last draw here, to show its result after a reload (mid-spin, say): the server
    # committed it when drawLottery answered, whatever the wheel was doing.
    me {
      draws(activityId: $id, first: 1) {
        nodes {
          id
          won
          prize {
            id
            title
          }
        }
      }
    }
  }
`);

const Draw = graphql(`
  mutation WebDrawLottery($activityId: ID!, $requestId: String) {
    drawLottery(activityId: $activityId, requestId: $requestId) {
      __typename
      ... on LotteryWin {
        prize {
          id
          title
        }
      }
      ... on Problem {
        code
        message
      }
    }
  }
`);

const Winners = graphql(`
  subscription WebLotteryWinners($activityId: ID!) {
    lotteryWinners(activityId: $activityId, recent: 5) {
      drawId
      userId
      prize {
        title
      }
    }
  }
`);

const ActivitiesQuery = graphql(`
  query WebLotteryActivities {
    lotteryActivities(status: ACTIVE, first: 20) {
      nodes {
        id
        title
        drawCostPoints
      }
    }
  }
`);

/** The lotteries on now, newest first: each leads to its wheel. */
export function LotteryActivities() {
  const load = () =>
    request(ActivitiesQuery, {}).then(({ lotteryActivities }) =>
      lotteryActivities.nodes.map((activity) => ({
        id: activity.id,
        href: `#/lottery/${activity.id}`,
        title: activity.title,
        terms: activity.drawCostPoints > 0 ? `${activity.drawCostPoints} 积分/次` : '免费',
      })),
    );
  return <CampaignList heading="抽奖活动" empty="暂无进行中的抽奖" testId="lottery-activities" load={load} />;
}

type Activity = NonNullable<WebLotteryQuery['lotteryActivity']>;
type DrawRecord = WebLotteryQuery['me']['draws']['nodes'][number];
/** The wheel's sectors: every prize, and "no prize" when a draw can lose. */
type Sector = { id: string | null; title: string };

const SPIN_MS = 3000;
/** Whether the user asked for less motion: the wheel then rests on the result at once, with no five turns over 3 s. */
const reducedMotion = () => matchMedia('(prefers-reduced-motion: reduce)').matches;
const COLOURS = ['#ffd8a8', '#ffc9c9', '#d0ebff', '#d3f9d8', '#fff3bf', '#e5dbff'];

function sectorsOf(activity: Activity): Sector[] {
  const prizes: Sector[] = activity.prizes.map((prize) => ({ id: prize.id, title: prize.title }));
  return activity.noPrizeWeight > 0 ? [...prizes, { id: null, title: '谢谢参与' }] : prizes;
}

/** Where the wheel stops for a result: the sector's index (a prize no longer on the wheel: the first) and the angle that puts its middle under the pointer at the top. */
function landing(sectors: Sector[], prizeId: string | null): { index: number; angle: number } {
  const index = Math.max(
    0,
    sectors.findIndex((sector) => sector.id === prizeId),
  );
  return { index, angle: 360 - (index + 0.5) * (360 / sectors.length) };
}

/** A wheel that spins to the result the server committed; the wheel decides nothing. */
export function Lottery({ activityId }: { activityId: string }) {
  const [activity, setActivity] = useState<Activity | null>(null);
  const [turn, setTurn] = useState(0);
  const [landed, setLanded] = useState<Sector | null>(null);
  // My last draw here before this page was (re)loaded; the wheel rests on it, not spun.
  const [lastDraw, setLastDraw] = useState<DrawRecord | null>(null);
  const [animated, setAnimated] = useState(false);
  const [message, setMessage] = useState<string | null>(null);
  const [loadProblem, setLoadProblem] = useState<string | null>(null);
  const [winners, setWinners] = useState<{ drawId: string; userId: string; prize: string }[]>([]);
  // One draw at a time, its spin included: the wheel shows one result.
  const [drawing, oneAtATime] = useOneAtATime();
  const oncePerIntent = useOncePerIntent();

  const load = () =>
    request(LotteryQuery, { id: activityId }).then(
      ({ lotteryActivity, me }) => {
        setLoadProblem(null);
        setMessage(unlessNetwork);
        if (!lotteryActivity) return setMessage('活动不存在');
        const last = me.draws.nodes[0] ?? null;
        if (last) {
          setLastDraw(last);
          setTurn(landing(sectorsOf(lotteryActivity), last.prize?.id ?? null).angle);
        }
        setActivity(lotteryActivity);
      },
      (error: Error) => setLoadProblem(error.message),
    );
  // Loaded, a reload would turn the wheel back to the last draw: the page only forgets the network failure.
  useReloadWhenOnline(() => (activity ? setMessage(unlessNetwork) : load()));
  useEffect(() => {
    void load();
    return subscribe(
      Winners,
      { activityId },
      // A reconnect subscribes again, and the stream starts again with the recent wins: each is shown once.
      ({ lotteryWinners: win }) =>
        setWinners((list) => (list.some((shown) => shown.drawId === win.drawId) ? list : [{ drawId: win.drawId, userId: win.userId, prize: win.prize.title }, ...list].slice(0, 10))),
      (error) => setMessage(error.message),
    );
  }, [activityId]);

  const draw = () =>
    oneAtATime(async () => {
      if (!activity) return;
      setMessage(null);
      setLanded(null);
      setLastDraw(null);
      const spin = !reducedMotion();
      setAnimated(spin);
      try {
        // A tap again after a lost answer is the same draw: the server draws (and charges) it once.
        const { drawLottery: result } = await oncePerIntent(activityId, (requestId) => request(Draw, { activityId, requestId }));
        if (result.__typename !== 'LotteryWin' && result.__typename !== 'LotteryLose') {
          setMessage(result.message);
          return;
        }
        const sectors = sectorsOf(activity);
        const { index, angle } = landing(sectors, result.__typename === 'LotteryWin' ? result.prize.id : null);
        // Whole turns, then the sector's middle under the pointer at the top.
        setTurn((previous) => previous - (previous % 360) + (spin ? 5 * 360 : 0) + angle);
        if (spin) await new Promise((resolve) => setTimeout(resolve, SPIN_MS));
        setLanded(sectors[index]!);
      } catch (error) {
        setMessage((error as Error).message);
      }
    });

  if (!activity) return <Loading problem={loadProblem ?? message} retry={loadProblem ? load : undefined} />;
  const sectors = sectorsOf(activity);
  const slice = 360 / sectors.length;
  const gradient = sectors.map((_, i) => `${COLOURS[i % COLOURS.length]} ${i * slice}deg ${(i + 1) * slice}deg`).join(', ');
  return (
    <div class="card lottery">
      <h2>{activity.title}</h2>
      {activity.dailyDrawLimit > 0 && <p class="muted">每天最多抽 {activity.dailyDrawLimit} 次</p>}
      <div class="wheel-frame">
        <div class="pointer" />
        <div
          aria-hidden="true"
          class="wheel"
          data-testid="wheel"
          data-landed={landed ? (landed.id ?? 'none') : ''}
          style={{ background: `conic-gradient(${gradient})`, transform: `rotate(${turn}deg)`, transition: animated ? `transform ${SPIN_MS}ms cubic-bezier(0.2, 0.8, 0.2, 1)` : 'none' }}
        >
          {sectors.map((sector, i) => (
            <span key={sector.id ?? 'none'} style={{ transform: `rotate(${(i + 0.5) * slice}deg) translateY(-39.3cqw)` }}>
              {sector.title}
            </span>
          ))}
        </div>
      </div>
      <ActionButton onClick={draw} disabled={drawing || activity.status !== 'ACTIVE'} acting={drawing}>
        {activity.status === 'ACTIVE' ? '抽奖' : '活动未进行'}
      </ActionButton>
      <Status>{landed && <p data-testid="draw-result">{landed.id ? `恭喜你抽中 ${landed.title}` : '谢谢参与'}</p>}</Status>
      {lastDraw && <p data-testid="last-draw">上次抽奖：{lastDraw.won && lastDraw.prize ? `抽中 ${lastDraw.prize.title}` : '谢谢参与'}</p>}
      {message && (
        <p class="problem" role="alert" data-testid="draw-problem">
          {message}
        </p>
      )}
      {/* The wheel cuts a long title short: every prize, in full. */}
      <h3>奖品</h3>
      <ul class="plain" data-testid="prizes">
        {activity.prizes.map((prize) => (
          <li key={prize.id}>
            <span>{prize.title}</span>
          </li>
        ))}
      </ul>
      <h3>中奖名单</h3>
      <ul class="plain pairs" data-testid="winners">
        {winners.map((win) => (
          <li key={win.drawId}>
            <span>{handle(win.userId, '用户')}</span>
            <span>{win.prize}</span>
          </li>
        ))}
      </ul>
    </div>
  );
}
