/**
 * The console's GraphQL client: urql over this server's /graphql for
 * queries and mutations, and graphql-sse in single-connection mode at
 * /graphql/stream for subscriptions (one HTTP connection however many
 * subscriptions a view holds). Every request carries the session's bearer
 * token; a 401 from either ends the session with the server's message.
 */
import { createClient as createSSEClient } from 'graphql-sse';
import { cacheExchange, Client, fetchExchange, subscriptionExchange } from 'urql';
import type { Session } from './session';

/** Called once when the server refuses the session's token, with its message. */
export type OnUnauthorized = (message: string) => void;

/** The server's message in a 401 answer's body (`{ errors: [{ message }] }`), or a plain one. */
async function refusalMessage(response: Response): Promise<string> {
  try {
    const body = (await response.clone().json()) as { errors?: { message?: string }[] };
    const message = body.errors?.[0]?.message;
    if (typeof message === 'string' && message !== '') return message;
  } catch {
    // Not JSON.
  }
  return `the server refused the token (HTTP ${response.status})`;
}

/** The urql client of one session; `dispose` closes its event stream. */
export function createConsoleClient(session: Session, onUnauthorized: OnUnauthorized): { client: Client; dispose(): void } {
  let refused = false;
  const refuse = (message: string) => {
    if (refused) return;
    refused = true;
    onUnauthorized(message);
  };
  const authorization = async () => ({ authorization: `Bearer ${await session.getToken()}` });

  const sse = createSSEClient({
    url: `${location.origin}/graphql/stream`,
    singleConnection: true,
    headers: authorization,
    // A refused token is final; anything else (a restart, a dropped connection) is retried with backoff.
    retry: async (retries) => {
      await new Promise((resolve) => setTimeout(resolve, Math.min(10_000, 500 * 2 ** retries) * (0.5 + Math.random() / 2)));
    },
    retryAttempts: 8,
    fetchFn: async (input: RequestInfo | URL, init?: RequestInit) => {
      const response = await fetch(input, init);
      if (response.status === 401) refuse(await refusalMessage(response));
      return response;
    },
  });

  const client = new Client({
    url: '/graphql',
    preferGetMethod: false,
    requestPolicy: 'cache-and-network',
    fetch: async (input, init) => {
      const headers = new Headers(init?.headers);
      headers.set('authorization', (await authorization()).authorization);
      const response = await fetch(input, { ...init, headers, credentials: 'omit' });
      if (response.status === 401) refuse(await refusalMessage(response));
      return response;
    },
    exchanges: [
      cacheExchange,
      fetchExchange,
      subscriptionExchange({
        forwardSubscription: (request) => ({
          subscribe: (sink) => ({
            unsubscribe: sse.subscribe(
              { query: request.query ?? '', variables: request.variables ?? {}, ...(request.operationName != null && { operationName: request.operationName }) },
              {
                next: (value) => sink.next(value as never),
                complete: () => sink.complete(),
                error: (error) => sink.error(error instanceof Error ? error : new Error(String(error))),
              },
            ),
          }),
        }),
      }),
    ],
  });
  return { client, dispose: () => sse.dispose() };
}
