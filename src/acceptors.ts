import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { type Server, createServer } from 'node:net';
import type { Logger } from './infra/logger.ts';

/**
 * More ways into the listening socket, for bursts of new connections.
 *
 * libuv (1.45 on, so Node 20) accepts one connection per listening descriptor per turn of
 * the event loop. A busy server's turn lasts tens of milliseconds, so a flash crowd opening
 * its pages waits in the kernel's accept queue, seconds at the back of it, while the server
 * serves the connections it already has. Each extra descriptor of the same socket, watched
 * on its own, accepts one more connection per turn.
 *
 * Node 20 can neither duplicate a descriptor nor bind a port twice (`reusePort` came in
 * 22.12), but a handle sent to another process over IPC and sent back arrives as a new
 * descriptor of the same socket. The raw handle is sent, not the server: a child given a
 * server would listen on it, and whatever it accepted before closing would be lost.
 */
export interface Acceptors {
  /**
   * Extra listeners on `server`'s socket, each handing what it accepts to `server` as its
   * own connection. Never fails: on trouble it logs and returns those it made.
   */
  attach(server: Server): Promise<Server[]>;
}

/** What a net.Server gives the sockets it accepts: http.Server's differ from net's defaults (half-open allowed, no Nagle). */
interface AcceptOptions {
  allowHalfOpen: boolean;
  noDelay: boolean;
  keepAlive: boolean;
  keepAliveInitialDelay: number;
  highWaterMark: number;
  pauseOnConnect: boolean;
}

const ECHO = "process.on('message', (message, handle) => process.send(message, handle, () => handle.close()))";
const ECHO_TIMEOUT_MS = 5000;

/**
 * Starts the child that sends handles back now, so its start (a tenth of a second) overlaps
 * the server's own. Not for cluster workers: their server's handle is the primary's.
 */
export function prepareAcceptors(count: number, log: Logger): Acceptors {
  const none: Acceptors = { attach: async () => [] };
  if (count <= 0) return none;
  let echo: ChildProcess;
  try {
    echo = spawn(process.execPath, ['-e', ECHO], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  } catch (error) {
    // Node's permission model, say, forbids child processes: one descriptor still serves.
    log.warn({ err: error }, 'cannot start the process that adds acceptors; accepting on one descriptor');
    return none;
  }
  let failure: Error | undefined;
  echo.on('error', (error) => (failure = error));
  // It dies with this process whatever happens; it must not keep it alive.
  echo.unref();
  echo.channel?.unref();
  return {
    async attach(server) {
      const handle = (server as unknown as { _handle: object })._handle;
      const { allowHalfOpen, noDelay, keepAlive, keepAliveInitialDelay, highWaterMark, pauseOnConnect } = server as unknown as AcceptOptions;
      const listeners: Server[] = [];
      try {
        while (listeners.length < count) {
          if (failure) throw failure;
          const echoed = once(echo, 'message', { signal: AbortSignal.timeout(ECHO_TIMEOUT_MS) });
          echo.send('dup', handle as never);
          const [, duplicate] = (await echoed) as [string, object];
          const listener = createServer({ allowHalfOpen, noDelay, keepAlive, keepAliveInitialDelay, highWaterMark, pauseOnConnect });
          listener.on('connection', (socket) => server.emit('connection', socket));
          const listening = once(listener, 'listening');
          listener.listen(duplicate);
          await listening;
          // A failed accept (EMFILE) is for the server to log; with no listener it would crash the process.
          listener.on('error', (error) => server.emit('error', error));
          listeners.push(listener);
        }
      } catch (error) {
        log.warn({ err: error, acceptors: listeners.length + 1 }, 'could not add every acceptor to the listening socket; serving with fewer');
      } finally {
        echo.kill();
      }
      return listeners;
    },
  };
}
