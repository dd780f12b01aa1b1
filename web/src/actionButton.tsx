import type { JSX } from 'preact';

/**
 * A button whose action may take a while: while it is on its way the button says so, in
 * words (处理中…) and to assistive tools (aria-busy), not only by fading.
 */
export function ActionButton({ acting, children, ...button }: JSX.ButtonHTMLAttributes<HTMLButtonElement> & { acting: boolean }) {
  return (
    <button type="button" {...button} aria-busy={acting || undefined}>
      {acting ? '处理中…' : children}
    </button>
  );
}
