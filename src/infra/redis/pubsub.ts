import { RedisPubSub } from 'graphql-redis-subscriptions';
import { Repeater, SlidingBuffer } from 'graphql-yoga';
import { Cluster } from 'ioredis';
import { type Logger, logRepeating } from '../logger.ts';
import { liveSubscribers } from '../metrics.ts';
import type { RedisClient } from './connection.ts';
import { ShardedPubSub } from './shardedPubSub.ts';

/** The longest delay setTimeout takes; a later refresh or end is checked again then. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * When a publish (its NUMSUB, load or PUBLISH) or a resync's load that failed is tried
 * again: a final state (EMPTY, COMPLETE) has no later change to repair it, so a blip of a
 * few seconds in PostgreSQL or Redis must not lose it. Longer outages are logged.
 */
const RETRY_DELAYS_MS = [250, 1_000, 4_000];
/**
 * How many watched states a resync loads at once: a Redis restart must not become thousands
 * of queries in one burst, and requests keep connections of the pool (10 by default).
 */
const RESYNC_CONCURRENCY = 8;

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
  /** Topics whose state is to be published this turn, with how to load it and how many tries failed before. */
  private readonly scheduled = new Map<string, { load: () => Promise<unknown>; attempt: number }>();
  private readonly queuedEvents = new Map<string, unknown[]>();
  /**
   * The state streams running here, by topic: a resync loads each topic once (its streams
   * all load the same state) and offers the state to every one of them.
   */
  private readonly watched = new Map<string, { load: () => Promise<unknown>; offers: Set<(state: unknown) => void> }>();
  /** The event streams' checks of their end, run again at a resync. */
  private readonly endChecks = new Set<() => void>();
  /** Topics a resync has still to load, with how many tries failed before. */
  private readonly resyncDue = new Map<string, number>();
  private resyncWorkers = 0;
  private unsubscribing = true;
  private closed = false;

  constructor(
    private readonly publisher: RedisClient,
    subscriber: RedisClient,
    channelPrefix: string,
    private readonly log: Logger,
  ) {
    // Cluster clients add their key prefix to sharded channels themselves.
    const sharded = publisher instanceof Cluster && subscriber instanceof Cluster;
    this.pubsub = sharded ? new ShardedPubSub(publisher, subscriber) : new RedisPubSub({ publisher, subscriber });
    this.channelPrefix = sharded ? '' : channelPrefix;
    // The subscriber connected before this was built: from here on it is ready only again
    // after a drop (a Redis restart, a failover, a killed connection), and every message
    // published meanwhile is lost. ioredis subscribes to the channels again before it emits
    // 'ready': the PING is answered after those subscriptions, so no change can fall between
    // them and the resync's loads. On a cluster the shards' SSUBSCRIBEs are sent before
    // 'subscribersReady' but not awaited, so a change in that round trip could still be missed.
    const resync = () => this.resync();
    if (sharded) subscriber.on('subscribersReady', resync);
    else subscriber.on('ready', () => void subscriber.ping().then(resync, () => undefined));
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
    this.schedule(topic, load, 0);
  }

  /** `attempt`: how many tries failed before; a topic already scheduled loads the newest state anyway. */
  private schedule(topic: string, load: () => Promise<unknown>, attempt: number): void {
    if (this.scheduled.has(topic)) return;
    this.scheduled.set(topic, { load, attempt });
    if (this.scheduled.size === 1) setImmediate(() => this.publishScheduled());
  }

  /**
   * One turn's topics: who listens is asked once for all of them, and each state that
   * someone listens for is loaded and published. A topic whose publish failed is scheduled
   * again (RETRY_DELAYS_MS), which loads the state anew.
   */
  private publishScheduled(): void {
    const due = [...this.scheduled];
    this.scheduled.clear();
    const failed = (topic: string, { load, attempt }: { load: () => Promise<unknown>; attempt: number }, error: unknown) =>
      this.retryOrWarn(topic, attempt, error, (next) => this.schedule(topic, load, next), 'could not publish a live state; its subscribers wait for its next change');
    this.listeners(due.map(([topic]) => topic))
      .then((counts) => {
        due.forEach(([topic, publishing], i) => {
          if (counts[i]! === 0) return;
          publishing
            .load()
            .then((state) => (state ? this.publish(topic, state) : undefined))
            .catch((error: unknown) => failed(topic, publishing, error));
        });
      })
      .catch((error: unknown) => {
        for (const [topic, publishing] of due) failed(topic, publishing, error);
      });
  }

  /**
   * Calls `retry` with the next attempt after its delay; once the retries are spent, logs the
   * failure, held back (logRepeating): an outage fails every topic at once.
   */
  private retryOrWarn(topic: string, attempt: number, error: unknown, retry: (attempt: number) => void, message: string): void {
    const delayMs = RETRY_DELAYS_MS[attempt];
    if (delayMs === undefined) {
      logRepeating(this.log, 'warn', { topic, err: error }, message);
      return;
    }
    setTimeout(() => {
      if (!this.closed) retry(attempt + 1);
    }, delayMs).unref();
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
      const unwatch = this.watch(topic, stream.load, offer);
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
        unwatch();
        stopListening();
      }
    }, new SlidingBuffer(1));
  }

  /** Registers a state stream's `offer` for resyncs; the returned function removes it. */
  private watch<T>(topic: string, load: () => Promise<T | null>, offer: (state: T) => void): () => void {
    let watched = this.watched.get(topic);
    if (!watched) {
      watched = { load, offers: new Set() };
      this.watched.set(topic, watched);
    }
    const offers = watched.offers as Set<(state: T) => void>;
    offers.add(offer);
    return () => {
      offers.delete(offer);
      if (offers.size === 0 && this.watched.get(topic) === watched) this.watched.delete(topic);
    };
  }

  /**
   * After the subscriber connection came back: what was published while it was away is
   * lost, a final state too, and no later change would repair that. Each watched topic's
   * state is loaded once (RESYNC_CONCURRENCY at a time) and offered to its streams as if it
   * were an event: the version rules drop it when nothing changed, and a final state
   * completes the streams. Event streams check their end again (a moved end is an event).
   */
  private resync(): void {
    for (const topic of this.watched.keys()) this.resyncDue.set(topic, 0);
    for (const checkEnd of this.endChecks) checkEnd();
    this.startResyncWorkers();
  }

  private startResyncWorkers(): void {
    while (this.resyncWorkers < Math.min(RESYNC_CONCURRENCY, this.resyncDue.size)) {
      this.resyncWorkers++;
      void this.resyncWorker();
    }
  }

  private async resyncWorker(): Promise<void> {
    try {
      for (let first = this.resyncDue.entries().next(); !first.done; first = this.resyncDue.entries().next()) {
        const [topic, attempt] = first.value;
        this.resyncDue.delete(topic);
        await this.reload(topic, attempt);
      }
    } finally {
      // In the same turn as the empty queue was seen: a topic queued later starts a worker.
      this.resyncWorkers--;
    }
  }

  /** Offers the topic's state now to its streams; tried again (through the queue) when the load fails. */
  private async reload(topic: string, attempt: number): Promise<void> {
    const watched = this.watched.get(topic);
    if (!watched) return;
    try {
      const state = await watched.load();
      if (state) for (const offer of watched.offers) offer(state);
    } catch (error) {
      const again = (next: number) => {
        // A later resync may have queued it meanwhile, with its tries from 0.
        if (!this.resyncDue.has(topic)) this.resyncDue.set(topic, next);
        this.startResyncWorkers();
      };
      this.retryOrWarn(topic, attempt, error, again, 'could not reload a live state after the subscriber connection came back; its subscribers wait for its next change');
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
      const recheckEnd = () => void checkEnd().catch((error: unknown) => stop(error));
      const moved = end?.movedTopic ? this.listen(end.movedTopic, recheckEnd, false) : undefined;
      if (end) this.endChecks.add(recheckEnd);
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
        this.endChecks.delete(recheckEnd);
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
    this.closed = true;
    await this.pubsub.close();
  }
}
