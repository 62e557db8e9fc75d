/**
 * Global ids: base64url of `Type:nodeKey`. The node key is a random 128-bit
 * value assigned on insert, so an id is unguessable and carries no DID,
 * idempotency key or other primary-key data. A malformed id decodes to a
 * type no node has, which the loaders treat as "not found".
 */

const SEPARATOR = ':';
/** Node keys are base64url; the check keeps arbitrary strings out of queries. */
const NODE_KEY = /^[A-Za-z0-9_-]{16,64}$/;

/** Encodes a node's type name and node key as an opaque global id. */
export function encodeNodeID(typename: string, nodeKey: string | number | bigint): string {
  return Buffer.from(`${typename}${SEPARATOR}${String(nodeKey)}`, 'utf8').toString('base64url');
}

/** Decodes a global id; malformed input gives `{ typename: '', id: '' }`, which matches no node. */
export function decodeNodeID(globalID: string): { typename: string; id: string } {
  if (globalID.length > 200) return { typename: '', id: '' };
  const decoded = Buffer.from(globalID, 'base64url').toString('utf8');
  const at = decoded.indexOf(SEPARATOR);
  const typename = at > 0 ? decoded.slice(0, at) : '';
  const id = at > 0 ? decoded.slice(at + 1) : '';
  if (!/^[A-Za-z]+$/.test(typename) || !NODE_KEY.test(id)) return { typename: '', id: '' };
  return { typename, id };
}
