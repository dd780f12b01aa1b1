import { useState } from 'preact/hooks';
import { NETWORK_PROBLEM } from '../api.ts';
import { type Session, saveSession } from '../session.ts';

/** The development sign-in's rule for a name (src/webApp.ts): checked here, so a refusal reads as what to type. */
const validName = (name: string) => name.length >= 1 && name.length <= 64 && /^[\p{L}\p{N}_.-]+$/u.test(name);
const NAME_RULE = '昵称：请用 1 到 64 个字母、数字、汉字或 “_” “-” “.”，不能有空格';

/** Who a pasted token says it is (its `sub`), to show beside sign-out; the server verifies the token, not this. */
function subjectOf(token: string): string | null {
  try {
    const bytes = Uint8Array.from(atob(token.split('.')[1]!.replace(/-/g, '+').replace(/_/g, '/')), (char) => char.charCodeAt(0));
    const payload = JSON.parse(new TextDecoder().decode(bytes)) as { sub?: unknown };
    return typeof payload.sub === 'string' ? payload.sub : null;
  } catch {
    return null;
  }
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

  async function signIn(event: Event) {
    event.preventDefault();
    setProblem(null);
    let minted = token.trim();
    if (!minted) {
      if (!validName(name.trim())) return setProblem(NAME_RULE);
      let response: Response;
      try {
        response = await fetch('/app/dev-token', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: name.trim(), operator }) });
      } catch {
        return setProblem(NETWORK_PROBLEM);
      }
      if (!response.ok) {
        return setProblem(
          response.status === 404 ? '此服务器不签发开发令牌：请粘贴登录令牌 (paste a token)' : response.status === 400 ? NAME_RULE : `登录失败（HTTP ${response.status}），请稍后重试`,
        );
      }
      minted = ((await response.json()) as { token: string }).token;
    }
    const session = { name: name.trim() || subjectOf(minted) || '令牌用户', token: minted };
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
      <button type="submit" disabled={!name && !token}>
        登录
      </button>
      {problem && (
        <p class="problem" role="alert" data-testid="sign-in-problem">
          {problem}
        </p>
      )}
    </form>
  );
}
