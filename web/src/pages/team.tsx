import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { ActionButton } from '../actionButton.tsx';
import { ApiError, NETWORK, request, serverOffsetMs, subscribe } from '../api.ts';
import { countdown, useServerNow, yuan } from '../clock.ts';
import type { WebTeamFieldsFragment } from '../gql/graphql.ts';
import { graphql } from '../gql/index.ts';
import { Status, useLiveDown } from '../live.tsx';
import { Loading } from '../loading.tsx';
import { useOneAtATime } from '../oneAtATime.ts';
import { ShareLink } from '../shareLink.tsx';
import { handle } from '../users.ts';

graphql(`
  fragment WebTeamFields on Team {
    id
    activityId
    status
    capacity
    freeSeats
    leaderId
    deadline
    nextUnlockAt
    serverTime
    version
    members {
      userId
      joinedAt
    }
    locks {
      userId
      expiresAt
    }
  }
`);

const TeamQuery = graphql(`
  query WebTeam($id: ID!) {
    me {
      userId
    }
    team(id: $id) {
      ...WebTeamFields
    }
  }
`);

// A Team names its activity by id only: a shared link shows what is being bought from this.
const TeamActivityQuery = graphql(`
  query WebTeamActivity($id: ID!) {
    groupBuyActivity(id: $id) {
      id
      title
      groupPriceCents
    }
  }
`);

const TeamStatus = graphql(`
  subscription WebTeamStatus($teamId: ID!) {
    teamStatus(teamId: $teamId) {
      ...WebTeamFields
    }
  }
`);

const LockSeat = graphql(`
  mutation WebLockTeamSeat($teamId: ID!) {
    lockTeamSeat(teamId: $teamId) {
      __typename
      ... on SeatLocked {
        lock {
          expiresAt
        }
        payment {
          paymentRef
          amountCents
          expiresAt
        }
      }
      ... on Problem {
        code
        message
      }
    }
  }
`);

const ReleaseSeat = graphql(`
  mutation WebReleaseTeamSeat($teamId: ID!) {
    releaseTeamSeat(teamId: $teamId) {
      id
    }
  }
`);

const SandboxPay = graphql(`
  mutation WebSandboxPay($paymentRef: String!) {
    sandboxPay(paymentRef: $paymentRef) {
      outcome
    }
  }
`);

/** The payment of my lock, due by expiresAt, a little before the lock (which ends at lockExpiresAt) frees the seat. */
type Payment = { paymentRef: string; amountCents: number; expiresAt: string; lockExpiresAt: string };

// The payment of my lock outlives a reload of the page (not the tab): the server answers it once.
const paymentKey = (teamId: string) => `campaign.seatPayment.${teamId}`;

function storedPayment(teamId: string): Payment | null {
  try {
    return JSON.parse(sessionStorage.getItem(paymentKey(teamId)) ?? 'null') as Payment | null;
  } catch {
    return null;
  }
}

function storePayment(teamId: string, payment: Payment | null): void {
  if (payment) sessionStorage.setItem(paymentKey(teamId), JSON.stringify(payment));
  else sessionStorage.removeItem(paymentKey(teamId));
}

const STATUS = { OPEN: '拼团中', COMPLETE: '拼团成功', FAILED: '拼团失败' } as const;

/** The team's state in a sentence: said again whenever it changes (a seat taken or freed, the team filled). */
function teamNews(team: WebTeamFieldsFragment): string {
  if (team.status === 'COMPLETE') return '拼团成功';
  if (team.status === 'FAILED') return '未能成团，已付的钱会退回';
  const taken = `${team.members.length}/${team.capacity} 人已入团，${team.locks.length} 人支付中`;
  return team.freeSeats === 0 ? `${taken}，暂无空位` : `${taken}，${team.freeSeats} 个空位`;
}

/** The warnings of my payment's countdown, the last one due first: said once each, not every tick. */
const PAY_WARNINGS = [
  { withinMs: 10_000, text: '支付将在 10 秒内截止，请尽快支付' },
  { withinMs: 60_000, text: '支付将在 1 分钟内截止，请尽快支付' },
];

/**
 * What a screen reader hears of the team's live changes, in a region that is always there
 * (visually hidden: the page shows all of it). The state as it was first shown is not said.
 */
function TeamNews({ team, payBy, now }: { team: WebTeamFieldsFragment; payBy: number | null; now: number }) {
  const news = teamNews(team);
  const warning = payBy !== null && payBy > now ? PAY_WARNINGS.find((stage) => payBy - now <= stage.withinMs)?.text : undefined;
  const [said, setSaid] = useState('');
  const heard = useRef({ news, warning });
  useEffect(() => {
    const changes = [news !== heard.current.news && news, warning !== heard.current.warning && warning].filter(Boolean);
    heard.current = { news, warning };
    if (changes.length > 0) setSaid(changes.join('；'));
  }, [news, warning]);
  return (
    <p class="visually-hidden" aria-live="polite" data-testid="team-news">
      {said}
    </p>
  );
}

/**
 * A team's seats, live: members, seats being paid for (each counting down to its lock's
 * expiry on the server's clock) and free seats. Lock one, pay for it by its payment's
 * deadline (a little before the seat frees), watch the team fill.
 */
export function TeamPage({ teamId }: { teamId: string }) {
  const [team, setTeam] = useState<WebTeamFieldsFragment | null>(null);
  const [me, setMe] = useState<string | null>(null);
  const [offsetMs, setOffsetMs] = useState(0);
  const [payment, setPayment] = useState<Payment | null>(() => storedPayment(teamId));
  const [activity, setActivity] = useState<{ title: string; groupPriceCents: number } | null>(null);
  const [message, setMessage] = useState<string | null>(null);
  // A request that never reached the server: shown until the connection is back or a request gets through.
  const [networkProblem, setNetworkProblem] = useState<string | null>(null);
  const [busy, oneAtATime, acting] = useOneAtATime();
  // Where focus goes when an action replaces its button: lock -> pay, pay -> the message, release -> lock.
  const payButton = useRef<HTMLButtonElement>(null);
  const lockButton = useRef<HTMLButtonElement>(null);
  const messageLine = useRef<HTMLParagraphElement>(null);
  const problemLine = useRef<HTMLParagraphElement>(null);
  // The pay button shows once the team's state has my lock, which may be pushed after the
  // lock's answer, when the action is over: a lock just taken gives it the focus as it appears.
  const focusPayWhenShown = useRef(false);
  const payButtonShown = useCallback((button: HTMLButtonElement | null) => {
    payButton.current = button;
    if (button && focusPayWhenShown.current) {
      focusPayWhenShown.current = false;
      button.focus();
    }
  }, []);
  // This team takes no more locks of mine: the button would only be refused again.
  const [lockLimitReached, setLockLimitReached] = useState(false);
  const liveDown = useLiveDown();

  const showError = (error: Error) => {
    if (error instanceof ApiError && error.code === NETWORK) setNetworkProblem(error.message);
    else setMessage(error.message);
  };

  // States may arrive out of order (the query's answer after a pushed change): keep the newest.
  const accept = (next: WebTeamFieldsFragment) => {
    setOffsetMs(serverOffsetMs(next.serverTime));
    setTeam((current) => (current && current.version > next.version ? current : next));
    setNetworkProblem(null);
  };

  const load = () =>
    request(TeamQuery, { id: teamId }).then((data) => {
      setMe(data.me.userId);
      if (data.team) accept(data.team);
      else setMessage('团不存在');
    }, showError);

  useEffect(() => {
    void load();
    return subscribe(TeamStatus, { teamId }, ({ teamStatus }) => accept(teamStatus), showError);
  }, [teamId]);

  // The connection is back: what failed for want of it is no longer the news, and a page
  // that never learnt who I am asks again.
  const wasDown = useRef(false);
  useEffect(() => {
    if (wasDown.current && !liveDown) {
      setNetworkProblem(null);
      if (me === null) void load();
    }
    wasDown.current = liveDown;
  }, [liveDown]);

  const activityId = team?.activityId;
  useEffect(() => {
    if (!activityId) return;
    request(TeamActivityQuery, { id: activityId }).then(
      ({ groupBuyActivity }) => setActivity(groupBuyActivity),
      () => undefined,
    );
  }, [activityId]);

  // A message answers an action under the team's status then ("支付成功，你已入团" while it
  // filled); once the team completes or fails, the status line says what holds now.
  const status = team?.status;
  const shownStatus = useRef(status);
  useEffect(() => {
    if (shownStatus.current && status !== shownStatus.current) setMessage(null);
    shownStatus.current = status;
  }, [status]);

  const now = useServerNow(offsetMs, team?.status === 'OPEN');
  // Offline, the page loads again by itself once the live connection is back (above).
  if (!team) return <Loading problem={networkProblem ?? message} retry={networkProblem ? load : undefined} />;

  const myLock = team.locks.find((lock) => lock.userId === me);
  const member = team.members.some((seat) => seat.userId === me);
  // A payment is for one lock: one kept from a lock that has since run out pays for nothing.
  const payable = payment && myLock && payment.lockExpiresAt === myLock.expiresAt ? payment : null;
  // The provider takes it until its expiresAt, a grace before the seat frees: the time to pay by.
  const payBy = payable ? Date.parse(payable.expiresAt) : null;
  const freeRows = Math.max(0, team.capacity - team.members.length - team.locks.length);

  function remember(next: Payment | null) {
    storePayment(teamId, next);
    setPayment(next);
  }

  const act = (what: 'lock' | 'pay' | 'release', action: () => Promise<void>) =>
    oneAtATime(
      async () => {
        setMessage(null);
        try {
          await action();
          setNetworkProblem(null);
        } catch (error) {
          showError(error as Error);
        }
      },
      { name: what, thenFocus: () => ({ lock: payButton, pay: messageLine, release: lockButton })[what].current ?? messageLine.current ?? problemLine.current },
    );

  const lock = () =>
    act('lock', async () => {
      const { lockTeamSeat: result } = await request(LockSeat, { teamId });
      focusPayWhenShown.current = result.__typename === 'SeatLocked';
      if (result.__typename === 'SeatLocked') remember({ ...result.payment, lockExpiresAt: result.lock.expiresAt });
      else if ('message' in result) setMessage(result.message);
      if (result.__typename === 'SeatLockLimitReached') setLockLimitReached(true);
    });
  const pay = () =>
    act('pay', async () => {
      if (!payable) return;
      const { sandboxPay } = await request(SandboxPay, { paymentRef: payable.paymentRef });
      remember(null);
      setMessage(sandboxPay.outcome === 'SEATED' ? '支付成功，你已入团' : '座位已释放，这笔钱会退回给你');
    });
  const release = () =>
    act('release', async () => {
      await request(ReleaseSeat, { teamId });
      remember(null);
    });

  return (
    <div class="card">
      <h2>
        {activity ? `${activity.title} · ` : ''}
        {team.capacity} 人团 <span class={`tag ${team.status.toLowerCase()}`}>{STATUS[team.status]}</span>
      </h2>
      {activity && (
        <p data-testid="team-price">
          拼团价 <span class="big">¥{yuan(activity.groupPriceCents)}</span>
        </p>
      )}
      <p data-testid="team-status" data-status={team.status}>
        {team.status === 'OPEN' ? (
          <>
            还差 {team.capacity - team.members.length} 人成团，<span class="nowrap">{countdown(Date.parse(team.deadline), now)}</span> 后截止
          </>
        ) : team.status === 'COMPLETE' ? (
          `${team.capacity} 人已成团`
        ) : (
          '未能成团，已付的钱会退回'
        )}
      </p>
      {team.status === 'OPEN' && team.freeSeats === 0 && team.nextUnlockAt && (
        <p class="notice" data-testid="next-unlock">
          座位已满：下一个座位 <span class="nowrap">{countdown(Date.parse(team.nextUnlockAt), now)}</span> 后释放
        </p>
      )}
      <ul class="plain seats">
        {team.members.map((seat) => (
          <li key={`member-${seat.userId}`} data-testid="member-seat">
            <span>
              {handle(seat.userId, '拼友')}
              {seat.userId === team.leaderId && <span class="tag">团长</span>}
              {seat.userId === me && <span class="tag">我</span>}
            </span>
            <span class="seat-state">已入团</span>
          </li>
        ))}
        {team.locks.map((seat) => {
          // A lock that would outlive the team's deadline ends with it: the team fails then.
          const expiresAt = Math.min(Date.parse(seat.expiresAt), Date.parse(team.deadline));
          return (
            <li key={`lock-${seat.userId}`} data-testid="paying-seat">
              <span>
                {handle(seat.userId, '拼友')}
                {seat.userId === me && <span class="tag">我</span>}
              </span>
              <span class="seat-state paying">
                支付中{' '}
                <span data-testid="seat-countdown" data-remaining-ms={Math.max(0, expiresAt - now)}>
                  {expiresAt > now ? countdown(expiresAt, now) : '释放中'}
                </span>
              </span>
            </li>
          );
        })}
        {Array.from({ length: freeRows }, (_, i) => (
          <li key={`free-${i}`} data-testid="free-seat" class="free">
            <span>空位</span>
            <span class="seat-state">{team.status === 'OPEN' ? '等你来' : '—'}</span>
          </li>
        ))}
      </ul>
      {team.status === 'OPEN' && !member && payable && payBy !== null && (
        <>
          {payBy > now ? (
            <>
              <p data-testid="pay-countdown" data-remaining-ms={payBy - now}>
                请在 <span class="nowrap">{countdown(payBy, now)}</span> 内支付
              </p>
              {/* Cut off from the live updates, the page cannot tell whether the lock still holds. */}
              <ActionButton onClick={pay} disabled={busy || liveDown} acting={acting === 'pay'} buttonRef={payButtonShown}>
                沙箱支付 ¥{yuan(payable.amountCents)}
              </ActionButton>
              {liveDown && (
                <p class="muted" data-testid="pay-stale">
                  座位状态可能已变化：连接恢复后再支付
                </p>
              )}
            </>
          ) : (
            // The provider no longer takes it; the seat stays held until its countdown above ends.
            <p class="notice" data-testid="pay-closed">
              支付已截止，座位释放后可重新参团
            </p>
          )}
          <ActionButton class="secondary" onClick={release} disabled={busy} acting={acting === 'release'}>
            放弃座位
          </ActionButton>
        </>
      )}
      {team.status === 'OPEN' && !member && !payable && (
        <ActionButton onClick={lock} disabled={busy || lockLimitReached || (!myLock && team.freeSeats === 0)} acting={acting === 'lock'} buttonRef={lockButton}>
          {myLock ? '继续支付' : team.freeSeats === 0 ? '暂无空位' : '参团：锁定座位'}
        </ActionButton>
      )}
      <Status>
        {message && (
          <p class="notice" data-testid="team-message" ref={messageLine} tabIndex={-1}>
            {message}
          </p>
        )}
      </Status>
      <TeamNews team={team} payBy={payBy} now={now} />
      {networkProblem && (
        <p class="problem" role="alert" data-testid="team-network-problem" ref={problemLine} tabIndex={-1}>
          {networkProblem}
        </p>
      )}
      {/* A team fills faster when its members bring friends: the link opens this team. */}
      {team.status === 'OPEN' && <ShareLink />}
      <p class="muted">
        <a href={`#/groupbuy/${team.activityId}`}>查看其他团</a>
      </p>
    </div>
  );
}
