/**
 * A Pothos plugin that resolves each node's global `id` synchronously.
 * The relay plugin's `id` field is an `async` function, so every node of a
 * page answered its id through a promise: with graphql-jit that is a promise,
 * two closures and a microtask per row, for a string computed at once (issue
 * 21: the dashboard list's 50 ids were a measurable share of its cost). This
 * plugin gives the field the node's own `id.resolve` (the one passed to
 * `builder.node` / `loadableNode`), encoded by the relay options'
 * `encodeGlobalID`, and keeps a promise only when `id.resolve` returns one.
 *
 * It replaces only the relay plugin's resolver, never another plugin's
 * wrapper: listed last among the plugins, its `wrapResolve` runs first
 * (Pothos wraps last-listed first), on the field's own resolver, and the
 * other plugins wrap what it returns.
 */
import SchemaBuilder, { BasePlugin, isThenable, type PothosOutputFieldConfig, type SchemaTypes } from '@pothos/core';
import type { GraphQLFieldResolver } from 'graphql';

type IDResolver = (parent: unknown, args: object, context: object, info: unknown) => unknown;

export class SyncGlobalIDsPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override wrapResolve(resolver: GraphQLFieldResolver<unknown, Types['Context'], object>, fieldConfig: PothosOutputFieldConfig<Types>): GraphQLFieldResolver<unknown, Types['Context'], object> {
    const relay = (this.builder.options as { relay?: { idFieldName?: string; encodeGlobalID?: (typename: string, id: string, context: object) => string } }).relay;
    if (fieldConfig.kind !== 'Object' || fieldConfig.name !== (relay?.idFieldName ?? 'id')) return resolver;
    // Only the relay plugin's own resolver: anything else named `id` keeps its resolver.
    if (resolver !== fieldConfig.resolve) return resolver;
    const type = this.buildCache.getTypeConfig(fieldConfig.parentType);
    const idOptions = (type.pothosOptions as { id?: { resolve?: IDResolver } }).id;
    const encode = relay?.encodeGlobalID;
    if (type.kind !== 'Object' || typeof idOptions?.resolve !== 'function' || encode === undefined) return resolver;
    if (!type.interfaces.some((ref) => this.buildCache.getTypeConfig(ref).name === 'Node')) return resolver;
    const resolveID = idOptions.resolve;
    const typename = type.name;
    const encoded = (id: unknown, context: object) => (id == null ? id : encode(typename, String(id), context));
    return (parent, args, context, info) => {
      const id = resolveID(parent, args, context, info);
      return isThenable(id) ? (id as Promise<unknown>).then((value) => encoded(value, context)) : encoded(id, context);
    };
  }
}

declare global {
  export namespace PothosSchemaTypes {
    export interface Plugins<Types extends SchemaTypes> {
      syncGlobalIDs: SyncGlobalIDsPlugin<Types>;
    }
  }
}

SchemaBuilder.registerPlugin('syncGlobalIDs', SyncGlobalIDsPlugin);

export default 'syncGlobalIDs' as const;
