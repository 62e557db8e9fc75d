/**
 * `connector-store-client`: the typed documents of the server's documented
 * operations (`ClaimOperationDocument`, … with their result and variables
 * types) and bearer tokens (`mintToken`, `createTokenSource`). Runs in Node
 * ≥ 20 and in browsers; the Node-only key-file helpers are
 * `connector-store-client/key-file`. See README.md.
 */
export * from './token.js';
export * from './generated/graphql.js';
