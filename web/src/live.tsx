import { useEffect, useState } from 'preact/hooks';
import { watchLiveConnection } from './api.ts';

/** Whether a page's live updates are interrupted (the socket is down and being retried, or the device is offline). */
export function useLiveDown(): boolean {
  const [down, setDown] = useState(false);
  useEffect(() => watchLiveConnection(setDown), []);
  return down;
}

/** The line a subscribing page shows while its live updates are interrupted: what it shows may be stale. */
export function Reconnecting() {
  const down = useLiveDown();
  return (
    <p class="notice" role="status" aria-live="polite" data-testid="reconnecting" hidden={!down}>
      {down ? '连接中断，正在重连…' : ''}
    </p>
  );
}
