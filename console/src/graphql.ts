/**
 * The console's GraphQL client: urql over this server's /graphql for
 * queries and mutations, and the tab's share of the console's one event
 * stream (stream.ts, graphql-sse at /graphql/stream) for subscriptions.
 * Every request carries the session's bearer token (a query or mutation also
 * the latest consistency token of this tab's mutations: consistency-token.ts);
 * a 401 from either ends the session with the server's message. When the
 * page should re-read (the stream came back after a break, the server answers
 * again after a query could not reach it, the page returns from the
 * back/forward cache), every query on screen runs again from the network.
 */
import { Client, cacheExchange, fetchExchange, makeOperation, subscriptionExchange, type Exchange, type Operation } from 'urql';
import { pipe, tap } from 'wonka';
import { keepConsistencyTokenExchange, sendConsistencyToken } from './consistency-token';
import { refusalMessage } from './stream-hub';
import { openLiveStream, type LiveStream } from './stream';
import type { Session } from './session';

/** Called once when the server refuses the session's token, with its message. */
export type OnUnauthorized = (message: string) => void;

/** Keeps the queries on screen and runs them all again, from the network, each time `onResume` fires. */
function rereadExchange(onResume: (reread: () => void) => void): Exchange {
  return ({ client, forward }) =>
    (operations$) => {
      const active = new Map<number, Operation>();
      onResume(() => {
        for (const operation of active.values()) client.reexecuteOperation(makeOperation('query', operation, { ...operation.context, requestPolicy: 'network-only' }));
      });
      return forward(
        pipe(
          operations$,
          tap((operation) => {
            if (operation.kind === 'query') active.set(operation.key, operation);
            else if (operation.kind === 'teardown') active.delete(operation.key);
          }),
        ),
      );
    };
}

/** The urql client of one session and its live stream; `dispose` leaves the stream. */
export function createConsoleClient(session: Session, onUnauthorized: OnUnauthorized): { client: Client; stream: LiveStream; dispose(): void } {
  let refused = false;
  const refuse = (message: string) => {
    if (refused) return;
    refused = true;
    onUnauthorized(message);
  };
  const stream = openLiveStream(session, refuse);

  const client = new Client({
    url: '/graphql',
    preferGetMethod: false,
    requestPolicy: 'cache-and-network',
    fetch: async (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('authorization', `Bearer ${await session.getToken()}`);
      sendConsistencyToken(headers);
      let response: Response;
      try {
        response = await fetch(input, { ...init, headers, credentials: 'omit' });
      } catch (error) {
        // No answer at all (the server is down or restarting); an aborted request is not that.
        if (!(error instanceof DOMException && error.name === 'AbortError')) stream.queryFailed();
        throw error;
      }
      if (response.status === 401) refuse(await refusalMessage(response));
      return response;
    },
    exchanges: [
      rereadExchange((reread) => stream.onResume(reread)),
      keepConsistencyTokenExchange,
      cacheExchange,
      fetchExchange,
      subscriptionExchange({
        forwardSubscription: (request) => ({
          subscribe: (sink) => ({
            unsubscribe: stream.subscribe(
              { query: request.query ?? '', variables: request.variables ?? {}, ...(request.operationName != null && { operationName: request.operationName }) },
              { next: (value) => sink.next(value as never), error: (error) => sink.error(error), complete: () => sink.complete() },
            ),
          }),
        }),
      }),
    ],
  });
  return { client, stream, dispose: () => stream.dispose() };
}
