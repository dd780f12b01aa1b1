import { useEffect, useRef } from 'preact/hooks';
import { NETWORK_PROBLEM } from './api.ts';

/**
 * Calls `load` again whenever the device comes back online: a page opened offline would
 * otherwise say 网络连接失败 until reloaded, as tapping its tab again changes no hash.
 */
export function useReloadWhenOnline(load: () => unknown): void {
  const latest = useRef(load);
  latest.current = load;
  useEffect(() => {
    const reload = () => void latest.current();
    addEventListener('online', reload);
    return () => removeEventListener('online', reload);
  }, []);
}

/** A page's problem once a later request got through: that the network failed is no longer the news. */
export const unlessNetwork = (problem: string | null) => (problem === NETWORK_PROBLEM ? null : problem);

/** What a page shows until its data arrives: '…', or why not, with 重试 when `retry` may help. */
export function Loading({ problem, retry }: { problem: string | null; retry?: () => unknown }) {
  return (
    <div class="card">
      <p role="status" data-testid="loading">
        {problem ?? '…'}
      </p>
      {problem && retry && (
        <button type="button" class="secondary" onClick={() => void retry()}>
          重试
        </button>
      )}
    </div>
  );
}
