import type { JSX, Ref } from 'preact';

/**
 * A button whose action may take a while: while it is on its way the button says so, in
 * words (处理中…) and to assistive tools (aria-busy), not only by fading. `context` (what it
 * acts on, when a list has a button per row) follows the label for screen readers only;
 * `buttonRef` is the button's ref (a function component takes no `ref` of its own).
 */
export function ActionButton({
  acting,
  context,
  buttonRef,
  children,
  ...button
}: JSX.ButtonHTMLAttributes<HTMLButtonElement> & { acting: boolean; context?: string; buttonRef?: Ref<HTMLButtonElement> }) {
  return (
    <button type="button" {...button} ref={buttonRef} aria-busy={acting || undefined}>
      {acting ? '处理中…' : children}
      {context && <span class="visually-hidden"> {context}</span>}
    </button>
  );
}
