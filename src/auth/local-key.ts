/**
 * A locally generated Ed25519 key for trying the server and for tests: its
 * did:key is the viewer, and its private JWK can be kept in a file.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, randomBytes, type JsonWebKey, type KeyObject } from 'node:crypto';
import { link, mkdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { encodeDIDKey } from './did-key.js';

/** Where the development key lives, relative to the working directory. */
export const LOCAL_KEY_PATH = 'data/local-key.json';

/** An Ed25519 private key with its did:key. */
export interface LocalKey {
  /** The did:key of the public half. */
  did: string;
  privateKey: KeyObject;
  /** The private key as a JWK (`kty: 'OKP'`, `crv: 'Ed25519'`, `x`, `d`): secret. */
  privateKeyJWK: JsonWebKey;
}

/** Generates a fresh Ed25519 key and its did:key. */
export function generateLocalKey(): LocalKey {
  const { privateKey } = generateKeyPairSync('ed25519');
  return localKeyFromPrivateKey(privateKey);
}

/** Builds a {@link LocalKey} from an Ed25519 private JWK; throws on anything else. */
export function localKeyFromJWK(jwk: unknown): LocalKey {
  if (typeof jwk !== 'object' || jwk === null) {
    throw new TypeError('private key must be a JWK object');
  }
  const { kty, crv, d, x } = jwk as Record<string, unknown>;
  if (kty !== 'OKP' || crv !== 'Ed25519' || typeof d !== 'string' || typeof x !== 'string') {
    throw new TypeError('private key must be an Ed25519 private JWK ({ kty: "OKP", crv: "Ed25519", d, x })');
  }
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: { kty, crv, d, x }, format: 'jwk' });
  } catch {
    throw new TypeError('private key JWK is not a usable Ed25519 key');
  }
  const key = localKeyFromPrivateKey(privateKey);
  // Node derives the public half from `d`; a stale or edited `x` would make the
  // file claim one DID while tokens carry another.
  if (x !== key.privateKeyJWK.x) {
    throw new TypeError('private key JWK "x" does not match its "d"');
  }
  return key;
}

/**
 * Loads the Ed25519 key kept at `path` (a private JWK in JSON), or creates one
 * there: the directory is created if missing and the file is written with mode
 * 0600, atomically, so concurrent callers all end up with the same key.
 */
export async function loadOrCreateLocalKey(path: string): Promise<LocalKey & { created: boolean }> {
  const existing = await readKeyFile(path);
  if (existing !== null) return { ...existing, created: false };

  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const key = generateLocalKey();
  // Write a private temporary file and hard-link it into place: link() never
  // replaces an existing file, and readers never see a half-written key.
  const temporary = join(dirname(path), `.local-key-${randomBytes(6).toString('hex')}.tmp`);
  await writeFile(temporary, `${JSON.stringify(key.privateKeyJWK, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  try {
    await link(temporary, path);
  } catch (error) {
    if (!isErrorCode(error, 'EEXIST')) throw error;
    const winner = await readKeyFile(path);
    if (winner === null) throw error;
    return { ...winner, created: false };
  } finally {
    await unlink(temporary).catch(() => undefined);
  }
  return { ...key, created: true };
}

/** Options of {@link writeKeyFile}. */
export interface WriteKeyFileOptions {
  /** Replace a file already at the path (its key is lost). Default: false, an existing file is an error. */
  overwrite?: boolean;
}

/**
 * Writes `key`'s private JWK to `path` with mode 0600 (its directory is made
 * if missing, mode 0700). Never leaves a half-written file; without
 * `overwrite`, an existing file is left alone and a `KeyFileError` says so.
 */
export async function writeKeyFile(path: string, key: LocalKey, options: WriteKeyFileOptions = {}): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const temporary = join(dirname(path), `.key-${randomBytes(6).toString('hex')}.tmp`);
  await writeFile(temporary, `${JSON.stringify(key.privateKeyJWK, null, 2)}\n`, { mode: 0o600, flag: 'wx' });
  try {
    // rename() replaces atomically; link() never replaces, so a file created
    // meanwhile by someone else is not overwritten either.
    if (options.overwrite === true) await rename(temporary, path);
    else await link(temporary, path);
  } catch (error) {
    if (isErrorCode(error, 'EEXIST')) throw new KeyFileError(`${path} already exists; pass --force to replace it (the key in it is lost)`);
    throw error;
  } finally {
    await unlink(temporary).catch(() => undefined);
  }
}

/** A key file that is missing, unreadable or holds no Ed25519 private JWK; the message names the file and the problem. */
export class KeyFileError extends Error {
  override name = 'KeyFileError';
}

/**
 * Loads the Ed25519 private JWK kept at `path` (as `npm run keygen` writes
 * it). Throws `KeyFileError` when the file is missing, not JSON, or not an
 * Ed25519 private JWK.
 */
export async function loadKeyFile(path: string): Promise<LocalKey> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (isErrorCode(error, 'ENOENT')) throw new KeyFileError(`key file ${path} does not exist (make one with: npm run keygen -- --out ${path})`);
    if (isErrorCode(error, 'EISDIR')) throw new KeyFileError(`key file ${path} is a directory`);
    if (isErrorCode(error, 'EACCES')) throw new KeyFileError(`key file ${path} is not readable`);
    throw error;
  }
  let jwk: unknown;
  try {
    jwk = JSON.parse(text);
  } catch {
    throw new KeyFileError(`key file ${path} is not JSON (expected an Ed25519 private JWK)`);
  }
  try {
    return localKeyFromJWK(jwk);
  } catch (error) {
    throw new KeyFileError(`key file ${path}: ${(error as Error).message}`);
  }
}

function localKeyFromPrivateKey(privateKey: KeyObject): LocalKey {
  const jwk = privateKey.export({ format: 'jwk' });
  const privateKeyJWK: JsonWebKey = { kty: 'OKP', crv: 'Ed25519', x: jwk.x!, d: jwk.d! };
  return { did: encodeDIDKey(createPublicKey(privateKey)), privateKey, privateKeyJWK };
}

async function readKeyFile(path: string): Promise<LocalKey | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if (isErrorCode(error, 'ENOENT')) return null;
    throw error;
  }
  let jwk: unknown;
  try {
    jwk = JSON.parse(text);
  } catch {
    throw new Error(`local key file ${path} is not JSON; delete it to generate a new key`);
  }
  try {
    return localKeyFromJWK(jwk);
  } catch (error) {
    throw new Error(`local key file ${path}: ${(error as Error).message}`);
  }
}

function isErrorCode(error: unknown, code: string): boolean {
  return error instanceof Error && (error as NodeJS.ErrnoException).code === code;
}
