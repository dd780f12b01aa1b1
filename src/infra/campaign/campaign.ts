import type { CampaignDeps } from '../../domain/deps.ts';
import type { AnnounceEntry, JournalEntry, JournalHandler, PersistOutcome } from '../journal/journal.ts';
import type { StateStream } from '../redis/pubsub.ts';
import { type RebuildKeys, RebuildTimeoutError, rebuildOnce, underRebuildLock } from './rebuild.ts';

/** The keys the runtime needs of a campaign; a flow's own keys sit beside them. */
export interface CampaignKeys extends RebuildKeys {
  /** The stream its scripts journal changes to (several campaigns may share one). */
  journal: string;
}

/** What a reply means when the campaign's keys are gone: rebuild, then call again. */
export type Missing = { kind: 'missing' };

/** The live state of a campaign, for flows whose changes are pushed to subscribers. */
export interface LiveRules<Id, State> extends Omit<StateStream<State>, 'load'> {
  topic(id: Id): string;
  /** The state subscribers see, loaded when a change is published and when one subscribes. */
  state(id: Id): Promise<State | null>;
  /**
   * The campaigns a journaled call's entry changed, published once its commit is over,
   * even one that failed: Redis changed already, and a campaign it closed changes no
   * more, so no later change would bring its subscribers the final state. It must not
   * throw, even for an entry its kind refuses. Unset: the flow publishes what it decides to.
   */
  changedBy?(entry: JournalEntry): Id[];
}

/**
 * A flow's rules: its keys, its snapshot, how a snapshot is written to Redis. The
 * runtime owns everything around them: rebuilding under the rebuild lock, the
 * PostgreSQL-first changes, journaled calls, publishing.
 */
export interface CampaignRules<Id, Snapshot, State = never> {
  /** What the campaign is called in logs: 'red packet'. */
  name: string;
  keys(id: Id): CampaignKeys;
  /** What a rebuild writes; null when PostgreSQL does not know the campaign. */
  load(id: Id): Promise<Snapshot | null>;
  /** Writes every key in one MULTI/EXEC, `meta` included, so no script sees half a campaign. */
  write(snapshot: Snapshot): Promise<void>;
  /** Until when (Redis time, ms) the sweeper watches the campaign's journal stream. */
  retainUntilMs(snapshot: Snapshot): number;
  /** Of a stream several campaigns share, the entries that are this one's (default: all). */
  ownsEntry?(id: Id, entry: JournalEntry): boolean;
  live?: LiveRules<Id, State>;
}

export interface JournaledCall<Reply extends { kind: string }, Answer> {
  /** The script call; it replies `missing` when the campaign's keys are gone. */
  call: () => Promise<Reply | Missing>;
  /** The entry a reply journaled, to be committed before the reply is answered; null for none. */
  entryOf: (reply: Reply) => JournalEntry | null;
  /** After PostgreSQL refused an entry (its keys are dropped for a rebuild): an answer that ends the retries. */
  onConflict?: () => Promise<Answer | undefined>;
  /**
   * What a `missing` reply rebuilds, for a script whose keys span several campaigns
   * (default: this campaign); false when one of them does not exist.
   */
  rebuild?: () => Promise<boolean>;
  /** Thrown when every attempt conflicted. */
  unavailable: () => Error;
}

/** How many times a call whose keys vanished rebuilds them, and a conflicting entry is tried again. */
const ATTEMPTS = 3;

/**
 * The one mechanism every flow runs on. A campaign's state lives in Redis keys that
 * scripts change atomically, journaling each change; PostgreSQL holds what is committed
 * and is what a rebuild reads. A flow states its rules; the rules that keep the two in
 * step (the first write of a campaign under the rebuild lock, a stream committed before
 * it is rebuilt, conflicts forgotten and retried) live here once.
 */
export class Campaign<Id, Snapshot, State = never> {
  constructor(
    private readonly deps: CampaignDeps,
    private readonly rules: CampaignRules<Id, Snapshot, State>,
  ) {}

  /**
   * Registers how a journal entry kind is persisted. An entry PostgreSQL turns down (a
   * conflict, a dead letter) was decided by keys that disagree with PostgreSQL: the
   * keys of the campaigns it names are dropped, and the next call rebuilds them. A
   * script whose change reaches past this campaign's keys (another campaign's, or a key
   * of no campaign, such as a remembered answer) names those in `alsoDrops`. An entry
   * the journal commits for a caller that may be gone (AnnounceEntry) publishes the
   * campaigns it names, and runs `announce`, the rest of what its caller would have done.
   */
  persistsWith(handler: JournalHandler, campaignsOf: (entry: JournalEntry) => Id[], more: { alsoDrops?: (entry: JournalEntry) => string[]; announce?: AnnounceEntry } = {}): void {
    this.deps.journal.register(
      handler,
      async (entry) => this.forget(campaignsOf(entry), more.alsoDrops?.(entry)),
      async (entry) => {
        if (this.rules.live) for (const id of campaignsOf(entry)) this.publish(id);
        await more.announce?.(entry);
      },
    );
  }

  /** Drops the campaigns' keys, and any others named, in one DEL; the next call rebuilds them from PostgreSQL. */
  async forget(ids: Id[], alsoDrops: string[] = []): Promise<void> {
    const keys = [...ids.map((id) => this.rules.keys(id).meta), ...alsoDrops];
    if (keys.length > 0) await this.deps.redis.del(...keys);
  }

  /**
   * Creates a campaign: `persist` writes it to PostgreSQL and returns its snapshot, then
   * its keys are written, both under the rebuild lock, so a rebuild racing the creation
   * can neither miss it nor write it twice.
   */
  create(id: Id, persist: () => Promise<Snapshot>): Promise<Snapshot> {
    return this.changeDurably(id, async () => {
      const snapshot = await persist();
      await this.install(id, snapshot);
      return snapshot;
    });
  }

  /**
   * Runs a change made in PostgreSQL first and in Redis second (both inside `change`)
   * under the rebuild lock: a rebuild that read PostgreSQL just before could otherwise
   * write its older copy over the change, and one just after apply it twice.
   */
  changeDurably<T>(id: Id, change: () => Promise<T>): Promise<T> {
    return underRebuildLock(this.deps, this.rules.keys(id).rebuilding, change);
  }

  /** Rebuilds the campaign's keys from PostgreSQL, once however many callers ask; false if it does not exist. */
  rebuild(id: Id): Promise<boolean> {
    return rebuildOnce(this.deps, this.rules.keys(id), async () => (await this.reload(id)) !== null);
  }

  /**
   * Inside `changeDurably`, whose lock the caller holds: drops the campaign's keys and
   * rebuilds them, for a change whose Redis half cannot be applied on top of them. With
   * the keys gone no script changes the campaign, so once its stream is committed
   * PostgreSQL holds every change. The snapshot written; null if the campaign does not exist.
   */
  async rebuildLocked(id: Id): Promise<Snapshot | null> {
    await this.forget([id]);
    return this.reload(id);
  }

  /** A value read from Redis, the campaign rebuilt if its keys are gone; null if it does not exist. */
  async read<T>(id: Id, read: () => Promise<T | null>): Promise<T | null> {
    return (await read()) ?? ((await this.rebuild(id)) ? read() : null);
  }

  /** A script call, the campaign rebuilt and the call made again while it answers `missing`; null if it does not exist. */
  call<Reply extends { kind: string }>(id: Id, script: () => Promise<Reply | Missing>): Promise<Reply | null> {
    return this.callRebuilding(id, script);
  }

  /**
   * A script call whose journaled change is committed to PostgreSQL before it is
   * answered (the durable ack). A conflict (PostgreSQL holds another outcome: Redis lost
   * data and was rebuilt while changes were in flight) dropped the campaign's keys; the
   * call is made again on the rebuilt ones. Null if the campaign does not exist.
   */
  async journaled<Reply extends { kind: string }, Answer = never>(id: Id, spec: JournaledCall<Reply, Answer>): Promise<Reply | Answer | null> {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const reply = await this.callRebuilding(id, spec.call, spec.rebuild);
      if (!reply) return null;
      const entry = spec.entryOf(reply);
      if (!entry || (await this.commitAndPublish(entry)) === 'persisted') return reply;
      this.deps.log.warn({ campaign: this.rules.name, id, reply: reply.kind }, 'a change conflicted with PostgreSQL; rebuilding and trying again');
      const answer = await spec.onConflict?.();
      if (answer !== undefined) return answer;
    }
    throw spec.unavailable();
  }

  /** Pushes the campaign's state to its subscribers, bursts merged into one event. */
  publish(id: Id): void {
    const live = this.liveRules();
    this.deps.events.publishLatest(live.topic(id), () => live.state(id));
  }

  /** The state now, then after every change, until a final state. */
  watch(id: Id): AsyncIterableIterator<State> {
    const live = this.liveRules();
    return this.deps.events.currentThenChanges(live.topic(id), { ...live, load: () => live.state(id) });
  }

  /** Commits a journaled entry, then publishes the campaigns it changed (`live.changedBy`), whatever came of the commit. */
  private async commitAndPublish(entry: JournalEntry): Promise<PersistOutcome> {
    try {
      return await this.deps.journal.commit(entry);
    } finally {
      for (const id of this.rules.live?.changedBy?.(entry) ?? []) this.publish(id);
    }
  }

  private liveRules(): LiveRules<Id, State> {
    if (!this.rules.live) throw new Error(`the ${this.rules.name} has no live state`);
    return this.rules.live;
  }

  /** `rebuild` replaces the campaign's own rebuild (JournaledCall.rebuild). */
  private async callRebuilding<Reply extends { kind: string }>(id: Id, script: () => Promise<Reply | Missing>, rebuild?: () => Promise<boolean>): Promise<Reply | null> {
    for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
      const reply = await script();
      if (reply.kind !== 'missing') return reply as Reply;
      if (!(await (rebuild ? rebuild() : this.rebuild(id)))) return null;
    }
    throw new RebuildTimeoutError(`the ${this.rules.name}'s keys vanished again right after each rebuild`);
  }

  /** Loads the campaign from PostgreSQL and writes its keys; the caller holds the rebuild lock. */
  private async reload(id: Id): Promise<Snapshot | null> {
    const keys = this.rules.keys(id);
    const owns = this.rules.ownsEntry;
    // Entries still in the stream are changes Redis made before it lost the other
    // keys: committed first, PostgreSQL counts them in the snapshot.
    await this.deps.journal.commitStream(keys.journal, owns && ((entry) => owns(id, entry)));
    const snapshot = await this.rules.load(id);
    if (!snapshot) return null;
    await this.install(id, snapshot);
    // What Redis lost (a lock, say) changed the state without any change to publish it:
    // its subscribers would wait on the lost state until the next change.
    if (this.rules.live) this.publish(id);
    return snapshot;
  }

  private async install(id: Id, snapshot: Snapshot): Promise<void> {
    // Watched before the keys exist, so no change can be journaled unwatched.
    await this.deps.journal.trackStream(this.rules.keys(id).journal, this.rules.retainUntilMs(snapshot));
    await this.rules.write(snapshot);
  }
}
