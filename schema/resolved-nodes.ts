/**
 * Two Pothos plugins that take the dataloader plugin's wrapper off fields
 * whose resolver returns nodes (or promises of them), never ids.
 *
 * The dataloader plugin wraps every field whose type is loadable, to load
 * an id the resolver returns. On a field that resolves the node itself
 * (`ConnectorOperation.watch`, batched by its own loader) the wrapper only
 * chains a `then` on each row's promise, with a closure, a microtask and a
 * lookup of a loader the field never uses (issue 21: per row of the
 * dashboard list). A field marked with the `resolvesNodes` extension gets
 * back the resolver the dataloader plugin was given:
 * `captureResolvedNodes`, listed just after the dataloader plugin (Pothos
 * wraps last-listed first, so it runs just before it), records that
 * resolver; `restoreResolvedNodes`, listed just before it (so it runs just
 * after), returns it. Every other plugin's wrapper stays. A node type that
 * primes its loader with resolved nodes (`cacheResolved`) keeps the
 * wrapper, which does that.
 */
import SchemaBuilder, { BasePlugin, unwrapOutputFieldType, type PothosOutputFieldConfig, type SchemaTypes } from '@pothos/core';
import type { GraphQLFieldResolver } from 'graphql';

/** The extension that marks a field whose resolver returns nodes, never ids. */
export const RESOLVES_NODES = 'resolvesNodes';

type Resolver = GraphQLFieldResolver<unknown, object, object>;

/** Per field (Pothos passes every plugin the same config object): the resolver the dataloader plugin wrapped. */
const given = new WeakMap<object, Resolver>();

function applies<Types extends SchemaTypes>(plugin: BasePlugin<Types>, fieldConfig: PothosOutputFieldConfig<Types>): boolean {
  if (fieldConfig.extensions?.[RESOLVES_NODES] !== true) return false;
  const type = (plugin as unknown as { buildCache: { getTypeConfig(ref: unknown): { extensions?: Record<string, unknown> } } }).buildCache.getTypeConfig(unwrapOutputFieldType(fieldConfig.type));
  return type.extensions?.cacheResolved === undefined;
}

export class CaptureResolvedNodesPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override wrapResolve(resolver: GraphQLFieldResolver<unknown, Types['Context'], object>, fieldConfig: PothosOutputFieldConfig<Types>) {
    if (applies(this, fieldConfig)) given.set(fieldConfig, resolver as Resolver);
    return resolver;
  }
}

export class RestoreResolvedNodesPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override wrapResolve(resolver: GraphQLFieldResolver<unknown, Types['Context'], object>, fieldConfig: PothosOutputFieldConfig<Types>) {
    if (!applies(this, fieldConfig)) return resolver;
    return (given.get(fieldConfig) as GraphQLFieldResolver<unknown, Types['Context'], object> | undefined) ?? resolver;
  }
}

declare global {
  export namespace PothosSchemaTypes {
    export interface Plugins<Types extends SchemaTypes> {
      captureResolvedNodes: CaptureResolvedNodesPlugin<Types>;
      restoreResolvedNodes: RestoreResolvedNodesPlugin<Types>;
    }
  }
}

SchemaBuilder.registerPlugin('captureResolvedNodes', CaptureResolvedNodesPlugin);
SchemaBuilder.registerPlugin('restoreResolvedNodes', RestoreResolvedNodesPlugin);

export const captureResolvedNodes = 'captureResolvedNodes' as const;
export const restoreResolvedNodes = 'restoreResolvedNodes' as const;
