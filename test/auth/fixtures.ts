/** Token fixtures for the auth tests: raw JWS building so every bad shape can be made. */
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';

export const AUDIENCE = 'connector-store-test';
/** A fixed clock: 2026-01-01T00:00:00Z in ms. */
export const NOW = Date.UTC(2026, 0, 1);
export const NOW_SECONDS = NOW / 1_000;

export function base64urlJSON(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** Signs arbitrary header and claims with an Ed25519 key, whatever they say. */
export function signEdDSA(privateKey: KeyObject, header: Record<string, unknown>, claims: unknown): string {
  const signingInput = `${base64urlJSON(header)}.${base64urlJSON(claims)}`;
  const signature = sign(null, Buffer.from(signingInput), privateKey).toString('base64url');
  return `${signingInput}.${signature}`;
}

/** Claims of a token that should verify at {@link NOW}. */
export function validClaims(did: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { iss: did, aud: AUDIENCE, iat: NOW_SECONDS - 60, exp: NOW_SECONDS + 600, ...overrides };
}

/** The Ed25519 private key for a 32-byte seed (the did:key test vectors are seed-based). */
export function privateKeyFromSeed(seedHex: string): KeyObject {
  // PKCS#8 for Ed25519 is a fixed 16-byte prefix followed by the seed; Node's
  // JWK import would want the public `x` we are trying to derive.
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), Buffer.from(seedHex, 'hex')]);
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
}
