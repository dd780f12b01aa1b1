import { useRef, useState } from 'preact/hooks';

type RunOptions = {
  /** Which action this is, so only its own button says it is on its way (`acting`). */
  name?: string;
  /** Where focus goes if the tapped button is gone or disabled once the action is done: what replaced it, or the result. */
  thenFocus?: () => HTMLElement | null | undefined;
};

/**
 * One action at a time, for a button whose second tap would act twice (pay twice, open a
 * second team). `busy` disables the button, but only once the page re-renders: two taps
 * in one task (a script, an assistive tool) both pass a check of `busy` itself. `acting`
 * names the action on its way.
 */
export function useOneAtATime(): [busy: boolean, run: (action: () => Promise<void>, options?: RunOptions) => Promise<void>, acting: string | null] {
  const running = useRef(false);
  const [acting, setActing] = useState<string | null>(null);
  async function run(action: () => Promise<void>, { name = '', thenFocus }: RunOptions = {}): Promise<void> {
    if (running.current) return;
    running.current = true;
    const tapped = document.activeElement;
    setActing(name);
    try {
      await action();
    } finally {
      running.current = false;
      setActing(null);
      // Disabled while its action ran, the button lost focus to <body>, where a keyboard or
      // screen reader user would start over. Once the page has re-rendered (a task later),
      // focus goes back to it, or to what the page names if the button is gone or disabled.
      setTimeout(() => {
        if (document.activeElement !== document.body) return;
        if (tapped instanceof HTMLElement) tapped.focus();
        if (document.activeElement !== tapped) thenFocus?.()?.focus();
      });
    }
  }
  return [acting !== null, run, acting];
}
