/** The Pothos builder: plugins and scalars only; types live in their own files. */
import SchemaBuilder from '@pothos/core';
import type { GraphQLContext } from './context.js';

export const builder = new SchemaBuilder<{ Context: GraphQLContext }>({});
