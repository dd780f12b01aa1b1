import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { projectFile } from '../../projectFiles.ts';
import { type JournalEntry, journalEntry } from '../journal/journal.ts';
import type { RedisClient } from './connection.ts';

const LUA_DIR = projectFile('lua');
const INCLUDE = /^--\s*@include\s+"([\w.-]+)"\s*$/gm;
/** A header line `KEYS[n] …`: the script's documented keys, which a binding must pass in that number. */
const KEY_LINE = /^\s*KEYS\[(\d+)\]/gm;

/** Reads lua/<name>.lua and splices in `-- @include "file.lua"` lines from lua/includes/. */
function readScript(name: string, dir: string): string {
  return readFileSync(join(dir, `${name}.lua`), 'utf8').replace(INCLUDE, (_, file: string) => readFileSync(join(dir, 'includes', file), 'utf8'));
}

/** How many keys the script's header documents (its `--[[ … ]]` comment). */
function headerKeyCount(source: string): number {
  const header = /^--\[\[([\s\S]*?)\]\]/.exec(source)?.[1] ?? '';
  return Math.max(0, ...[...header.matchAll(KEY_LINE)].map((match) => Number(match[1])));
}

/** The values after a reply's tag, read by position with the type the script documents. */
export class ReplyValues {
  /** `reply` is the whole reply; its tag, at 0, is skipped, so index 0 is the first value. */
  constructor(
    private readonly reply: unknown[],
    private readonly script: string,
  ) {}

  private at(index: number): unknown {
    return this.reply[index + 1];
  }

  num(index: number): number {
    const value = this.at(index);
    if (typeof value === 'number') return value;
    if (typeof value === 'string' && value !== '' && Number.isFinite(Number(value))) return Number(value);
    throw new Error(`${this.script}: reply value ${index} is not a number: ${JSON.stringify(value)}`);
  }

  /** A number, or null where the script answered nil (a Lua false inside a reply). */
  numOrNull(index: number): number | null {
    return this.at(index) === null ? null : this.num(index);
  }

  str(index: number): string {
    const value = this.at(index);
    if (typeof value === 'string') return value;
    if (typeof value === 'number') return String(value);
    throw new Error(`${this.script}: reply value ${index} is not a string: ${JSON.stringify(value)}`);
  }

  /** A journal entry the script appended: its id at `index`, its flat fields after it; null when the id is ''. */
  entry(index: number, stream: string): JournalEntry | null {
    const id = this.str(index);
    return id === '' ? null : journalEntry(stream, id, this.at(index + 1) as string[]);
  }

  /** A nested list at `index`, read with the same accessors (its index 0 is its first value). */
  nested(index: number): ReplyValues {
    const value = this.at(index);
    if (Array.isArray(value)) return new ReplyValues([null, ...value], this.script);
    throw new Error(`${this.script}: reply value ${index} is not a list: ${JSON.stringify(value)}`);
  }

  strings(index: number): string[] {
    const value = this.at(index);
    if (Array.isArray(value)) return value.map(String);
    throw new Error(`${this.script}: reply value ${index} is not a list: ${JSON.stringify(value)}`);
  }
}

type Decoders<Key extends string> = Record<string, (values: ReplyValues, keys: Record<Key, string>) => object>;

/** A decoded reply: `{ kind: <tag>, …what its decoder read }`. */
export type ReplyOf<D> = { [Tag in keyof D & string]: { kind: Tag } & (D[Tag] extends (...args: never[]) => infer R ? R : never) }[keyof D & string];

/**
 * One script's typed binding: the keys it takes, in the order its header lists them, and
 * one decoder per reply tag. Every script replies `{'<tag>', …}`.
 */
export interface ScriptBinding<Key extends string, D extends Decoders<Key>> {
  name: string;
  keys: readonly Key[];
  replies: D;
}

export function defineScript<const Key extends string, const D extends Decoders<Key>>(name: string, keys: readonly Key[], replies: D): ScriptBinding<Key, D> {
  return { name, keys, replies };
}

interface LoadedScript {
  lua: string;
  sha: string;
  numberOfKeys: number;
}

const isNoScript = (error: unknown) => error instanceof Error && error.message.startsWith('NOSCRIPT');

/**
 * Every script in lua/, run with EVALSHA, and with EVAL when the node answers NOSCRIPT.
 * Not ioredis `defineCommand`: it sends EVALSHA to a connection once it has sent EVAL
 * there, even when that EVAL was refused (CLUSTERDOWN, TRYAGAIN) and is being retried,
 * so a command retried through a failover ends in NOSCRIPT. Callers go through typed
 * bindings: a binding whose keys disagree with its script's header is refused the first
 * time it is used, and a reply with an unknown tag is an error, in this one place.
 */
export class Scripts {
  private readonly loaded = new Map<string, LoadedScript>();
  private readonly checked = new WeakSet<object>();

  constructor(
    private readonly redis: RedisClient,
    dir = LUA_DIR,
  ) {
    for (const file of readdirSync(dir).filter((name) => name.endsWith('.lua'))) {
      const name = file.slice(0, -'.lua'.length);
      const lua = readScript(name, dir);
      this.loaded.set(name, { lua, sha: createHash('sha1').update(lua).digest('hex'), numberOfKeys: headerKeyCount(lua) });
    }
  }

  /** Throws unless the binding names a script here and passes the keys its header documents. */
  check(binding: ScriptBinding<string, Decoders<string>>): void {
    if (this.checked.has(binding)) return;
    const documented = this.loaded.get(binding.name)?.numberOfKeys;
    if (documented === undefined) throw new Error(`no script lua/${binding.name}.lua`);
    if (documented !== binding.keys.length) {
      throw new Error(`lua/${binding.name}.lua documents ${documented} keys; its binding passes ${binding.keys.length} (${binding.keys.join(', ')})`);
    }
    this.checked.add(binding);
  }

  async call<Key extends string, D extends Decoders<Key>>(binding: ScriptBinding<Key, D>, keys: Record<Key, string>, args: (string | number)[] = []): Promise<ReplyOf<D>> {
    this.check(binding as unknown as ScriptBinding<string, Decoders<string>>);
    const script = this.loaded.get(binding.name)!;
    // One argument list, built in place: this runs for every request of every flow.
    const keyCount = binding.keys.length;
    const argv: (string | number)[] = [];
    for (let i = 0; i < keyCount; i++) argv.push(keys[binding.keys[i]!]);
    for (const arg of args) argv.push(arg);
    let reply: unknown;
    try {
      reply = await this.redis.evalsha(script.sha, keyCount, ...argv);
    } catch (error) {
      // A node that never ran the script, or lost its cache (a restart, a promoted replica).
      if (!isNoScript(error)) throw error;
      reply = await this.redis.eval(script.lua, keyCount, ...argv);
    }
    const tag = Array.isArray(reply) ? reply[0] : undefined;
    const decode = typeof tag === 'string' ? binding.replies[tag] : undefined;
    if (!decode) throw new Error(`${binding.name} returned an unknown reply: ${JSON.stringify(reply)}`);
    const decoded = decode(new ReplyValues(reply as unknown[], binding.name), keys) as { kind?: string };
    decoded.kind = tag;
    return decoded as ReplyOf<D>;
  }
}
