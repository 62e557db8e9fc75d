/**
 * The cost budget (MAX_QUERY_COST, default 20 000): a field's price grows with
 * the rows it can return (ids × aliases for `nodes` / `documents`, the page
 * size of a connection even when sent as a variable), so the heavy requests
 * any fresh did:key could send are refused before anything runs, while a
 * dashboard's pages fit.
 */
import { print } from 'graphql';
import { expect, it } from 'vitest';
import { DocumentStatesDocument, OperationsDocument } from '../../client/generated/graphql.js';
import { describeGraphQL } from '../helpers/graphql.js';
import { BULK_ROWS, COST_ARGUMENTS, schema } from '../../schema/index.js';
import { getNamedType, isInputObjectType, isObjectType } from 'graphql';

const ids = (n: number) => Array.from({ length: n }, (_, i) => Buffer.from(`ConnectorOperation:${String(i).padStart(22, 'A')}`).toString('base64url'));
const aliased = (count: number, field: string) => `query($v: [${field.startsWith('nodes') ? 'ID' : 'String'}!]!) { ${Array.from({ length: count }, (_, i) => `a${i}: ${field}`).join(' ')} }`;

describeGraphQL('graphql query cost', (suite) => {
  async function expectRefused(query: string, variables: Record<string, unknown>) {
    const response = await suite.request(query, variables);
    const body = (await response.json()) as { data?: unknown; errors?: { message: string; extensions?: { code?: string; queryComplexity?: { actual: number; max: number } } }[] };
    expect(response.status).toBe(400);
    expect(body.data).toBeUndefined();
    expect(body.errors?.[0]?.extensions).toMatchObject({ code: 'QUERY_COMPLEXITY', queryComplexity: { max: 20_000 } });
    return body.errors![0]!.extensions!.queryComplexity!.actual;
  }

  it('nodes(500 ids) under 30 aliases is refused before any lookup; one such nodes field fits', async () => {
    const selection = 'nodes(ids: $v) { __typename id ... on ConnectorOperation { state attempts lastKind } }';
    const cost = await expectRefused(aliased(30, selection), { v: ids(500) });
    expect(cost).toBeGreaterThan(30 * 500);
    const one = await suite.gql(aliased(1, selection), { v: ids(500) });
    expect(one.errors).toBeUndefined();
  });

  it('documents(100 ids) under 30 aliases is refused; the generated DocumentStates page of 100 fits', async () => {
    const documentIDs = Array.from({ length: 100 }, (_, i) => `doc-${i}`);
    await expectRefused(aliased(30, 'documents(documentIDs: $v) { documentID hasConnectorWork operations { id state } watch { id } }'), { v: documentIDs });
    const page = await suite.gql(print(DocumentStatesDocument), { documentIDs });
    expect(page.errors).toBeUndefined();
    expect(page.data.documents).toHaveLength(100);
  });

  it('a connection is priced by its page size, also when it comes as a variable', async () => {
    const query = `query($n: Int) { ${Array.from({ length: 30 }, (_, i) => `p${i}: operations(first: $n) { edges { node { id state attempts watch { id verificationStatus } } } }`).join(' ')} }`;
    const cheap = await suite.gql(query, { n: 5 });
    expect(cheap.errors).toBeUndefined();
    await expectRefused(query, { n: 100 });
  });

  it('the generated dashboard page of 100 operations with counts fits', async () => {
    const res = await suite.gql(print(OperationsDocument), { first: 100 });
    expect(res.errors).toBeUndefined();
  });

  it('a remembered verdict never lets a dearer request through: the same document with more ids is refused, then fewer fit again', async () => {
    const selection = 'nodes(ids: $v) { __typename id ... on ConnectorOperation { state attempts lastKind } }';
    const query = aliased(30, selection);
    for (const n of [10, 500, 10, 500]) {
      if (n === 500) await expectRefused(query, { v: ids(n) });
      else expect((await suite.gql(query, { v: ids(n) })).errors).toBeUndefined();
    }
  });

  it('every field priced by its arguments (or counting bulk rows) reads only the arguments and input fields named in COST_ARGUMENTS', () => {
    let priced = 0;
    for (const type of Object.values(schema.getTypeMap())) {
      if (!isObjectType(type)) continue;
      for (const field of Object.values(type.getFields())) {
        for (const extension of ['complexity', BULK_ROWS]) {
          const price = field.extensions?.[extension];
          if (typeof price !== 'function') continue;
          priced++;
          // With only the priced arguments and input fields, or with every other one filled in too, the price is the same.
          const listed = { first: 7, last: null, ids: ['a', 'b'], documentIDs: ['c'], input: { cap: 3, candidates: [{}, {}] } };
          const others = Object.fromEntries(field.args.filter((arg) => !COST_ARGUMENTS.has(arg.name)).map((arg) => [arg.name, { junk: true }]));
          const input = getNamedType(field.args.find((arg) => arg.name === 'input')?.type);
          const otherInputFields = isInputObjectType(input) ? Object.keys(input.getFields()).filter((name) => !COST_ARGUMENTS.has(name)) : [];
          const filled = { ...listed, ...others, input: { ...listed.input, ...Object.fromEntries(otherInputFields.map((name) => [name, { junk: true }])) } };
          expect(price(filled, {}, field), `${type.name}.${field.name} ${extension}`).toEqual(price(listed, {}, field));
          for (const name of [...Object.keys(listed), ...Object.keys(listed.input)]) expect(COST_ARGUMENTS.has(name)).toBe(true);
        }
      }
    }
    expect(priced).toBeGreaterThan(5);
  });
});
