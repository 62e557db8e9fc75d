/**
 * What a process asks of Postgres, seen on the wire: a loopback TCP proxy in
 * front of the database that reads the client's half of the protocol and
 * records each statement run by the extended protocol (Parse/Bind/Execute, as
 * `pg` runs every parameterised query): its name ('' when unnamed), its text
 * (from the Parse of that name on any connection) and its parameters as sent
 * (text format; a binary one as hex); and each simple query (`BEGIN`, `SET`,
 * a query without parameters), unnamed with none. The benchmark uses it to check that a
 * baseline sends the app's very statements (bench/baselines/mercurius.ts),
 * not statements that resemble them.
 *
 *   const capture = await startSQLCapture(databaseURL);
 *   // start a process on capture.url, then:
 *   capture.mark(); await oneRequest(); const statements = capture.since();
 *   await capture.close();
 */
import { createConnection, createServer, type Socket } from 'node:net';

/** One statement as a client ran it. */
export interface CapturedStatement {
  name: string;
  text: string;
  parameters: (string | null)[];
}

export interface SQLCapture {
  /** The database URL through the proxy (same database, user and options). */
  url: string;
  /** Starts a window: {@link since} returns what was run after the last mark. */
  mark(): void;
  /** The statements run since the last {@link mark}, in the order their Bind or Query messages arrived. */
  since(): CapturedStatement[];
  close(): Promise<void>;
}

const SSL_REQUEST = 80877103;
const GSS_REQUEST = 80877104;

/** Starts the proxy on a free loopback port in front of the server of `databaseURL`. */
export async function startSQLCapture(databaseURL: string): Promise<SQLCapture> {
  const target = new URL(databaseURL);
  const texts = new Map<string, string>();
  let bound: CapturedStatement[] = [];
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: target.hostname, port: Number(target.port || 5432) });
    sockets.add(client).add(upstream);
    client.on('close', () => sockets.delete(client));
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('data', (chunk) => client.write(chunk));
    upstream.on('end', () => client.end());
    client.on('end', () => upstream.end());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    let buffer = Buffer.alloc(0);
    let started = false;
    // The last unnamed Parse of this connection: an unnamed Bind runs it.
    let unnamed = '';
    client.on('data', (chunk: Buffer) => {
      upstream.write(chunk);
      buffer = Buffer.concat([buffer, chunk]);
      for (;;) {
        if (!started) {
          // Startup, SSL and GSS requests: a length and a code, no type byte.
          if (buffer.length < 8) return;
          const length = buffer.readInt32BE(0);
          if (buffer.length < length) return;
          const code = buffer.readInt32BE(4);
          buffer = buffer.subarray(length);
          if (code !== SSL_REQUEST && code !== GSS_REQUEST) started = true;
          continue;
        }
        if (buffer.length < 5) return;
        const length = buffer.readInt32BE(1);
        if (buffer.length < 1 + length) return;
        const type = String.fromCharCode(buffer[0]!);
        const body = buffer.subarray(5, 1 + length);
        buffer = buffer.subarray(1 + length);
        if (type === 'P') {
          const [name, text] = strings(body, 2);
          if (name === '') unnamed = text!;
          else texts.set(name!, text!);
        } else if (type === 'B') bound.push(bindOf(body, texts, unnamed));
        // A simple query (BEGIN, SET …): a statement of its own, with no name and no parameters.
        else if (type === 'Q') bound.push({ name: '', text: strings(body, 1)[0]!, parameters: [] });
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  const url = new URL(databaseURL);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    mark: () => void (bound = []),
    since: () => bound.slice(),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The first `count` NUL-terminated strings of `body`. */
function strings(body: Buffer, count: number): string[] {
  const found: string[] = [];
  let at = 0;
  while (found.length < count) {
    const end = body.indexOf(0, at);
    found.push(body.toString('utf8', at, end));
    at = end + 1;
  }
  return found;
}

/** A Bind message: portal, statement, format codes, then each parameter's length and bytes. */
function bindOf(body: Buffer, texts: Map<string, string>, unnamed: string): CapturedStatement {
  const [portal, name] = strings(body, 2);
  let at = Buffer.byteLength(portal!) + Buffer.byteLength(name!) + 2;
  const formatCount = body.readInt16BE(at);
  const formats: number[] = [];
  for (let i = 0; i < formatCount; i++) formats.push(body.readInt16BE(at + 2 + 2 * i));
  at += 2 + 2 * formatCount;
  const count = body.readInt16BE(at);
  at += 2;
  const parameters: (string | null)[] = [];
  for (let i = 0; i < count; i++) {
    const length = body.readInt32BE(at);
    at += 4;
    if (length < 0) {
      parameters.push(null);
      continue;
    }
    const binary = (formats.length === 1 ? formats[0] : formats[i]) === 1;
    parameters.push(body.toString(binary ? 'hex' : 'utf8', at, at + length));
    at += length;
  }
  return { name: name!, text: name === '' ? unnamed : (texts.get(name!) ?? ''), parameters };
}
