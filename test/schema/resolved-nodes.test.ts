/**
 * Resolved nodes (schema/resolved-nodes.ts): a field marked `resolvesNodes`
 * keeps its own resolver, without the dataloader plugin's wrapper; unmarked
 * fields and types that prime their loader keep the wrapper; other plugins
 * still wrap a marked field; the answers are those without the plugins.
 */
import SchemaBuilder from '@pothos/core';
import DataloaderPlugin from '@pothos/plugin-dataloader';
import ScopeAuthPlugin from '@pothos/plugin-scope-auth';
import { execute, isObjectType, parse, type GraphQLSchema } from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../../schema/index.js';
import { captureResolvedNodes, RESOLVES_NODES, restoreResolvedNodes } from '../../schema/resolved-nodes.js';

function smallSchema(withPlugins = true) {
  const builder = new SchemaBuilder<{ Context: { allowed: boolean }; AuthScopes: { allowed: boolean } }>({
    plugins: withPlugins ? [ScopeAuthPlugin, restoreResolvedNodes, DataloaderPlugin, captureResolvedNodes] : [ScopeAuthPlugin, DataloaderPlugin],
    scopeAuth: { authScopes: (ctx) => ({ allowed: ctx.allowed }) },
  });
  const loads: string[][] = [];
  const load = async (ids: readonly string[]) => {
    loads.push([...ids]);
    return ids.map((id) => ({ id }));
  };
  const Item = builder.loadableObject('Item', { load, fields: (t) => ({ id: t.exposeString('id') }) });
  const Primed = builder.loadableObject('Primed', { load, cacheResolved: (item) => item.id, fields: (t) => ({ id: t.exposeString('id') }) });
  const marked = { [RESOLVES_NODES]: true };
  builder.queryType({
    fields: (t) => ({
      resolved: t.field({ type: Item, extensions: marked, resolve: async () => ({ id: 'own' }) }),
      resolvedList: t.field({ type: [Item], extensions: marked, resolve: () => [{ id: 'a' }, { id: 'b' }] }),
      byID: t.field({ type: Item, resolve: () => 'loaded' }),
      primed: t.field({ type: Primed, extensions: marked, resolve: () => ({ id: 'p' }) }),
      guarded: t.field({ type: Item, extensions: marked, authScopes: { allowed: true }, resolve: () => ({ id: 'g' }) }),
    }),
  });
  return { schema: builder.toSchema(), loads };
}

const resolverOf = (s: GraphQLSchema, field: string) => {
  const query = s.getQueryType()!;
  return query.getFields()[field]!.resolve;
};

describe('resolved nodes', () => {
  it("the server's marked fields keep their own resolver", () => {
    const operation = schema.getType('ConnectorOperation');
    if (!isObjectType(operation)) throw new Error('no ConnectorOperation');
    expect(String(operation.getFields().watch!.resolve)).toMatch(/watchOfDocument/);
    expect(String(operation.getFields().watch!.resolve)).not.toMatch(/loadResults/);
  });

  it('only the dataloader wrapper comes off, only from marked fields of types that do not prime their loader; answers unchanged', async () => {
    const { schema: s, loads } = smallSchema();
    expect(String(resolverOf(s, 'resolved'))).toMatch(/own/);
    expect(String(resolverOf(s, 'resolvedList'))).not.toMatch(/loadResults/);
    expect(String(resolverOf(s, 'byID'))).toMatch(/loadResults/);
    expect(String(resolverOf(s, 'primed'))).toMatch(/loadResults/);
    // The auth plugin's wrapper stays on the guarded field.
    expect(String(resolverOf(s, 'guarded'))).not.toMatch(/'g'/);
    const document = parse('{ resolved { id } resolvedList { id } byID { id } primed { id } guarded { id } }');
    const run = async (used: GraphQLSchema, allowed: boolean) => {
      const result = await execute({ schema: used, document, contextValue: { allowed } });
      return { data: result.data, errors: result.errors?.map((error) => [error.message, error.path?.join('.')]) };
    };
    const allowed = await run(s, true);
    expect(allowed).toEqual({ data: { resolved: { id: 'own' }, resolvedList: [{ id: 'a' }, { id: 'b' }], byID: { id: 'loaded' }, primed: { id: 'p' }, guarded: { id: 'g' } }, errors: undefined });
    expect(loads).toEqual([['loaded']]);
    const refused = await run(s, false);
    expect(refused.errors).toEqual([[expect.any(String), 'guarded']]);
    const without = smallSchema(false);
    expect(await run(without.schema, true)).toEqual(allowed);
    expect(await run(without.schema, false)).toEqual(refused);
  });
});
