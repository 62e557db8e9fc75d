/**
 * Plain edge nodes (schema/plain-edge-nodes.ts): every connection edge's
 * `node` is read without a resolver, so graphql-jit inlines it; the other
 * plugins still wrap a marked field, and a loadable type that primes its
 * loader with resolved nodes keeps the dataloader's wrapper.
 */
import SchemaBuilder from '@pothos/core';
import DataloaderPlugin from '@pothos/plugin-dataloader';
import RelayPlugin from '@pothos/plugin-relay';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import { execute, isObjectType, parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../../schema/index.js';
import PlainEdgeNodesPlugin, { PLAIN_EDGE_NODE } from '../../schema/plain-edge-nodes.js';

/** A small schema: items of two loadable types, one priming its loader (`cacheResolved`), one edge node behind an auth scope. */
function smallSchema(plain = true) {
  const builder = new SchemaBuilder<{ Context: { allowed: boolean }; AuthScopes: { allowed: boolean } }>({
    plugins: plain ? [RelayPlugin, ScopeAuthPlugin, PlainEdgeNodesPlugin, DataloaderPlugin] : [RelayPlugin, ScopeAuthPlugin, DataloaderPlugin],
    relay: { nodeFieldOptions: { extensions: { [PLAIN_EDGE_NODE]: true } } },
    scopeAuth: { authScopes: (ctx) => ({ allowed: ctx.allowed }) },
  });
  const load = async (ids: readonly string[]) => ids.map((id) => ({ id }));
  const Plain = builder.loadableObject('Plain', { load, fields: (t) => ({ id: t.exposeString('id') }) });
  const Primed = builder.loadableObject('Primed', { load, cacheResolved: (item) => item.id, fields: (t) => ({ id: t.exposeString('id') }) });
  const Guarded = builder.loadableObject('Guarded', { load, authScopes: { allowed: true }, fields: (t) => ({ id: t.exposeString('id') }) });
  const items = { edges: [{ node: { id: 'a' }, cursor: 'c' }], pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null } };
  builder.queryType({
    fields: (t) => ({
      plain: t.connection({ type: Plain, resolve: () => items }),
      primed: t.connection({ type: Primed, resolve: () => items }),
      guarded: t.connection({ type: Guarded, resolve: () => items }),
    }),
  });
  return builder.toSchema();
}

const edgeNode = (s: ReturnType<typeof smallSchema>, typeName: string) => {
  const type = s.getType(typeName);
  if (!isObjectType(type)) throw new Error(`${typeName} is not an object type`);
  return type.getFields().node!;
};

describe('plain edge nodes', () => {
  it("every edge of the server's schema reads its node without a resolver", () => {
    const edges = Object.values(schema.getTypeMap()).filter((type) => isObjectType(type) && type.name.endsWith('Edge'));
    expect(edges.length).toBeGreaterThanOrEqual(7);
    for (const edge of edges) {
      if (!isObjectType(edge)) continue;
      expect({ edge: edge.name, resolve: edge.getFields().node?.resolve }).toEqual({ edge: edge.name, resolve: undefined });
    }
  });

  it('a type that primes its loader keeps the wrapper; answers and auth refusals are those without the plugin', async () => {
    const s = smallSchema();
    expect(edgeNode(s, 'QueryPlainConnectionEdge').resolve).toBeUndefined();
    expect(edgeNode(s, 'QueryPrimedConnectionEdge').resolve).toBeTypeOf('function');
    const document = parse('{ plain { edges { node { id } } } primed { edges { node { id } } } guarded { edges { node { id } } } }');
    const run = async (schemaUsed: ReturnType<typeof smallSchema>, allowed: boolean) => {
      const result = await execute({ schema: schemaUsed, document, contextValue: { allowed } });
      return { data: result.data, errors: result.errors?.map((error) => [error.message, error.path?.join('.')]) };
    };
    const allowed = await run(s, true);
    expect(allowed).toEqual({ data: { plain: { edges: [{ node: { id: 'a' } }] }, primed: { edges: [{ node: { id: 'a' } }] }, guarded: { edges: [{ node: { id: 'a' } }] } }, errors: undefined });
    const refused = await run(s, false);
    expect(refused.errors).toHaveLength(1);
    const without = smallSchema(false);
    expect(edgeNode(without, 'QueryPlainConnectionEdge').resolve).toBeTypeOf('function');
    expect(await run(without, true)).toEqual(allowed);
    expect(await run(without, false)).toEqual(refused);
  });
});
