/**
 * A TCP proxy on 127.0.0.1 that can freeze (issue 41): while frozen it
 * accepts connections and reads what either side sends, but forwards
 * nothing and closes nothing, as a paused VM, a hung host or a partition
 * that drops packets would look to a client: connects complete in the
 * kernel and are never answered, queries in flight never finish, no error
 * ever comes. `thaw()` forwards everything held, in order, and closes what
 * was closed meanwhile. Used in front of a standby (test/helpers/standby.ts).
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

/** A running proxy: `port` stands for the target's. */
export interface FreezingProxy {
  port: number;
  /** `url` with its port replaced by the proxy's. */
  urlFor(url: string): string;
  /** From now on nothing is forwarded and nothing closed, until `thaw()`. */
  freeze(): void;
  /** Forwards everything held and carries on passing data through. */
  thaw(): void;
  readonly frozen: boolean;
  /** Connections open through the proxy (each a client and a target socket). */
  connections(): number;
  /** Closes the listener and every connection at once. */
  close(): Promise<void>;
}

/** One direction of one connection: chunks (and an end) held while frozen. */
interface Held {
  chunks: Buffer[];
  ended: boolean;
}

/** Starts a proxy in front of `targetPort` on 127.0.0.1. */
export async function startFreezingProxy(targetPort: number): Promise<FreezingProxy> {
  let frozen = false;
  const pairs = new Set<{ client: Socket; target: Socket; toTarget: Held; toClient: Held }>();

  const flush = (held: Held, to: Socket) => {
    for (const chunk of held.chunks.splice(0)) to.write(chunk);
    if (held.ended) to.end();
  };

  const server: Server = createServer((client) => {
    const target = connect({ host: '127.0.0.1', port: targetPort });
    const pair = { client, target, toTarget: { chunks: [], ended: false } as Held, toClient: { chunks: [], ended: false } as Held };
    pairs.add(pair);
    const pass = (from: Socket, to: Socket, held: Held) => {
      from.on('data', (chunk) => {
        if (frozen || held.chunks.length > 0) held.chunks.push(chunk);
        else to.write(chunk);
      });
      from.on('end', () => {
        held.ended = true;
        if (!frozen) flush(held, to);
      });
    };
    pass(client, target, pair.toTarget);
    pass(target, client, pair.toClient);
    const gone = () => {
      // A reset or a destroyed socket: the other side goes too, but only once thawed (a frozen host tells nobody).
      if (frozen) return;
      client.destroy();
      target.destroy();
      pairs.delete(pair);
    };
    for (const socket of [client, target]) {
      socket.on('error', () => {});
      socket.on('close', gone);
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;

  return {
    port,
    urlFor: (url) => {
      const parsed = new URL(url);
      parsed.port = String(port);
      return parsed.toString();
    },
    freeze: () => {
      frozen = true;
    },
    thaw: () => {
      frozen = false;
      for (const pair of [...pairs]) {
        if (pair.client.destroyed || pair.target.destroyed) {
          pair.client.destroy();
          pair.target.destroy();
          pairs.delete(pair);
          continue;
        }
        flush(pair.toTarget, pair.target);
        flush(pair.toClient, pair.client);
      }
    },
    get frozen() {
      return frozen;
    },
    connections: () => pairs.size,
    close: async () => {
      for (const { client, target } of pairs) {
        client.destroy();
        target.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
