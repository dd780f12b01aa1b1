import type { Redis } from 'ioredis';
import { sleep, waitFor } from './poll.ts';

/** Closes every connection named `name` (CLIENT LIST, then CLIENT KILL ID) on each of `servers` (the nodes of a cluster); how many there were. */
export async function killConnections(servers: Redis[], name: string): Promise<number> {
  let killed = 0;
  for (const server of servers) {
    const list = (await server.client('LIST')) as string;
    const ids = list
      .split('\n')
      .filter((line) => line.includes(` name=${name} `))
      .map((line) => /^id=(\d+)/.exec(line)![1]!);
    for (const id of ids) await server.client('KILL', 'ID', id);
    killed += ids.length;
  }
  return killed;
}

/**
 * Runs `change` while the connections named `name` are down: they are killed, then killed
 * again as they reconnect, until `change` is done and what it publishes is surely out
 * (`settleMs`), so every message meant for them then is lost. A Redis of the test's own
 * (or cluster): other files' servers name their connections the same.
 */
export async function whileDown<T>(servers: Redis[], name: string, change: () => Promise<T>, settleMs = 300): Promise<T> {
  let down = true;
  let kills = 0;
  const keepingDown = (async () => {
    while (down) {
      kills += await killConnections(servers, name);
      await sleep(2);
    }
  })();
  try {
    await waitFor(`a connection named ${name} to kill`, () => kills > 0, { intervalMs: 1 });
    const result = await change();
    await sleep(settleMs);
    return result;
  } finally {
    down = false;
    await keepingDown;
  }
}
