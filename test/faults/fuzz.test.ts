/**
 * A bounded randomized fuzz of request shapes (fast-check, fixed seed, so a
 * failure reproduces): random bodies, content types, tokens, and every
 * mutation of the schema with random values for its real input fields. For
 * every answer: no 5xx, no masked "Unexpected error." (malformed input is the
 * client's fault and must be said so), no secret, SQL or driver text, and a
 * refused request changes no row.
 */
import fc from 'fast-check';
import { isInputObjectType, isListType, isNonNullType, isScalarType, isEnumType, type GraphQLInputType } from 'graphql';
import { expect, it } from 'vitest';
import { schema } from '../../schema/index.js';
import type { Database } from '../../src/db/tables.js';
import { describeGraphQL } from '../helpers/graphql.js';
import { seedClaim, seedSyncState, seedWatch } from '../helpers/graphql-seed.js';

const RUNS = 150;
const TABLES: (keyof Database)[] = [
  'kubun_connector_operation',
  'kubun_connector_operation_count',
  'kubun_connector_operation_total',
  'kubun_connector_operation_history',
  'kubun_connector_projection_watch',
  'kubun_connector_sync_state',
  'kubun_connector_pending_auth',
  'kubun_connector_entity_trim',
  'kubun_connector_observation_records',
  'kubun_connector_observation_repair',
  'kubun_connector_sweep_receipt',
  'kubun_connector_sweep_candidate',
  'kubun_connector_sweep_checkpoint',
];
/** Text that must never reach a client: SQL, driver and stack details. */
const LEAKS = [/\bselect\b.+\bfrom\b/i, /kubun_connector/, /SQLITE_/, /\bat .+\.(ts|js):\d+/, /violates|constraint|syntax error at/i, /node_modules/];

/** A hostile string: empty, huge, NUL, control characters, unicode, injection-looking. */
const hostileString = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('', '\u0000', 'a\u0000b', "'; drop table x; --", '../../etc/passwd', 'did:key:z', 'javascript:alert(1)', '\uD800', '𝕏'.repeat(50)),
  fc.integer({ min: 2_000, max: 20_000 }).map((n) => 'x'.repeat(n)),
);
const hostileNumber = fc.oneof(fc.integer(), fc.double(), fc.constantFrom(0, -1, 2 ** 31, 2 ** 53, Number.MAX_VALUE));
const jsonLeaf = fc.oneof(hostileString, hostileNumber, fc.boolean(), fc.constant(null));
const hostileJSON = fc.oneof(jsonLeaf, fc.array(jsonLeaf, { maxLength: 5 }), fc.dictionary(fc.string({ maxLength: 8 }), jsonLeaf, { maxKeys: 5 }));

/** A random value for a GraphQL input type: mostly of the right shape, sometimes not. */
function valueFor(type: GraphQLInputType, depth = 0): fc.Arbitrary<unknown> {
  const wrong = fc.oneof(hostileString, hostileNumber, fc.constant(null), fc.constant({}), fc.constant([]));
  if (isNonNullType(type)) return fc.oneof({ weight: 9, arbitrary: valueFor(type.ofType, depth) }, { weight: 1, arbitrary: fc.constant(null) });
  if (isListType(type)) return fc.oneof({ weight: 4, arbitrary: fc.array(valueFor(type.ofType, depth + 1), { maxLength: 4 }) }, { weight: 1, arbitrary: wrong });
  if (isEnumType(type)) return fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...type.getValues().map((v) => v.name)) }, { weight: 1, arbitrary: hostileString });
  if (isInputObjectType(type)) {
    if (depth > 3) return fc.constant({});
    const fields = Object.values(type.getFields());
    return fc.oneof(
      { weight: 6, arbitrary: fc.record(Object.fromEntries(fields.map((f) => [f.name, valueFor(f.type, depth + 1)])), { requiredKeys: [] }) },
      { weight: 1, arbitrary: wrong },
    );
  }
  if (isScalarType(type)) {
    switch (type.name) {
      case 'Int':
        return fc.oneof({ weight: 4, arbitrary: fc.integer({ min: -10, max: 100_000 }) }, { weight: 1, arbitrary: wrong });
      case 'Boolean':
        return fc.oneof({ weight: 4, arbitrary: fc.boolean() }, { weight: 1, arbitrary: wrong });
      case 'JSON':
        return hostileJSON;
      case 'DateTime':
        return fc.oneof(fc.date({ min: new Date(0), max: new Date(4e12) }).map((d) => (Number.isNaN(d.getTime()) ? 'not a date' : d.toISOString())), hostileString);
      case 'DID':
        return fc.oneof(fc.constantFrom('did:key:z6MkfuzzFUZZfuzz', 'did:web:example.com'), hostileString);
      default:
        return fc.oneof({ weight: 3, arbitrary: fc.string({ minLength: 1, maxLength: 30 }) }, { weight: 2, arbitrary: hostileString }, { weight: 1, arbitrary: wrong });
    }
  }
  return wrong;
}

const mutations = Object.values(schema.getMutationType()!.getFields()).filter((f) => f.args.length === 1 && f.args[0]!.name === 'input');

/** One random request: a mutation with a random input, or a malformed body. */
const request = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(...mutations).chain((field) =>
      valueFor(field.args[0]!.type).map((input) => ({
        kind: 'mutation' as const,
        body: JSON.stringify({ query: `mutation($input: ${String(field.args[0]!.type)}) { ${field.name}(input: $input) { __typename ... on Error { code message } } }`, variables: { input } }),
      })),
    ),
  },
  { weight: 1, arbitrary: hostileString.map((text) => ({ kind: 'raw' as const, body: text })) },
  { weight: 1, arbitrary: hostileJSON.map((value) => ({ kind: 'raw' as const, body: JSON.stringify(value) ?? 'null' })) },
  { weight: 1, arbitrary: fc.record({ query: hostileString, variables: hostileJSON, operationName: fc.oneof(hostileString, fc.constant(null)) }).map((b) => ({ kind: 'raw' as const, body: JSON.stringify(b) })) },
);

describeGraphQL('fuzz: hostile request shapes', (suite) => {
  async function snapshot(): Promise<string> {
    const all: string[] = [];
    for (const table of TABLES) {
      const rows = await suite.store.db.selectFrom(table).selectAll().execute();
      all.push(table, ...rows.map((r) => JSON.stringify(r)).sort());
    }
    return all.join('\n');
  }

  it(`${RUNS} random requests: no 5xx, no masked error, no leaked secret or SQL, and a refused request changes nothing`, async () => {
    const claimed = await seedClaim(suite);
    await seedWatch(suite, { documentID: 'doc-fuzz' });
    await seedSyncState(suite, { connectorName: 'google' });
    const token = await suite.token('alice');
    const secrets = [claimed.lease.token, token];
    await fc.assert(
      fc.asyncProperty(request, fc.constantFrom('application/json', 'application/json', 'text/plain', 'application/graphql'), async (req, contentType) => {
        const before = await snapshot();
        const response = await suite.app.yoga.fetch('http://localhost/graphql', {
          method: 'POST',
          headers: { 'content-type': contentType, authorization: `Bearer ${token}` },
          body: req.body,
        });
        const text = await response.text();
        expect(response.status, text.slice(0, 300)).toBeLessThan(500);
        expect(text).not.toContain('Unexpected error.');
        for (const secret of secrets) expect(text).not.toContain(secret);
        for (const leak of LEAKS) expect(text, `leak ${leak}`).not.toMatch(leak);
        // Refused: a top-level error, or a typed error in the result union.
        const refused = response.status !== 200 || /"errors"\s*:/.test(text) || /"code"\s*:/.test(text);
        if (refused) expect(await snapshot()).toBe(before);
      }),
      { numRuns: RUNS, seed: 20261201, endOnFailure: true },
    );
  }, 120_000);
});
