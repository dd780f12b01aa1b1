type AsyncMethod = (...args: never[]) => Promise<unknown>;

/**
 * Holds every call of `target[method]` until `letGo()`, to stop a flow between two of its
 * steps on purpose; `reached` resolves when the first call arrives.
 */
export function holdCalls<T extends Record<K, AsyncMethod>, K extends keyof T>(target: T, method: K): { reached: Promise<void>; letGo: () => void } {
  const original = target[method].bind(target) as AsyncMethod;
  let letGo!: () => void;
  const held = new Promise<void>((resolve) => (letGo = resolve));
  let arrive!: () => void;
  const reached = new Promise<void>((resolve) => (arrive = resolve));
  target[method] = (async (...args: never[]) => {
    arrive();
    await held;
    return original(...args);
  }) as T[K];
  return { reached, letGo };
}
