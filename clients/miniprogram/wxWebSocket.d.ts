/** The SocketTask `wx.connectSocket` returns (the part the adapter uses). */
export interface SocketTask {
  onOpen(listener: (result: { header?: Record<string, string> }) => void): void;
  onMessage(listener: (message: { data: string | ArrayBuffer }) => void): void;
  onError(listener: (error: { errMsg?: string }) => void): void;
  onClose(listener: (event: { code?: number; reason?: string }) => void): void;
  send(options: { data: string | ArrayBuffer }): void;
  close(options: { code?: number; reason?: string }): void;
}

export interface MiniProgramSockets {
  connectSocket(options: { url: string; protocols?: string[] }): SocketTask;
}

/** A WebSocket class over `wx.connectSocket`, for graphql-ws's `webSocketImpl`. */
export function wxWebSocket(wx: MiniProgramSockets): new (url: string, protocols?: string | string[]) => unknown;
