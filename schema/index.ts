/** Builds the executable schema from every type file. */
import { builder } from './builder.js';
import './server-info.js';

export const schema = builder.toSchema({ sortSchema: true });
