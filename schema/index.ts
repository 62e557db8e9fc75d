/** Builds the executable schema from every type file. */
import { builder } from './builder.js';
import './errors.js';
import './connections.js';
import './server-info.js';
import './operation.js';
import './operation-writes.js';
import './operation-actions.js';
import './operation-enqueue.js';
import './operation-batches.js';
import './activity.js';
import './watch.js';
import './sync-state.js';
import './entity-trim.js';
import './observation.js';
import './sweep.js';
import './document.js';
import './pending-auth.js';
import './subscriptions.js';

export const schema = builder.toSchema({ sortSchema: true });

export { BULK_ROWS, COST_ARGUMENTS } from './complexity.js';
