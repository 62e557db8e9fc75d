/**
 * Sockets that have not yet said who they are: an HTTP socket still sending
 * a request's headers (a fresh connection, or a keep-alive one whose next
 * request has begun), a WebSocket before its `connection_init`. Each costs
 * a file and memory while it proves nothing, and a client may hold thousands
 * (slow headers for HTTP_HEADERS_TIMEOUT_MS, WebSockets for
 * WS_CONNECTION_INIT_TIMEOUT_MS, reopened as they are closed); counted against
 * the replica's whole capacity (its open-file limit, MAX_WEBSOCKET_CONNECTIONS)
 * one address could take it all (issue 41 item 2). They count instead against
 * a budget of their own: at most `perAddress` per address (client-address.ts:
 * IPv6 per /64) and `total` for everyone. Past either, the *oldest* waiting
 * sockets of that address (or of everyone) are closed to make room, not the
 * new one: an honest client waits for milliseconds, so a flood mostly evicts
 * itself, and a client behind the same address as a flood still gets in.
 * The check runs once the event loop has polled again, so a burst of
 * connections whose headers are already in the kernel's buffers (accepted
 * together, not yet read) is parsed first and never counted as a flood; a
 * burst from one address larger than `perAddress` whose data is still on the
 * wire may lose its oldest (they are retried by clients as a dropped socket).
 * Idle keep-alive sockets (between requests) and sockets carrying a request
 * are not waiting; HTTP_KEEP_ALIVE_TIMEOUT_MS and HTTP_REQUEST_TIMEOUT_MS
 * bound those.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/** The limits of {@link createWaitingSocketBudget}. */
export interface WaitingSocketLimits {
  /** Waiting sockets one address may hold (0: no cap per address). */
  perAddress: number;
  /** Waiting sockets of every address together. */
  total: number;
}

/** Waiting sockets, per address and in all; see the file comment. */
export interface WaitingSocketBudget {
  /**
   * Counts one waiting socket of `address` (a per-address key; null: none,
   * then only the total applies). If its address or everyone is still over
   * budget once the event loop has polled again, the oldest waiting sockets
   * there are closed with their `close` and stop counting. Returns the
   * function that stops counting this one (idempotent).
   */
  wait(address: string | null, close: () => void): () => void;
  /** Waiting sockets of one address. */
  count(address: string): number;
  /** Waiting sockets of every address. */
  total(): number;
}

interface Waiting {
  address: string | null;
  close: () => void;
}

/** A budget of waiting sockets under `limits`. */
export function createWaitingSocketBudget(limits: WaitingSocketLimits): WaitingSocketBudget {
  // Sets keep insertion order: the first entry is the oldest.
  const everyone = new Set<Waiting>();
  const byAddress = new Map<string, Set<Waiting>>();
  const forget = (waiting: Waiting): boolean => {
    if (!everyone.delete(waiting)) return false;
    if (waiting.address !== null) {
      const mine = byAddress.get(waiting.address);
      mine?.delete(waiting);
      if (mine?.size === 0) byAddress.delete(waiting.address);
    }
    return true;
  };
  const evictOldest = (of: Set<Waiting>, keep: number) => {
    while (of.size > keep) {
      const oldest = of.values().next().value!;
      forget(oldest);
      oldest.close();
    }
  };
  // Addresses that went over budget since the last check; the check is pending while this is non-empty or `overTotal`.
  const overAddresses = new Set<string>();
  let checkPending = false;
  const check = () => {
    checkPending = false;
    for (const address of overAddresses) {
      const mine = byAddress.get(address);
      if (mine !== undefined) evictOldest(mine, limits.perAddress);
    }
    overAddresses.clear();
    evictOldest(everyone, limits.total);
  };
  const scheduleCheck = () => {
    if (checkPending) return;
    checkPending = true;
    // Twice: the first runs before the poll that reads the sockets just accepted, the second after it.
    setImmediate(() => setImmediate(check));
  };
  return {
    wait(address, close) {
      const waiting: Waiting = { address, close };
      everyone.add(waiting);
      if (address !== null) {
        let mine = byAddress.get(address);
        if (mine === undefined) byAddress.set(address, (mine = new Set()));
        mine.add(waiting);
        if (limits.perAddress > 0 && mine.size > limits.perAddress) {
          overAddresses.add(address);
          scheduleCheck();
        }
      }
      if (everyone.size > limits.total) scheduleCheck();
      return () => void forget(waiting);
    },
    count: (address) => byAddress.get(address)?.size ?? 0,
    total: () => everyone.size,
  };
}

/**
 * Counts each socket of `server` as waiting while it sends a request's
 * headers: from its connection until its first request's headers are in, and
 * on a keep-alive socket from the first byte of the next request until its
 * headers are in. An upgraded socket stops here (websocket.ts counts it until
 * `connection_init`). `addressOf` keys the socket's remote address.
 */
export function countWaitingHTTPSockets(server: Server, budget: WaitingSocketBudget, addressOf: (remoteAddress: string | undefined) => string | null): void {
  const states = new WeakMap<Socket, { inRequest: boolean; stop: (() => void) | undefined; onData: () => void }>();
  server.on('connection', (socket: Socket) => {
    const address = addressOf(socket.remoteAddress);
    const state = {
      inRequest: false,
      stop: undefined as (() => void) | undefined,
      // Node's own parser listens first, so a chunk that completes the headers has already set `inRequest`.
      onData: () => {
        if (!state.inRequest && state.stop === undefined) state.stop = budget.wait(address, () => socket.destroy());
      },
    };
    states.set(socket, state);
    state.stop = budget.wait(address, () => socket.destroy());
    socket.on('data', state.onData);
    socket.once('close', () => state.stop?.());
  });
  const headersIn = (socket: Socket) => {
    const state = states.get(socket);
    if (state === undefined) return undefined;
    state.stop?.();
    state.stop = undefined;
    return state;
  };
  server.on('request', (request: IncomingMessage, response: ServerResponse) => {
    const state = headersIn(request.socket as Socket);
    if (state === undefined) return;
    state.inRequest = true;
    const done = () => {
      state.inRequest = false;
    };
    response.once('finish', done);
    response.once('close', done);
  });
  server.on('upgrade', (request: IncomingMessage) => {
    const socket = request.socket as Socket;
    const state = headersIn(socket);
    if (state !== undefined) socket.off('data', state.onData);
  });
}
