/**
 * Global ids (schema/global-id.ts): base64url of `Type:nodeKey` in UTF-8,
 * for every length of key (each remainder of 3); decoding round-trips and
 * refuses what no node could have. (A hand-written ASCII encoder was tried
 * for issue 21 and was slower than Buffer's.) A page's ids and empty
 * watches resolve without a promise per row (issue 21).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { isObjectType, type GraphQLResolveInfo } from 'graphql';
import { decodeNodeID, encodeNodeID } from '../../schema/global-id.js';
import { schema } from '../../schema/index.js';

const nodeBuffer = (text: string) => Buffer.from(text, 'utf8').toString('base64url');

describe('global ids', () => {
  it("encodes exactly as Buffer's base64url, for every length of key and every printable ASCII character", () => {
    for (let length = 0; length < 70; length++) {
      for (let round = 0; round < 20; round++) {
        const key = [...randomBytes(length)].map((byte) => String.fromCharCode(0x20 + (byte % 95))).join('');
        expect(encodeNodeID('ConnectorOperation', key)).toBe(nodeBuffer(`ConnectorOperation:${key}`));
      }
    }
    expect(encodeNodeID('T', 12n)).toBe(nodeBuffer('T:12'));
    expect(encodeNodeID('T', 7)).toBe(nodeBuffer('T:7'));
  });

  it('encodes characters beyond ASCII as their UTF-8 bytes', () => {
    for (const key of ['ünï', '€', '😀', 'a\u0080', `${'x'.repeat(5)}\u00ff`]) expect(encodeNodeID('T', key)).toBe(nodeBuffer(`T:${key}`));
  });

  it('round-trips a node key, and a malformed id decodes to no node', () => {
    const nodeKey = randomBytes(16).toString('base64url');
    expect(decodeNodeID(encodeNodeID('ProjectionWatch', nodeKey))).toEqual({ typename: 'ProjectionWatch', id: nodeKey });
    expect(decodeNodeID(encodeNodeID('ProjectionWatch', 'short'))).toEqual({ typename: '', id: '' });
    expect(decodeNodeID('%%%')).toEqual({ typename: '', id: '' });
    expect(decodeNodeID('x'.repeat(201))).toEqual({ typename: '', id: '' });
  });

  it("every node's id resolves at once, as a string, not through a promise (schema/sync-global-ids.ts)", () => {
    const nodeKey = randomBytes(16).toString('base64url');
    for (const typename of ['ConnectorOperation', 'ProjectionWatch', 'SyncState', 'SweepReceipt']) {
      const type = schema.getType(typename);
      if (!isObjectType(type)) throw new Error(`${typename} is not an object type`);
      const id = type.getFields().id!.resolve!({ nodeKey }, {}, {}, {} as GraphQLResolveInfo);
      expect(id).toBe(encodeNodeID(typename, nodeKey));
    }
  });

  it("an operation without a document answers watch: null at once, with no promise and no load", () => {
    const type = schema.getType('ConnectorOperation');
    if (!isObjectType(type)) throw new Error('ConnectorOperation is not an object type');
    // No context: a load would need one, so this proves none is attempted.
    expect(type.getFields().watch!.resolve!({ documentID: null }, {}, {}, {} as GraphQLResolveInfo)).toBeNull();
  });
});
