/**
 * Global ids given in arguments and inputs. Every id argument is declared
 * without a `for` type: a malformed id, or the id of another node type,
 * decodes to an id that loads nothing, so a mutation answers it with the
 * same `NotFoundError` as an unknown or invisible id (never a top-level
 * error), and a subscription on it never emits.
 */
import type DataLoader from 'dataloader';
import type { GraphQLContext } from '../resolvers/context.js';

/** A global id as the relay plugin decodes it. */
export interface DecodedNodeID {
  typename: string;
  id: string;
}

/** A loadable node type: its name and its per-request loader. */
interface LoadableNode<T> {
  name: string;
  getDataloader(ctx: GraphQLContext): DataLoader<string, T | null>;
}

/** The node key an id names if it is an id of `node`'s type; '' (which matches no row) otherwise. */
export function nodeKeyOf(node: { name: string }, id: DecodedNodeID): string {
  return id.typename === node.name ? id.id : '';
}

/** Loads the node an id names, through its loader; null when the id is of another type, unknown or invisible. */
export async function loadNode<T>(node: LoadableNode<T>, id: DecodedNodeID, ctx: GraphQLContext): Promise<T | null> {
  const nodeKey = nodeKeyOf(node, id);
  return nodeKey === '' ? null : node.getDataloader(ctx).load(nodeKey);
}
