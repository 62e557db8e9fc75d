/**
 * Node only: a key file, as `npm run keygen -- --out FILE` writes it (an
 * Ed25519 private JWK in JSON), as a signing key or a token source for a
 * worker. Its own subpath of the package (`connector-store-client/key-file`),
 * so a browser bundle of the rest never meets `node:fs`.
 */
import { readFile } from 'node:fs/promises';
import { nodeHTTPStreamFetch, nodeHTTPTransport } from './node-http.js';
import { createStoreClient, type StoreClient, type StoreClientOptions } from './runtime/store-client.js';
import { createTokenSource, importSigningKey, type Ed25519PrivateJWK, type SigningKey, type TokenSource, type TokenSourceOptions } from './token.js';

/**
 * Reads the Ed25519 private JWK kept at `path`. Throws an `Error` naming the
 * file when it is missing, unreadable or not JSON; the JWK itself is checked
 * by {@link signingKeyFromFile}.
 */
export async function readKeyFile(path: string | URL): Promise<Ed25519PrivateJWK> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ENOENT') throw new Error(`key file ${String(path)} does not exist (make one with: npm run keygen -- --out FILE)`);
    throw new Error(`key file ${String(path)} cannot be read (${code ?? (error as Error).message})`);
  }
  let jwk: unknown;
  try {
    jwk = JSON.parse(text);
  } catch {
    throw new Error(`key file ${String(path)} is not JSON (expected an Ed25519 private JWK)`);
  }
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) {
    throw new Error(`key file ${String(path)} does not hold a JWK object`);
  }
  return jwk as Ed25519PrivateJWK;
}

/**
 * The signing key (and so the DID) of the key file at `path`, imported
 * non-extractable. Throws an `Error` naming the file and the problem for
 * anything but an Ed25519 private JWK.
 */
export async function signingKeyFromFile(path: string | URL): Promise<SigningKey> {
  const jwk = await readKeyFile(path);
  try {
    return await importSigningKey(jwk);
  } catch (error) {
    throw new Error(`key file ${String(path)}: ${(error as Error).message}`);
  }
}

/**
 * A token source (see `createTokenSource`) signing with the key file at
 * `path`, read and checked once, now: a worker fails at start, not at its
 * first request. Options are `createTokenSource`'s but `key`; the DID is
 * `source.did`, the viewer the server sees (what goes in `SERVICE_DIDS`).
 */
export async function tokenSourceFromKeyFile(path: string | URL, options: Omit<TokenSourceOptions, 'key'> = {}): Promise<TokenSource & { readonly did: string }> {
  const key = await signingKeyFromFile(path);
  return { ...createTokenSource({ ...options, key }), did: key.did };
}

/**
 * A {@link StoreClient} (see `createStoreClient`) for the server at
 * `options.url`, signing every request with the key file at `path` through
 * {@link tokenSourceFromKeyFile}: the one line a worker needs before
 * `runWorker`. `options.audience` and `options.lifetimeSeconds` go to the
 * token source (defaults: `connector-store`, 900 s); the DID is `client.did`.
 * Requests go through {@link nodeHTTPTransport} and the subscription stream
 * through {@link nodeHTTPStreamFetch} unless `options.fetch` or
 * `options.transport` says otherwise.
 */
export async function storeClientFromKeyFile(
  path: string | URL,
  options: Omit<StoreClientOptions, 'tokens'> & Pick<TokenSourceOptions, 'audience' | 'lifetimeSeconds'>,
): Promise<StoreClient & { readonly did: string }> {
  const { audience, lifetimeSeconds, ...clientOptions } = options;
  const tokens = await tokenSourceFromKeyFile(path, { lifetimeSeconds: lifetimeSeconds ?? 900, ...(audience !== undefined && { audience }) });
  const nodeHTTP = clientOptions.fetch === undefined && clientOptions.transport === undefined;
  const transport = clientOptions.transport ?? (clientOptions.fetch === undefined ? nodeHTTPTransport() : undefined);
  return {
    ...createStoreClient({ ...clientOptions, tokens, ...(transport !== undefined && { transport }), ...(nodeHTTP && { fetch: nodeHTTPStreamFetch() }) }),
    did: tokens.did,
  };
}

export { nodeHTTPStreamFetch, nodeHTTPTransport, type NodeHTTPTransportOptions } from './node-http.js';
