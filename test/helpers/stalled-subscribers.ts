/**
 * Subscribers that subscribe and then stop reading, on every transport the
 * server speaks, over raw sockets on 127.0.0.1 (so nothing in the client
 * reads ahead for them): yoga's SSE on `/graphql`, graphql-sse on
 * `/graphql/stream` in distinct and single-connection modes, and graphql-ws.
 * `resume()` reads what the server kept for them. Used by the slow-subscriber
 * tests and by `bench/stalled-subscribers.ts`.
 */
import { connect } from 'node:net';
import { WebSocket } from 'ws';
import { parseServerSentEvent, type SubscriptionResult } from './sse.js';

/** The transports a subscriber can use. */
export const TRANSPORTS = ['sse', 'graphql-sse-distinct', 'graphql-sse-single', 'websocket'] as const;
export type Transport = (typeof TRANSPORTS)[number];

/** What a subscriber had received once it read again. */
export interface ResumedSubscriber {
  /** `next` payloads received, in order (parsed). */
  results: SubscriptionResult[];
  /** Bytes of event payload received. */
  bytes: number;
  /** Whether the server ended the subscription (complete, error or a closed connection). */
  ended: boolean;
}

/** A subscriber that is not reading. */
export interface StalledSubscriber {
  transport: Transport;
  /** Starts reading again; resolves once nothing arrived for `quietMs` (or the subscription ended). */
  resume(quietMs?: number, timeoutMs?: number): Promise<ResumedSubscriber>;
  close(): void;
}

/** Opens one subscription of `query` as `token` over `transport` and stops reading right after it is accepted. */
export async function openStalledSubscriber(
  origin: string,
  transport: Transport,
  token: string,
  query: string,
  variables: Record<string, unknown>,
): Promise<StalledSubscriber> {
  if (transport === 'websocket') return openStalledWebSocket(origin, token, query, variables);
  const { hostname, host, port } = new URL(origin);
  const auth = { authorization: `Bearer ${token}` };
  let path = transport === 'sse' ? '/graphql' : '/graphql/stream';
  let request: { method: string; headers: Record<string, string>; body?: string };
  let afterOpen: (() => Promise<void>) | undefined;
  if (transport === 'graphql-sse-single') {
    const reserved = await fetch(`${origin}/graphql/stream`, { method: 'PUT', headers: auth });
    if (reserved.status !== 201) throw new Error(`reservation refused: ${reserved.status} ${await reserved.text()}`);
    const streamToken = await reserved.text();
    request = { method: 'GET', headers: { ...auth, accept: 'text/event-stream', 'x-graphql-event-stream-token': streamToken } };
    afterOpen = async () => {
      const posted = await fetch(`${origin}/graphql/stream`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json', 'x-graphql-event-stream-token': streamToken },
        body: JSON.stringify({ query, variables, extensions: { operationId: '1' } }),
      });
      if (posted.status !== 202) throw new Error(`operation refused: ${posted.status} ${await posted.text()}`);
    };
  } else {
    request = { method: 'POST', headers: { ...auth, 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify({ query, variables }) };
  }
  const socket = connect(Number(port), hostname.replace(/^\[|\]$/g, ''));
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  const body = request.body ?? '';
  const head = [`${request.method} ${path} HTTP/1.1`, `host: ${host}`, ...Object.entries(request.headers).map(([k, v]) => `${k}: ${v}`)];
  if (request.body !== undefined) head.push(`content-length: ${Buffer.byteLength(body)}`);
  socket.write(`${head.join('\r\n')}\r\n\r\n${body}`);
  // Read the response head (and whatever came with it), then stop reading.
  const received: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      received.push(chunk);
      if (Buffer.concat(received).includes('\r\n\r\n')) {
        socket.off('data', onData);
        socket.pause();
        resolve();
      }
    };
    socket.on('data', onData).once('error', reject);
  });
  const status = Number(/^HTTP\/1\.1 (\d+)/.exec(Buffer.concat(received).toString('latin1'))?.[1]);
  if (status !== 200) throw new Error(`subscription refused: ${status} ${Buffer.concat(received).toString()}`);
  socket.on('error', () => {});
  let ended = false;
  socket.once('close', () => {
    ended = true;
  });
  await afterOpen?.();
  return {
    transport,
    close: () => socket.destroy(),
    resume: (quietMs = 1_000, timeoutMs = 60_000) =>
      new Promise<ResumedSubscriber>((resolve) => {
        let timer: ReturnType<typeof setTimeout>;
        const finish = () => {
          clearTimeout(timer);
          clearTimeout(overall);
          socket.off('data', onData);
          socket.pause();
          resolve(parseEventStream(Buffer.concat(received), ended));
        };
        const overall = setTimeout(finish, timeoutMs);
        const onData = (chunk: Buffer) => {
          received.push(chunk);
          // The end of a chunked body: the server ended the response.
          if (chunk.subarray(-5).toString('latin1') === '0\r\n\r\n') {
            ended = true;
            return finish();
          }
          // Keep-alive pings (comments; every 300 ms under NODE_ENV=test) are not traffic.
          if (!chunk.includes('event:')) return;
          clearTimeout(timer);
          timer = setTimeout(finish, quietMs);
        };
        socket.on('data', onData);
        socket.once('close', finish);
        timer = setTimeout(finish, quietMs);
        socket.resume();
      }),
  };
}

/** The `next` events of an HTTP/1.1 event-stream response (head, chunked body). */
function parseEventStream(raw: Buffer, ended: boolean): ResumedSubscriber {
  const at = raw.indexOf('\r\n\r\n');
  let rest = raw.subarray(at + 4);
  const parts: Buffer[] = [];
  // Chunked transfer coding: size line, data, CRLF.
  for (;;) {
    const line = rest.indexOf('\r\n');
    if (line < 0) break;
    const size = Number.parseInt(rest.subarray(0, line).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0 || rest.length < line + 2 + size) break;
    parts.push(rest.subarray(line + 2, line + 2 + size));
    rest = rest.subarray(line + 2 + size + 2);
  }
  const text = Buffer.concat(parts).toString('utf8');
  const results: ResumedSubscriber['results'] = [];
  let bytes = 0;
  let complete = false;
  for (const block of text.split('\n\n')) {
    const { event, data } = parseServerSentEvent(block);
    if (event === 'next' && data !== '') {
      bytes += Buffer.byteLength(data);
      const parsed = JSON.parse(data) as { payload?: ResumedSubscriber['results'][number] } & ResumedSubscriber['results'][number];
      // graphql-sse wraps each result as `{ id, payload }` in single-connection mode.
      results.push('payload' in parsed && parsed.payload !== undefined ? parsed.payload : parsed);
    }
    if (event === 'complete') complete = true;
  }
  return { results, bytes, ended: ended || complete };
}

async function openStalledWebSocket(origin: string, token: string, query: string, variables: Record<string, unknown>): Promise<StalledSubscriber> {
  const socket = new WebSocket(`${origin.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
  const messages: string[] = [];
  let ended = false;
  socket.on('error', () => {});
  socket.on('close', () => {
    ended = true;
  });
  await new Promise<void>((resolve, reject) => socket.once('open', resolve).once('error', reject));
  socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } }));
  await new Promise<void>((resolve, reject) => {
    socket.once('message', (data) => (JSON.parse(String(data)).type === 'connection_ack' ? resolve() : reject(new Error(String(data)))));
  });
  socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query, variables } }));
  socket.on('message', (data) => {
    const text = String(data);
    messages.push(text);
    const type = (JSON.parse(text) as { type: string }).type;
    if (type === 'complete' || type === 'error') ended = true;
  });
  // Give the server a moment to start the subscription, then stop reading the socket.
  await new Promise((r) => setTimeout(r, 100));
  socket.pause();
  return {
    transport: 'websocket',
    close: () => socket.terminate(),
    resume: (quietMs = 1_000, timeoutMs = 60_000) =>
      new Promise<ResumedSubscriber>((resolve) => {
        let timer: ReturnType<typeof setTimeout>;
        const finish = () => {
          clearTimeout(timer);
          clearTimeout(overall);
          socket.off('message', onMessage);
          const results: ResumedSubscriber['results'] = [];
          let bytes = 0;
          for (const text of messages) {
            const message = JSON.parse(text) as { type: string; payload?: unknown };
            if (message.type === 'next') {
              bytes += Buffer.byteLength(JSON.stringify(message.payload));
              results.push(message.payload as ResumedSubscriber['results'][number]);
            }
            // A subscribe refused or failed: errors without data.
            if (message.type === 'error') results.push({ errors: message.payload as never });
          }
          resolve({ results, bytes, ended });
        };
        const overall = setTimeout(finish, timeoutMs);
        const onMessage = () => {
          clearTimeout(timer);
          timer = setTimeout(finish, ended ? 50 : quietMs);
        };
        socket.on('message', onMessage);
        socket.once('close', () => {
          clearTimeout(timer);
          timer = setTimeout(finish, 50);
        });
        timer = setTimeout(finish, quietMs);
        socket.resume();
      }),
  };
}
