/**
 * A lossy network between the workers and the server (issue 37), node:http
 * on 127.0.0.1. Each POST to the GraphQL endpoint is, at random: reset before
 * it is forwarded (the server never saw it), forwarded and its answer dropped
 * after the server committed (the client sees a reset connection), delayed on
 * the way back, or passed through. Everything else (the subscription stream)
 * passes through untouched. Counts what it did, for the scenario's report,
 * and checks every replay: a write-back step carries its request key
 * (`variables.input.requestKey`); when a keyed request's answer was dropped and
 * the same key comes again, the answer to the resend must be the lost one,
 * field for field (the server answers the recorded request again), but for
 * `replayed`, which says it is a replay.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** How lossy the network is: each a probability per GraphQL POST. */
export interface NetworkFaults {
  /** Cut the connection before forwarding: nothing reached the server. */
  resetBeforeRate: number;
  /** Forward, let the server answer, then cut the connection: the answer is lost after the commit. */
  dropAnswerRate: number;
  /** Hold the answer back `delayMs` before passing it on. */
  delayRate: number;
  delayMs: number;
}

/** What the proxy did. */
export interface NetworkStats {
  forwarded: number;
  resetsBefore: number;
  /** Answers cut after the server answered (reads included). */
  lostAnswers: number;
  /** Of those, answers to keyed write-back steps. */
  lostWriteAnswers: number;
  delayed: number;
  /** Resends of a keyed step whose earlier answer was lost, answered by the server (each item of a batch counts). */
  resendsAfterLoss: number;
  /** Requests that carried at least one such resend: a resent batch of N lost steps is one. */
  resendRequestsAfterLoss: number;
  /** Of those, answers equal to the lost one but for `replayed` (a payload replayed as it was). */
  replaysMatching: number;
  /** Resends whose lost answer was a payload and whose answer differs from it: each a broken promise. */
  replayMismatches: { requestKey: string; lost: string; again: string }[];
}

/** The request key and operation name of a GraphQL POST body, when it has them. */
function keysOf(body: Buffer): string[] {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { variables?: { input?: { requestKey?: unknown; items?: { requestKey?: unknown }[] } } };
    const input = parsed.variables?.input;
    // A batch of steps (startOperationAttempts, …): each item is its own keyed request.
    if (Array.isArray(input?.items)) return input.items.map((item) => (typeof item?.requestKey === 'string' ? item.requestKey : ''));
    const key = input?.requestKey;
    return typeof key === 'string' ? [key] : [];
  } catch {
    return [];
  }
}

/**
 * Each keyed request's answer, as JSON text without `replayed` (what a
 * replay must repeat): the mutation's payload, or a batch's result for each
 * item in order. The same step answers alike whether it went alone or in a batch.
 */
function answersOf(answer: Buffer, count: number): string[] {
  try {
    const data = (JSON.parse(answer.toString('utf8')) as { data?: Record<string, unknown> | null }).data ?? null;
    const field = data === null ? null : (Object.values(data)[0] as { results?: unknown[] } | null);
    const text = (value: unknown) => JSON.stringify(value ?? null, (key, inner: unknown) => (key === 'replayed' ? undefined : inner));
    if (field !== null && field !== undefined && Array.isArray(field.results) && field.results.length === count) return field.results.map(text);
    return Array.from({ length: count }, () => text(field));
  } catch {
    return Array.from({ length: count }, () => 'unparsable');
  }
}

/** Whether an answer's data is a successful payload (not a typed error, not an error). */
const isPayload = (data: string) => /"__typename":"[A-Za-z]*Payload"/.test(data);

/** A running fault proxy: `url` stands for the server's origin. */
export interface FaultProxy {
  url: string;
  stats(): NetworkStats;
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host']);

/** Starts a proxy in front of `target` (an origin, e.g. `http://127.0.0.1:4000`). */
export async function startFaultProxy(target: string, faults: Partial<NetworkFaults> = {}): Promise<FaultProxy> {
  const upstream = new URL(target);
  const rates: NetworkFaults = { resetBeforeRate: 0, dropAnswerRate: 0, delayRate: 0, delayMs: 200, ...faults };
  const stats: NetworkStats = { forwarded: 0, resetsBefore: 0, lostAnswers: 0, lostWriteAnswers: 0, delayed: 0, resendsAfterLoss: 0, resendRequestsAfterLoss: 0, replaysMatching: 0, replayMismatches: [] };
  /** Keyed requests whose answer was lost: the data the server had answered. */
  const lost = new Map<string, string>();

  const forward = (incoming: IncomingMessage, body: Buffer | undefined, onAnswer: (answer: IncomingMessage) => void, onError: () => void) => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(incoming.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    if (body !== undefined) headers['content-length'] = String(body.length);
    const outgoing = httpRequest({ host: upstream.hostname, port: upstream.port, path: incoming.url, method: incoming.method, headers }, onAnswer);
    outgoing.on('error', onError);
    if (body !== undefined) outgoing.end(body);
    else incoming.pipe(outgoing);
    return outgoing;
  };

  const server: Server = createServer((incoming, response) => {
    const fail = () => response.socket?.destroy();
    const isGraphQLPost = incoming.method === 'POST' && (incoming.url ?? '').split('?')[0] === '/graphql';
    if (!isGraphQLPost) {
      // The stream (and anything else): passed through as it comes.
      const outgoing = forward(incoming, undefined, (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      }, fail);
      response.on('close', () => outgoing.destroy());
      return;
    }
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', () => {
      if (Math.random() < rates.resetBeforeRate) {
        stats.resetsBefore++;
        fail();
        return;
      }
      stats.forwarded++;
      const body = Buffer.concat(chunks);
      const requestKeys = keysOf(body);
      forward(incoming, body, (answer) => {
        const parts: Buffer[] = [];
        answer.on('data', (chunk: Buffer) => parts.push(chunk));
        answer.on('end', () => {
          const keyed = requestKeys.length > 0 && answer.statusCode === 200;
          const answers = keyed ? answersOf(Buffer.concat(parts), requestKeys.length) : [];
          let resent = false;
          requestKeys.forEach((requestKey, i) => {
            const lostBefore = lost.get(requestKey);
            const data = answers[i];
            if (requestKey === '' || lostBefore === undefined || data === undefined) return;
            stats.resendsAfterLoss++;
            resent = true;
            if (data === lostBefore) stats.replaysMatching++;
            else if (isPayload(lostBefore)) stats.replayMismatches.push({ requestKey, lost: lostBefore, again: data });
          });
          if (resent) stats.resendRequestsAfterLoss++;
          // The server has answered (and committed, for a write): now the answer may be lost.
          if (Math.random() < rates.dropAnswerRate) {
            stats.lostAnswers++;
            if (keyed) {
              stats.lostWriteAnswers++;
              requestKeys.forEach((requestKey, i) => {
                if (requestKey !== '' && !lost.has(requestKey)) lost.set(requestKey, answers[i]!);
              });
            }
            fail();
            return;
          }
          const send = () => {
            const headers = { ...answer.headers };
            delete headers['transfer-encoding'];
            delete headers.connection;
            response.writeHead(answer.statusCode ?? 502, { ...headers, 'content-length': String(Buffer.concat(parts).length) });
            response.end(Buffer.concat(parts));
          };
          if (Math.random() < rates.delayRate) {
            stats.delayed++;
            setTimeout(send, rates.delayMs);
          } else send();
        });
      }, fail);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats: () => ({ ...stats, replayMismatches: [...stats.replayMismatches] }),
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
