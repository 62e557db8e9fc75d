/** Builds the executable schema from every type file. */
import { builder } from './builder.js';
import './errors.js';
import './server-info.js';
import './operation.js';

export const schema = builder.toSchema({ sortSchema: true });
