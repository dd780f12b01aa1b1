import { useEffect, useRef, useState } from 'preact/hooks';
import { Reconnecting } from './live.tsx';
import { GroupBuyActivities, GroupBuyTeams } from './pages/groupBuy.tsx';
import { Lottery, LotteryActivities } from './pages/lottery.tsx';
import { RedPacketPage } from './pages/redPacket.tsx';
import { SendRedPacket } from './pages/sendRedPacket.tsx';
import { Shop } from './pages/shop.tsx';
import { SignIn } from './pages/signIn.tsx';
import { TeamPage } from './pages/team.tsx';
import { Wallet } from './pages/wallet.tsx';
import { SESSION_ENDED, type Session, currentSession, saveSession, sessionEndedFor } from './session.ts';

/**
 * The page a hash names: #/packets/<id>, #/shop… (hash routes need nothing from the server),
 * its segments decoded: a shared link's id arrives percent-encoded.
 */
function route(): string[] {
  return location.hash
    .replace(/^#\/?/, '')
    .split('/')
    .filter(Boolean)
    .map((segment) => {
      try {
        return decodeURIComponent(segment);
      } catch {
        return segment;
      }
    });
}

const PAGES = [
  { path: 'packets', title: '红包' },
  { path: 'groupbuy', title: '拼团' },
  { path: 'lottery', title: '抽奖' },
  { path: 'shop', title: '积分商城' },
  { path: 'wallet', title: '钱包' },
  { path: 'signin', title: '登录' },
];

/** What a page is called, in its <h1> and the tab's title; a shared link's page has its own name. */
function pageTitle(page: string, id: string | undefined): string {
  if (page === 'packets') return id ? '红包' : '发红包';
  if (page === 'groupbuy' && id) return '拼团活动';
  if (page === 'team' && id) return '拼团详情';
  return PAGES.find((item) => item.path === page)?.title ?? '没有这个页面';
}

export function App() {
  const [path, setPath] = useState(route());
  const [session, setSession] = useState<Session | null>(currentSession());
  // The server refused the token (it expired, say): the sign-in screen says why it is back.
  const [endedFor, setEndedFor] = useState(sessionEndedFor);
  useEffect(() => {
    const onHash = () => setPath(route());
    const onEnded = () => {
      setSession(null);
      setEndedFor(sessionEndedFor());
    };
    addEventListener('hashchange', onHash);
    addEventListener(SESSION_ENDED, onEnded);
    return () => {
      removeEventListener('hashchange', onHash);
      removeEventListener(SESSION_ENDED, onEnded);
    };
  }, []);

  const signedIn = (next: Session) => {
    setEndedFor(null);
    setSession(next);
  };
  const signOut = () => {
    saveSession(null);
    setEndedFor(null);
    setSession(null);
  };

  const [page = 'packets', id] = path;
  // Signed out, every link shows the sign-in screen: that is the page the nav marks as current.
  const shown = session ? page : 'signin';
  const title = pageTitle(shown, id);
  useEffect(() => {
    document.title = `${title} · 活动 Campaigns`;
  }, [title]);
  // Another page (a link, signing in or out) starts at its heading, not at <body> where the
  // link or form that led there was removed; the first page keeps the browser's own start.
  const heading = useRef<HTMLHeadingElement>(null);
  const arrived = useRef(false);
  const where = `${session ? 'in' : 'out'}:${path.join('/')}`;
  useEffect(() => {
    if (arrived.current) heading.current?.focus();
    arrived.current = true;
  }, [where]);
  const body = !session ? (
    <SignIn onSignedIn={signedIn} notice={endedFor === null ? null : endedFor === 'EXPIRED' ? '登录已过期，请重新登录' : '登录已失效，请重新登录'} />
  ) : page === 'signin' ? (
    <SignIn onSignedIn={signedIn} notice={null} />
  ) : page === 'shop' ? (
    <Shop />
  ) : page === 'wallet' ? (
    <Wallet />
  ) : page === 'groupbuy' ? (
    id ? (
      <GroupBuyTeams key={id} activityId={id} />
    ) : (
      <GroupBuyActivities />
    )
  ) : page === 'team' && id ? (
    <TeamPage key={id} teamId={id} />
  ) : page === 'lottery' ? (
    id ? (
      <Lottery key={id} activityId={id} />
    ) : (
      <LotteryActivities />
    )
  ) : page === 'packets' && id ? (
    <RedPacketPage key={id} packetId={id} />
  ) : page === 'packets' ? (
    <SendRedPacket />
  ) : (
    <p class="card problem" role="alert" data-testid="no-such-page">
      没有这个页面
    </p>
  );
  return (
    <>
      <nav>
        {/* Signed in, "登录" would only sign in again: the name line beneath offers to sign out instead. */}
        {PAGES.filter((item) => !(session && item.path === 'signin')).map((item) => {
          const current = shown === item.path || (shown === 'team' && item.path === 'groupbuy');
          return (
            <a key={item.path} href={`#/${item.path}`} class={current ? 'active' : ''} aria-current={current ? 'page' : undefined}>
              {item.title}
            </a>
          );
        })}
      </nav>
      <main>
        {/* The nav shows where one is; the heading says it to screen readers, whose users jump by headings. */}
        <h1 class="visually-hidden" ref={heading} tabIndex={-1}>
          {title}
        </h1>
        {session && (
          <p class="muted account">
            <span>{session.name}</span>
            <button type="button" class="link" onClick={signOut}>
              退出登录
            </button>
          </p>
        )}
        {/* Shown while a page that subscribes (a packet, a team, the wheel, the shop) is cut off from its live updates. */}
        <Reconnecting />
        {body}
      </main>
    </>
  );
}
