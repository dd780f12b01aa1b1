import { type Server, type Socket, createConnection, createServer } from 'node:net';

/** A TCP proxy to the shared PostgreSQL that the test can cut (refusing and dropping connections) and restore. */
export async function startCuttableProxy(target: URL) {
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = createConnection(Number(target.port || 5432), target.hostname);
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.pipe(to);
      from.on('error', () => to.destroy());
      from.on('close', () => {
        sockets.delete(from);
        to.destroy();
      });
    }
  });
  const listen = (port: number) => new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  await listen(0);
  const { port } = server.address() as { port: number };
  return {
    port,
    async cut() {
      const closed = new Promise((resolve) => server.close(resolve));
      for (const socket of sockets) socket.destroy();
      await closed;
    },
    restore: () => listen(port),
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/** `databaseUrl` (its schema kept) through the proxy on `port`. */
export function throughProxy(databaseUrl: string, port: number): string {
  const url = new URL(databaseUrl);
  url.host = `127.0.0.1:${port}`;
  return url.toString();
}
