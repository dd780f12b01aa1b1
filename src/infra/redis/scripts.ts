import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';

const LUA_DIR = fileURLToPath(new URL('../../../lua/', import.meta.url));
const INCLUDE = /^--\s*@include\s+"([\w.-]+)"\s*$/gm;

/** Reads lua/<name>.lua and splices in `-- @include "file.lua"` lines from lua/includes/. */
function readScript(name: string, dir = LUA_DIR): string {
  return readFileSync(`${dir}${name}.lua`, 'utf8').replace(INCLUDE, (_, file: string) =>
    readFileSync(`${dir}includes/${file}`, 'utf8'),
  );
}

function listScripts(dir = LUA_DIR): string[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.lua'))
    .map((file) => file.slice(0, -'.lua'.length))
    .sort();
}

type ScriptCommand = (numberOfKeys: number, ...keysAndArgs: (string | number)[]) => Promise<unknown>;

/**
 * Every script in lua/, defined once on a connection with ioredis `defineCommand`
 * (EVALSHA, falling back to EVAL on NOSCRIPT). Domain bindings call `run` and
 * turn the reply tuple into typed results.
 */
export class Scripts {
  private readonly names: Set<string>;

  constructor(private readonly redis: Redis, dir = LUA_DIR) {
    this.names = new Set(listScripts(dir));
    for (const name of this.names) redis.defineCommand(name, { lua: readScript(name, dir) });
  }

  run(name: string, keys: string[], args: (string | number)[] = []): Promise<unknown> {
    if (!this.names.has(name)) throw new Error(`no script lua/${name}.lua`);
    const command = (this.redis as unknown as Record<string, ScriptCommand>)[name]!;
    return command.call(this.redis, keys.length, ...keys, ...args);
  }
}
