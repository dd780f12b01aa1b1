/** Who is signed in on this device: the token the shop's login (or the development sign-in) gave. */
const KEY = 'campaign.session';

export interface Session {
  name: string;
  token: string;
}

export function currentSession(): Session | null {
  try {
    const stored = JSON.parse(localStorage.getItem(KEY) ?? 'null') as Session | null;
    return stored && typeof stored.token === 'string' ? stored : null;
  } catch {
    return null;
  }
}

/** Set when the server refused the token, until the next sign-in or sign-out: a reload still says why sign-in is back. */
const ENDED_KEY = 'campaign.sessionEnded';

/** Signs in (a session) or out (null); either way, the ended session is no longer the news. */
export function saveSession(session: Session | null): void {
  if (session) localStorage.setItem(KEY, JSON.stringify(session));
  else localStorage.removeItem(KEY);
  localStorage.removeItem(ENDED_KEY);
}

/** Why the last session ended, if the server refused its token: its `reason` (EXPIRED, BAD_SIGNATURE…), or '' when it gave none. */
export function sessionEndedFor(): string | null {
  return localStorage.getItem(ENDED_KEY);
}

/** Dispatched on window when the server refuses the session's token: the app shows sign-in. */
export const SESSION_ENDED = 'campaign:session-ended';

export function endSession(reason: string): void {
  saveSession(null);
  localStorage.setItem(ENDED_KEY, reason);
  dispatchEvent(new Event(SESSION_ENDED));
}
