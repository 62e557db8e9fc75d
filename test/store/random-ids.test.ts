/**
 * The default id source (node keys, lease tokens): 128 random bits, base64url,
 * never repeated, also across refills of its buffered random bytes.
 */
import { expect, it } from 'vitest';
import { defaultRandomID } from '../../src/store/context.js';

it('gives 22-character base64url ids of 128 bits, each once, across many refills of its random buffer', () => {
  // 256 ids per 4 KiB refill: 5 000 ids span about 20 refills.
  const ids = Array.from({ length: 5_000 }, () => defaultRandomID());
  for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{22}$/);
  expect(new Set(ids).size).toBe(ids.length);
  expect(Buffer.from(ids[0]!, 'base64url')).toHaveLength(16);
  // Not a counter: consecutive ids share no long prefix.
  const sharedPrefixes = ids.slice(1).filter((id, i) => id.slice(0, 4) === ids[i]!.slice(0, 4));
  expect(sharedPrefixes.length).toBeLessThan(5);
});
