import { PubSubEngine } from 'graphql-subscriptions';
import type { Cluster } from 'ioredis';

/** Runs where the channel's slot lives: PUBSUB SHARDNUMSUB itself names no key, so ioredis would send it to any node. */
const SHARD_LISTENERS = "return redis.call('PUBSUB', 'SHARDNUMSUB', KEYS[1])[2]";

/**
 * Live events over a Redis Cluster with sharded pub/sub (SPUBLISH/SSUBSCRIBE, Redis 7):
 * a message goes to the one shard that owns its channel's slot, where classic PUBLISH
 * would copy every message to every node over the cluster bus. graphql-redis-subscriptions
 * only sends SUBSCRIBE/PUBLISH, hence this adapter.
 *
 * Channel names are given as to any ioredis command: the clients add their key prefix
 * (SSUBSCRIBE's channels count as keys), and it is taken off the channels messages arrive on.
 * The subscriber must be created with `shardedSubscribers` (one connection per primary).
 */
export class ShardedPubSub extends PubSubEngine {
  private readonly handlers = new Map<number, { channel: string; onMessage: (message: unknown) => void }>();
  private readonly byChannel = new Map<string, { ids: Set<number>; subscribed: Promise<unknown> }>();
  private nextId = 0;
  private readonly keyPrefix: string;

  constructor(
    private readonly publisher: Cluster,
    private readonly subscriber: Cluster,
  ) {
    super();
    this.keyPrefix = subscriber.options.keyPrefix ?? '';
    subscriber.on('smessage', (channel: string, message: string) => {
      const listeners = this.byChannel.get(channel.slice(this.keyPrefix.length));
      if (!listeners) return;
      const payload: unknown = JSON.parse(message);
      for (const id of listeners.ids) this.handlers.get(id)?.onMessage(payload);
    });
  }

  async publish(channel: string, payload: unknown): Promise<void> {
    await this.publisher.spublish(channel, JSON.stringify(payload));
  }

  /** Resolves once the shard confirmed the channel; its id is for `unsubscribe`. */
  async subscribe(channel: string, onMessage: (message: never) => void): Promise<number> {
    const id = this.nextId++;
    this.handlers.set(id, { channel, onMessage: onMessage as (message: unknown) => void });
    let listeners = this.byChannel.get(channel);
    if (!listeners) {
      listeners = { ids: new Set(), subscribed: this.subscriber.ssubscribe(channel) };
      this.byChannel.set(channel, listeners);
    }
    listeners.ids.add(id);
    try {
      await listeners.subscribed;
    } catch (error) {
      this.unsubscribe(id);
      throw error;
    }
    return id;
  }

  /** The shard's channel is dropped when its last local listener leaves. */
  unsubscribe(id: number): void {
    const handler = this.handlers.get(id);
    if (!handler) return;
    this.handlers.delete(id);
    const listeners = this.byChannel.get(handler.channel);
    if (!listeners) return;
    listeners.ids.delete(id);
    if (listeners.ids.size > 0) return;
    this.byChannel.delete(handler.channel);
    this.subscriber.sunsubscribe(handler.channel).catch(() => {
      // A channel left subscribed only costs messages nobody reads; the connection's end drops it.
    });
  }

  /** How many connections listen on the channel, counted on its shard. */
  async listeners(channel: string): Promise<number> {
    return Number(await this.publisher.eval(SHARD_LISTENERS, 1, channel));
  }

  async close(): Promise<void> {
    await Promise.all([this.publisher.quit(), this.subscriber.quit()]);
  }
}
