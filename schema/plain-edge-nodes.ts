/**
 * A Pothos plugin that leaves a connection edge's `node` field without a
 * resolver, so graphql-jit reads `edge.node` inline.
 *
 * The relay plugin gives `node` the resolver `(edge) => edge.node`, and the
 * dataloader plugin wraps it (the node types are loadable) to load the node
 * when an edge holds an id. This server's edges always hold the node itself
 * (resolvers/pagination.ts), for which that wrapper returns it unchanged. A
 * field with a resolver costs graphql-jit a call, a resolve-info object and
 * a response path per row: on the dashboard list, 10 KiB of garbage and a
 * twentieth of the allocation gap to the jit floor (issue 21,
 * `npx tsx bench/allocation.ts list`). graphql-js's default resolver reads
 * the same property, so the answer is the same on either executor.
 *
 * Only fields marked with the `plainEdgeNode` extension (the relay option
 * `nodeFieldOptions` marks every edge's `node`), and never when the node
 * type primes its loader with resolved nodes (`cacheResolved`), which the
 * wrapper does. Listed just before the dataloader plugin, its `wrapResolve`
 * runs right after the dataloader's (Pothos wraps last-listed first), so
 * only that wrapper is dropped: the plugins listed before it (auth, errors,
 * validation) still wrap whatever it returns.
 */
import SchemaBuilder, { BasePlugin, unwrapOutputFieldType, type PothosOutputFieldConfig, type SchemaTypes } from '@pothos/core';
import { defaultFieldResolver, type GraphQLFieldResolver } from 'graphql';

/** The extension that marks a field as an edge's node, held as is. */
export const PLAIN_EDGE_NODE = 'plainEdgeNode';

export class PlainEdgeNodesPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override wrapResolve(resolver: GraphQLFieldResolver<unknown, Types['Context'], object>, fieldConfig: PothosOutputFieldConfig<Types>): GraphQLFieldResolver<unknown, Types['Context'], object> {
    if (fieldConfig.extensions?.[PLAIN_EDGE_NODE] !== true || fieldConfig.name !== 'node') return resolver;
    const nodeType = this.buildCache.getTypeConfig(unwrapOutputFieldType(fieldConfig.type));
    if (nodeType.extensions?.cacheResolved !== undefined) return resolver;
    return defaultFieldResolver as GraphQLFieldResolver<unknown, Types['Context'], object>;
  }
}

declare global {
  export namespace PothosSchemaTypes {
    export interface Plugins<Types extends SchemaTypes> {
      plainEdgeNodes: PlainEdgeNodesPlugin<Types>;
    }
  }
}

SchemaBuilder.registerPlugin('plainEdgeNodes', PlainEdgeNodesPlugin);

export default 'plainEdgeNodes' as const;
