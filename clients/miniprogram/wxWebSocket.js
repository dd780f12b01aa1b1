/*
 * graphql-ws over a mini-program's socket: WeChat (and its look-alikes) have no WebSocket
 * class, only wx.connectSocket, which returns a SocketTask. This wraps the SocketTask in the
 * small part of the WebSocket interface graphql-ws uses, so its own client runs unchanged:
 *
 *   import { createClient } from 'graphql-ws';
 *   import { wxWebSocket } from './wxWebSocket.js';
 *   const client = createClient({ url: 'wss://shop.example.com/graphql', webSocketImpl: wxWebSocket(wx),
 *                                 connectionParams: () => ({ authorization: `Bearer ${token}` }) });
 *
 * graphql-ws asks for the `graphql-transport-ws` subprotocol; it is passed on to connectSocket.
 */

const CONNECTING = 0;
const OPEN = 1;
const CLOSING = 2;
const CLOSED = 3;

/**
 * A WebSocket class over `wx.connectSocket`.
 * @param {{ connectSocket(options: { url: string, protocols?: string[] }): SocketTask }} wx the mini-program's `wx` (or `tt`, `my`… with the same API)
 * @returns {new (url: string, protocols?: string | string[]) => object}
 */
export function wxWebSocket(wx) {
  return class WxWebSocket {
    static CONNECTING = CONNECTING;
    static OPEN = OPEN;
    static CLOSING = CLOSING;
    static CLOSED = CLOSED;

    constructor(url, protocols) {
      this.url = url;
      this.readyState = CONNECTING;
      this.protocol = '';
      this.onopen = null;
      this.onmessage = null;
      this.onclose = null;
      this.onerror = null;
      const list = protocols === undefined ? [] : Array.isArray(protocols) ? protocols : [protocols];
      this.task = wx.connectSocket({ url, protocols: list });
      this.task.onOpen((result) => {
        this.readyState = OPEN;
        // The protocol the server chose, where the platform reports it.
        this.protocol = result?.header?.['sec-websocket-protocol'] ?? list[0] ?? '';
        this.onopen?.({ type: 'open' });
      });
      this.task.onMessage(({ data }) => this.onmessage?.({ type: 'message', data }));
      // A SocketTask's error (a failed connect, a dropped network) is a connection lost:
      // graphql-ws would take an error event as final and never retry, so it gets the close
      // a browser's WebSocket sends after its error instead, once.
      this.task.onError((error) => this.reportClose(1006, error?.errMsg ?? 'socket error'));
      // graphql-ws reads the close code to tell a retryable loss from a refusal.
      this.task.onClose(({ code, reason }) => this.reportClose(code ?? 1006, reason ?? ''));
    }

    reportClose(code, reason) {
      if (this.readyState === CLOSED) return;
      this.readyState = CLOSED;
      this.onclose?.({ type: 'close', code, reason, wasClean: code === 1000 });
    }

    send(data) {
      this.task.send({ data });
    }

    close(code = 1000, reason = '') {
      if (this.readyState === CLOSING || this.readyState === CLOSED) return;
      this.readyState = CLOSING;
      this.task.close({ code, reason });
    }
  };
}
