import { RedisPubSub } from 'graphql-redis-subscriptions';
import { Repeater, SlidingBuffer } from 'graphql-yoga';
import { Cluster } from 'ioredis';
import { liveSubscribers } from '../metrics.ts';
import type { RedisClient } from './connection.ts';
import { ShardedPubSub } from './shardedPubSub.ts';

/** The longest delay setTimeout takes; a later refresh or end is checked again then. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** How a stream of absolute states behaves: see `LiveEvents.currentThenChanges`. */
export interface StateStream<T> {
  load: () => Promise<T | null>;
  /** Grows with every change, so a subscriber drops stale or repeated states. */
  versionOf: (state: T) => number;
  /** A state after which nothing changes: the stream completes once it is pushed. */
  isFinal: (state: T) => boolean;
  /** Milliseconds from when `state` was read until it changes without any event (an expiry); null if never. */
  changesIn?: (state: T) => number | null;
}

/** How a stream of events ends: see `LiveEvents.recentThenEvents`. */
export interface EventStreamEnd<T> {
  /** Milliseconds until the subject ends; 0 or less once it has. Checked again when it comes. */
  msUntilEnd: () => Promise<number>;
  /** Once it has ended: the last events, of which those the stream has not pushed follow before completion. */
  lastEvents: () => Promise<T[]>;
  /** A topic announcing that the end may have moved (an operator's change): the end is checked again at once. */
  movedTopic?: string;
}

/**
 * Live events between instances, over graphql-redis-subscriptions on two dedicated
 * connections (on a Redis Cluster: sharded pub/sub, see ShardedPubSub). Payloads are absolute state with a `version` that only grows, so a
 * subscriber can drop stale or repeated events and a reconnecting client is right
 * at once.
 *
 * Streams are Repeaters, not async generators: a generator parked on an `await` ignores
 * `return()` until its next value, so a closed subscription on a quiet topic would hold
 * its Redis channel and memory for good. A Repeater's `return()` settles its pending
 * `next()` and runs the cleanup at once.
 */
export class LiveEvents {
  private readonly pubsub: RedisPubSub | ShardedPubSub;
  private readonly channelPrefix: string;
  /** Topics whose state is to be published this turn, with how to load it. */
  private readonly scheduled = new Map<string, () => Promise<unknown>>();
  private readonly queuedEvents = new Map<string, unknown[]>();
  private unsubscribing = true;

  constructor(
    private readonly publisher: RedisClient,
    subscriber: RedisClient,
    channelPrefix: string,
  ) {
    // Cluster clients add their key prefix to sharded channels themselves.
    const sharded = publisher instanceof Cluster && subscriber instanceof Cluster;
    this.pubsub = sharded ? new ShardedPubSub(publisher, subscriber) : new RedisPubSub({ publisher, subscriber });
    this.channelPrefix = sharded ? '' : channelPrefix;
  }

  publish<T>(topic: string, payload: T): Promise<void> {
    return this.pubsub.publish(this.channelPrefix + topic, payload);
  }

  /**
   * Publishes the state that `load` returns, once per topic per turn of the event
   * loop: a burst of grants on one campaign becomes one event with the newest state.
   * Nothing is loaded while no instance listens on the topic (a load may be a query
   * over every grab of a packet); one that starts listening later reads the state
   * itself, after this change.
   */
  publishLatest<T>(topic: string, load: () => Promise<T | null>): void {
    if (this.scheduled.has(topic)) return;
    this.scheduled.set(topic, load);
    if (this.scheduled.size === 1) setImmediate(() => this.publishScheduled());
  }

  /** One turn's topics: who listens is asked once for all of them, and each state that someone listens for is loaded and published. */
  private publishScheduled(): void {
    const due = [...this.scheduled];
    this.scheduled.clear();
    this.listeners(due.map(([topic]) => topic))
      .then((counts) => {
        due.forEach(([topic, load], i) => {
          if (counts[i]! === 0) return;
          load()
            .then((state) => (state ? this.publish(topic, state) : undefined))
            .catch(() => {
              // A lost event is repaired by the next one; subscribers hold absolute state.
            });
        });
      })
      .catch(() => {
        // As above: nothing was published this turn; the next change publishes again.
      });
  }

  /**
   * How many instances listen on each topic: one PUBSUB NUMSUB for all of them (a turn of
   * a storm publishes hundreds), or on a cluster one script per topic's shard.
   */
  private async listeners(topics: string[]): Promise<number[]> {
    const pubsub = this.pubsub;
    if (pubsub instanceof ShardedPubSub) return Promise.all(topics.map((topic) => pubsub.listeners(topic)));
    const counts = (await this.publisher.pubsub('NUMSUB', ...topics.map((topic) => this.channelPrefix + topic))) as (string | number)[];
    return topics.map((_topic, i) => Number(counts[2 * i + 1]));
  }

  /**
   * The current state first, then every newer state, skipping any that arrive out of
   * order; completes after a final state. A slow subscriber skips to the newest state
   * instead of replaying every step.
   */
  currentThenChanges<T>(topic: string, stream: StateStream<T>): AsyncIterableIterator<T> {
    return new Repeater<T>(async (push, stop) => {
      let lastVersion = -Infinity;
      let early: T | undefined;
      let loaded = false;
      let stopped = false;
      let refresh: NodeJS.Timeout | undefined;
      const offer = (state: T) => {
        // A message may come between the cleanup and the unsubscribe; a timer set then would outlive the stream.
        if (stopped) return;
        if (!loaded) {
          if (!early || stream.versionOf(state) > stream.versionOf(early)) early = state;
          return;
        }
        const version = stream.versionOf(state);
        if (version < lastVersion) return;
        const changesIn = stream.changesIn?.(state);
        if (changesIn != null) {
          // Every instance with watchers reloads and publishes; the repeats are dropped by
          // version. A reload that came too early (the same version) sets the timer again.
          clearTimeout(refresh);
          refresh = setTimeout(() => this.publishLatest(topic, stream.load), Math.min(Math.max(changesIn, 0), MAX_TIMER_MS)).unref();
        }
        if (version === lastVersion) return;
        lastVersion = version;
        void push(state);
        if (stream.isFinal(state)) void stop();
      };
      // Listen before reading the current state, so no change falls in between.
      const { subscribed, stopListening } = this.listen<T>(topic, offer);
      try {
        await subscribed;
        const current = await stream.load();
        loaded = true;
        if (!current) return;
        offer(current);
        if (early) offer(early);
        await stop;
      } finally {
        stopped = true;
        clearTimeout(refresh);
        stopListening();
      }
    }, new SlidingBuffer(1));
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
   * topic, in order; those already pushed are skipped. With an `end`, the stream
   * completes once its subject has ended, after the last events it had not pushed.
   * A subscriber that falls `maxBacklog` events behind loses the oldest.
   */
  recentThenEvents<T>(topic: string, loadRecent: () => Promise<T[]>, idOf: (event: T) => string, end?: EventStreamEnd<T>, maxBacklog = 1000): AsyncIterableIterator<T> {
    return new Repeater<T>(async (push, stop) => {
      let early: T[] | undefined = [];
      // The ids pushed lately, to skip repeats (oldest first, so the set stays bounded).
      const pushed = new Set<string>();
      const offer = (event: T) => {
        const id = idOf(event);
        if (pushed.has(id)) return;
        pushed.add(id);
        if (pushed.size > maxBacklog) pushed.delete(pushed.values().next().value!);
        void push(event);
      };
      const { subscribed, stopListening } = this.listen<T[]>(topic, (events) => {
        if (early) early.push(...events);
        else events.forEach(offer);
      });
      let endCheck: NodeJS.Timeout | undefined;
      let stopped = false;
      const checkEnd = async (): Promise<void> => {
        const msUntilEnd = await end!.msUntilEnd();
        // Closed meanwhile: a timer set now would hold the stream until the end.
        if (stopped) return;
        clearTimeout(endCheck);
        if (msUntilEnd > 0) {
          endCheck = setTimeout(() => checkEnd().catch((error: unknown) => stop(error)), Math.min(msUntilEnd, MAX_TIMER_MS)).unref();
          return;
        }
        (await end!.lastEvents()).forEach(offer);
        void stop();
      };
      const moved = end?.movedTopic ? this.listen(end.movedTopic, () => void checkEnd().catch((error: unknown) => stop(error)), false) : undefined;
      try {
        await subscribed;
        const recent = await loadRecent();
        recent.forEach(offer);
        const arrived = early;
        early = undefined;
        arrived.forEach(offer);
        if (end) await Promise.race([checkEnd(), stop]);
        await stop;
      } finally {
        stopped = true;
        clearTimeout(endCheck);
        stopListening();
        moved?.stopListening();
      }
    }, new SlidingBuffer(maxBacklog));
  }

  /**
   * Calls `onMessage` with every message on the topic (once `subscribed` resolves) until
   * `stopListening` is called. The listener is removed only once the library registered
   * it: removed while Redis has not confirmed the channel, it would be added back after.
   * The library drops the Redis channel when its last local listener leaves.
   */
  /** `counted`: the subscription's own topic, one per running subscription in the gauge. */
  private listen<M>(topic: string, onMessage: (message: M) => void, counted = true): { subscribed: Promise<number>; stopListening: () => void } {
    const subscribed = this.pubsub.subscribe(this.channelPrefix + topic, onMessage);
    if (counted) liveSubscribers.inc();
    let listening = true;
    const stopListening = () => {
      if (listening && counted) liveSubscribers.dec();
      listening = false;
      subscribed.then(
        (id) => this.unsubscribing && this.pubsub.unsubscribe(id),
        () => undefined,
      );
    };
    return { subscribed, stopListening };
  }

  /**
   * From here on, streams that end leave their channels to close(): the connection takes
   * them along. An UNSUBSCRIBE still unanswered when it closes fails, and the library
   * leaves that rejection unhandled. Called when a stop begins, before its streams end.
   */
  leaveChannelsToClose(): void {
    this.unsubscribing = false;
  }

  async close(): Promise<void> {
    this.unsubscribing = false;
    await this.pubsub.close();
  }
}
