import { useEffect, useState } from 'preact/hooks';

/**
 * The server's "now" on this device: Date.now() plus the offset of the last serverTime seen,
 * ticking every quarter second while `running`. A phone's clock may be minutes off; counting
 * against the server's keeps every countdown in step with when the server lets a lock go.
 */
export function useServerNow(offsetMs: number, running: boolean): number {
  const [now, setNow] = useState(() => Date.now() + offsetMs);
  useEffect(() => {
    setNow(Date.now() + offsetMs);
    if (!running) return;
    const timer = setInterval(() => setNow(Date.now() + offsetMs), 250);
    return () => clearInterval(timer);
  }, [offsetMs, running]);
  return now;
}

/** 0:05, 4:59, 1:02:03: what is left until `until`, never below zero. */
export function countdown(untilMs: number, nowMs: number): string {
  const seconds = Math.max(0, Math.ceil((untilMs - nowMs) / 1000));
  const [h, m, s] = [Math.floor(seconds / 3600), Math.floor((seconds % 3600) / 60), seconds % 60];
  const pad = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(s)}` : `${m}:${pad(s)}`;
}

export const yuan = (cents: number) => (cents / 100).toFixed(2);
