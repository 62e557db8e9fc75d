/**
 * What the GraphiQL page opens with (issue 12 item 4): an example query that
 * runs as is and, in development, for a page requested from this machine, a
 * fresh bearer token of the local key (dev-credentials.ts) already in the
 * request headers, so the first query needs nothing copied from the banner.
 *
 * The token is minted per page load (it lives one hour, so a reload always
 * brings a valid one) and kept out of GraphiQL's storage. No token is ever put
 * in the page outside NODE_ENV=development, nor for a page requested over the
 * network (HOST=0.0.0.0 in development): whoever can reach the port would get
 * the local key's identity. The page itself is rendered from the installed
 * package (`@graphql-yoga/render-graphiql`, app.ts), never from a CDN.
 */
import type { GraphiQLOptions, Plugin } from 'graphql-yoga';
import type { ServerConfig } from './config.js';
import { developmentCredentialsAllowed, developmentTokenAllowedFor, type DevelopmentCredentials } from './dev-credentials.js';
import type { Logger } from './logger.js';

/** The page title. */
export const GRAPHIQL_TITLE = 'Connector store';

/** The operations of the example query, without the comment above them. */
export const EXAMPLE_QUERY_BODY = `{
  serverInfo { version dialect viewerDID viewerIsService }
  operationCounts { state count }
  operations(first: 5) {
    totalCount
    edges {
      node { id operationID state attempts }
    }
  }
}
`;

// Short lines: GraphiQL's editor is half the window wide.
const WITH_TOKEN_NOTE = `# As the local development key: its bearer token
# (valid 1 h, fresh at every page load) is in Headers.
# Run: Ctrl+Enter or ▶. No rows? npm run demo
`;

const WITHOUT_TOKEN_NOTE = `# Everything but serverInfo needs a bearer token:
# npm run -s token mints one for the local key; put
# {"Authorization": "Bearer <token>"} in Headers below.
`;

/** What {@link graphiqlPage} needs. */
export interface GraphiQLPageOptions {
  config: Pick<ServerConfig, 'env' | 'graphiql'>;
  /** The local key; its tokens go in the page only when `config.env` is development. Default: none. */
  developmentCredentials?: Pick<DevelopmentCredentials, 'mintToken'> | undefined;
  /** Told when a token could not be minted (the page then opens without one). */
  logger: Logger;
}

/** Yoga's `graphiql` option: off, or the options of each page, decided per request. */
export function graphiqlPage({
  config,
  developmentCredentials,
  logger,
}: GraphiQLPageOptions): false | ((request: Request, serverContext?: Record<string, unknown>) => Promise<GraphiQLOptions>) {
  if (!config.graphiql) return false;
  const credentials = developmentCredentialsAllowed(config) ? developmentCredentials : undefined;
  return async (request, serverContext) => {
    const base: GraphiQLOptions = { title: GRAPHIQL_TITLE, defaultQuery: WITHOUT_TOKEN_NOTE + EXAMPLE_QUERY_BODY };
    if (credentials === undefined || !developmentTokenAllowedFor(request, serverContext)) return base;
    let token: string;
    try {
      token = await credentials.mintToken();
    } catch (error) {
      logger.warn({ err: error }, 'could not mint a development token for GraphiQL; the page opens without one');
      return base;
    }
    const headers = JSON.stringify({ Authorization: `Bearer ${token}` }, null, 2);
    return {
      ...base,
      defaultQuery: WITH_TOKEN_NOTE + EXAMPLE_QUERY_BODY,
      headers,
      // New tabs get it too.
      defaultHeaders: headers,
      // The next load brings a fresh token; an expired one must not come back from storage.
      shouldPersistHeaders: false,
    };
  };
}

/** Marks every HTML answer (the GraphiQL page, which may carry a token) as not to be stored by any cache. */
export function useNoStoreForPages(): Plugin {
  return {
    onResponse: ({ response }) => {
      if ((response.headers.get('content-type') ?? '').startsWith('text/html')) response.headers.set('cache-control', 'no-store');
    },
  };
}
