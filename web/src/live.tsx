import type { ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { watchLiveConnection } from './api.ts';

/** Whether a page's live updates are interrupted (the socket is down and being retried, or the device is offline). */
export function useLiveDown(): boolean {
  const [down, setDown] = useState(false);
  useEffect(() => watchLiveConnection(setDown), []);
  return down;
}

/**
 * A polite live region that stays in the page, empty or not: a message put into it is read,
 * where a message inserted together with its role, or unhidden with its text, often is not.
 */
export function Status({ children, testid }: { children: ComponentChildren; testid?: string }) {
  return (
    <div role="status" data-testid={testid}>
      {children}
    </div>
  );
}

/** The line a subscribing page shows while its live updates are interrupted: what it shows may be stale. */
export function Reconnecting() {
  const down = useLiveDown();
  return <Status testid="reconnecting">{down && <p class="notice">连接中断，正在重连…</p>}</Status>;
}
