import { useRef, useState } from 'preact/hooks';

/**
 * One action at a time, for a button whose second tap would act twice (pay twice, open a
 * second team). `busy` disables the button, but only once the page re-renders: two taps
 * in one task (a script, an assistive tool) both pass a check of `busy` itself. `acting`
 * names the action on its way (`run`'s `what`), so only its own button says so.
 */
export function useOneAtATime(): [busy: boolean, run: (action: () => Promise<void>, what?: string) => Promise<void>, acting: string | null] {
  const running = useRef(false);
  const [acting, setActing] = useState<string | null>(null);
  async function run(action: () => Promise<void>, what = ''): Promise<void> {
    if (running.current) return;
    running.current = true;
    setActing(what);
    try {
      await action();
    } finally {
      running.current = false;
      setActing(null);
    }
  }
  return [acting !== null, run, acting];
}
