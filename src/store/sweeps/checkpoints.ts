/** The partition checkpoint: the last receipt sequence committed. */
import type { StoreContext } from '../context.js';
import { getSweepCheckpointsByKeys } from './read.js';
import type { SweepCheckpoint, SweepKey } from './types.js';

/** Reads a partition's checkpoint, or null before its first commit. */
export async function getSweepCheckpoint(store: StoreContext, key: SweepKey): Promise<SweepCheckpoint | null> {
  return (await getSweepCheckpointsByKeys(store, [key]))[0] ?? null;
}
