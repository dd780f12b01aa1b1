import { once } from 'node:events';
import { type Server, createServer } from 'node:http';
import { type AddressInfo, type Socket, connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { prepareAcceptors } from '../src/acceptors.ts';
import { createLogger } from '../src/infra/logger.ts';

describe('extra acceptors on a listening socket', () => {
  let server: Server;
  let extra: import('node:net').Server[];
  const accepted: Socket[] = [];

  beforeAll(async () => {
    server = createServer((_req, res) => res.end('ok'));
    server.on('connection', (socket: Socket) => accepted.push(socket));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    extra = await prepareAcceptors(7, createLogger('silent')).attach(server);
  });

  afterAll(async () => {
    await Promise.all([server, ...extra].map((listener) => new Promise((resolve) => listener.close(resolve))));
  });

  it('are that many more listeners on the same port, handing their connections to the server as if it had accepted them', async () => {
    expect(extra).toHaveLength(7);
    for (const listener of extra) expect((listener.address() as AddressInfo).port).toBe((server.address() as AddressInfo).port);
    const answers = await Promise.all(
      Array.from({ length: 200 }, async () => {
        const socket = connect((server.address() as AddressInfo).port, '127.0.0.1');
        await once(socket, 'connect');
        socket.end('GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
        let text = '';
        for await (const chunk of socket) text += String(chunk);
        return text;
      }),
    );
    expect(answers.filter((answer) => answer.startsWith('HTTP/1.1 200') && answer.endsWith('ok'))).toHaveLength(200);
    expect(accepted).toHaveLength(200);
    // Accepted through the duplicates too, with the options the HTTP server gives its own sockets.
    const throughExtra = accepted.filter((socket) => (socket as unknown as { _server: unknown })._server !== server);
    expect(throughExtra.length).toBeGreaterThan(0);
    for (const socket of throughExtra) expect(socket.allowHalfOpen).toBe(true);
  });
});
