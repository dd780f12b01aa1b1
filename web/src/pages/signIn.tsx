import { useState } from 'preact/hooks';
import { ActionButton } from '../actionButton.tsx';
import { ApiError, NETWORK_PROBLEM, request } from '../api.ts';
import { graphql } from '../gql/index.ts';
import { type Session, saveSession } from '../session.ts';

/** The development sign-in's rule for a name (src/webApp.ts): checked here, so a refusal reads as what to type. */
const validName = (name: string) => name.length >= 1 && name.length <= 64 && /^[\p{L}\p{N}_.-]+$/u.test(name);
const NAME_RULE = '昵称：请用 1 到 64 个字母、数字、汉字或 “_” “-” “.”，不能有空格';

// Whom a pasted token signs in as, asked of the server: a token it refuses is refused here,
// not on the next page as a session that "ended".
const WhoAmI = graphql(`
  query WebWhoAmI {
    me {
      userId
    }
  }
`);

/** Why a pasted token cannot sign in, in words for the one who pasted it; the server's own message names HTTP headers. */
function tokenProblem(error: unknown): string {
  if (!(error instanceof ApiError) || error.code !== 'UNAUTHENTICATED') return (error as Error).message;
  return error.reason === 'EXPIRED' ? '这个令牌已过期：请重新登录商城，再粘贴新的令牌' : '这不是有效的登录令牌：请粘贴商城登录后得到的完整令牌';
}

/**
 * Development: mints a token for any name (POST /app/dev-token, which only a development
 * server answers). Production: the shop's own login hands the app a token, pasted here.
 */
export function SignIn({ onSignedIn, notice }: { onSignedIn: (session: Session) => void; notice: string | null }) {
  const [name, setName] = useState('');
  const [operator, setOperator] = useState(false);
  const [token, setToken] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [checking, setChecking] = useState(false);

  /** A pasted token, checked with the server: whom it signs in as, or why not. */
  async function pasted(pastedToken: string): Promise<Session | { problem: string }> {
    try {
      const { me } = await request(WhoAmI, {}, pastedToken);
      return { name: name.trim() || me.userId, token: pastedToken };
    } catch (error) {
      return { problem: tokenProblem(error) };
    }
  }

  /** A development token minted for the name typed, or why not. */
  async function minted(): Promise<Session | { problem: string }> {
    if (!validName(name.trim())) return { problem: NAME_RULE };
    let response: Response;
    try {
      response = await fetch('/app/dev-token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: name.trim(), operator }) });
    } catch {
      return { problem: NETWORK_PROBLEM };
    }
    if (!response.ok) {
      return {
        problem: response.status === 404 ? '此服务器不签发开发令牌：请粘贴登录令牌 (paste a token)' : response.status === 400 ? NAME_RULE : `登录失败（HTTP ${response.status}），请稍后重试`,
      };
    }
    try {
      return { name: name.trim(), token: ((await response.json()) as { token: string }).token };
    } catch {
      // A body cut off on the way: the button must not stay busy.
      return { problem: `登录失败（HTTP ${response.status}），请稍后重试` };
    }
  }

  async function signIn(event: Event) {
    event.preventDefault();
    if (checking) return;
    setProblem(null);
    setChecking(true);
    const session = await (token.trim() ? pasted(token.trim()) : minted());
    setChecking(false);
    if ('problem' in session) return setProblem(session.problem);
    saveSession(session);
    onSignedIn(session);
    // Signed in from a shared link (a packet, a team), the user stays on it.
    if (!location.hash || location.hash.startsWith('#/signin')) location.hash = '#/packets';
  }

  return (
    <form class="card" onSubmit={signIn}>
      <h2>登录 Sign in</h2>
      {notice && (
        <p class="notice" role="status" data-testid="sign-in-notice">
          {notice}
        </p>
      )}
      <label for="name">昵称 Name</label>
      <input id="name" value={name} onInput={(event) => setName(event.currentTarget.value)} placeholder="alice" />
      <label>
        <input type="checkbox" style={{ width: 'auto' }} checked={operator} onChange={(event) => setOperator(event.currentTarget.checked)} /> 运营 Operator
      </label>
      <label for="token">或粘贴令牌 Or paste a token</label>
      <input id="token" value={token} onInput={(event) => setToken(event.currentTarget.value)} />
      <ActionButton type="submit" disabled={checking || (!name && !token)} acting={checking}>
        登录
      </ActionButton>
      {problem && (
        <p class="problem" role="alert" data-testid="sign-in-problem">
          {problem}
        </p>
      )}
    </form>
  );
}
