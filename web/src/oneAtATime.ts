import { useRef, useState } from 'preact/hooks';

/**
 * One action at a time, for a button whose second tap would act twice (pay twice, open a
 * second team). `busy` disables the button, but only once the page re-renders: two taps
 * in one task (a script, an assistive tool) both pass a check of `busy` itself.
 */
export function useOneAtATime(): [busy: boolean, run: (action: () => Promise<void>) => Promise<void>] {
  const running = useRef(false);
  const [busy, setBusy] = useState(false);
  async function run(action: () => Promise<void>): Promise<void> {
    if (running.current) return;
    running.current = true;
    setBusy(true);
    try {
      await action();
    } finally {
      running.current = false;
      setBusy(false);
    }
  }
  return [busy, run];
}
