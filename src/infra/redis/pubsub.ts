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
  private readonly queuedEvents = new Map<string, unknown[]>();

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

  /**
   * Publishes one happening (a win, for a ticker) where every event counts, unlike the
   * states of `publishLatest`: a turn's events on a topic go out together, in order.
   */
  publishEvent<T>(topic: string, event: T): void {
    const queued = this.queuedEvents.get(topic);
    if (queued) {
      queued.push(event);
      return;
    }
    this.queuedEvents.set(topic, [event]);
    setImmediate(() => {
      const events = this.queuedEvents.get(topic) ?? [];
      this.queuedEvents.delete(topic);
      this.publish(topic, events).catch(() => {
        // Fire and forget: a ticker that misses an event shows the next one.
      });
    });
  }

  /**
   * `loadRecent`'s events (oldest first), then every event `publishEvent` sends on the
   * topic, in order; those already among the recent ones are skipped. A subscriber that
   * falls `maxBacklog` events behind loses the oldest.
   */
  async *recentThenEvents<T>(topic: string, loadRecent: () => Promise<T[]>, idOf: (event: T) => string, maxBacklog = 1000): AsyncGenerator<T> {
    const pending: T[] = [];
    let wake: (() => void) | undefined;
    // Subscribe before loading the recent events, so none falls in between.
    const subscription = await this.pubsub.subscribe(this.channelPrefix + topic, (events: T[]) => {
      pending.push(...events);
      pending.splice(0, pending.length - maxBacklog);
      wake?.();
    });
    try {
      const recent = await loadRecent();
      const seen = new Set(recent.map(idOf));
      yield* recent;
      for (;;) {
        if (pending.length === 0) await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
        for (const event of pending.splice(0)) {
          if (!seen.delete(idOf(event))) yield event;
        }
      }
    } finally {
      this.pubsub.unsubscribe(subscription);
    }
  }

  async close(): Promise<void> {
    await this.pubsub.close();
  }
}
