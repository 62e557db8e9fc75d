/**
 * `connector-store-client`: the typed documents of the server's documented
 * operations (`ClaimOperationDocument`, … with their result and variables
 * types) and bearer tokens (`mintToken`, `createTokenSource`). Runs in Node
 * ≥ 20 and in browsers; the Node-only key-file helpers are
 * `connector-store-client/key-file`. The write-back runtime (`writeBack`,
 * `runWorker`, `createStoreClient`) is also `connector-store-client/runtime`.
 * `laterConsistencyToken` serves a client of your own that wants read-your-writes. See README.md.
 */
export * from './token.js';
export * from './consistency-token.js';
export * from './generated/graphql.js';
export * from './runtime/index.js';
