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

export function saveSession(session: Session | null): void {
  if (session) localStorage.setItem(KEY, JSON.stringify(session));
  else localStorage.removeItem(KEY);
}

/** Dispatched on window when the server refuses the session's token: the app shows sign-in. */
export const SESSION_ENDED = 'campaign:session-ended';

export function endSession(): void {
  saveSession(null);
  dispatchEvent(new Event(SESSION_ENDED));
}
