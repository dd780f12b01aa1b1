import { RedisPubSub } from 'graphql-redis-subscriptions';
import type { Redis } from 'ioredis';

/**
 * Live events between instances, over graphql-redis-subscriptions on two dedicated
 * connections. Payloads are absolute state with a `version` that only grows, so a
 * subscriber can drop stale or repeated events and a reconnecting client is right
 * at once.
 */
export class LiveEvents {
  private readonly pubsub: RedisPubSub;
  private readonly scheduled = new Set<string>();

  constructor(publisher: Redis, subscriber: Redis, private readonly channelPrefix: string) {
    this.pubsub = new RedisPubSub({ publisher, subscriber });
  }

  publish<T>(topic: string, payload: T): Promise<void> {
    return this.pubsub.publish(this.channelPrefix + topic, payload);
  }

  /**
   * Publishes the state that `load` returns, once per topic per turn of the event
   * loop: a burst of grants on one campaign becomes one event with the newest state.
   */
  publishLatest<T>(topic: string, load: () => Promise<T | null>): void {
    if (this.scheduled.has(topic)) return;
    this.scheduled.add(topic);
    setImmediate(() => {
      this.scheduled.delete(topic);
      load()
        .then((state) => (state ? this.publish(topic, state) : undefined))
        .catch(() => {
          // A lost event is repaired by the next one; subscribers hold absolute state.
        });
    });
  }

  /** The current state first, then every newer state, skipping any that arrive out of order. */
  async *currentThenChanges<T>(
    topic: string,
    loadCurrent: () => Promise<T | null>,
    versionOf: (state: T) => number,
  ): AsyncGenerator<T> {
    const pending: T[] = [];
    let wake: (() => void) | undefined;
    // Subscribe before reading the current state, so no change falls in between.
    const subscription = await this.pubsub.subscribe(this.channelPrefix + topic, (state: T) => {
      pending.push(state);
      wake?.();
    });
    try {
      const current = await loadCurrent();
      if (!current) return;
      let lastVersion = versionOf(current);
      yield current;
      for (;;) {
        if (pending.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        // A slow subscriber skips to the newest state instead of replaying every step.
        const newest = pending.splice(0).reduce((a, b) => (versionOf(b) > versionOf(a) ? b : a));
        if (versionOf(newest) <= lastVersion) continue;
        lastVersion = versionOf(newest);
        yield newest;
      }
    } finally {
      this.pubsub.unsubscribe(subscription);
    }
  }

  async close(): Promise<void> {
    await this.pubsub.close();
  }
}
