/** What every connection has beyond Relay's edges and page info. */
import { builder } from './builder.js';

/** A connection result as the resolvers build it: `totalCount` is computed only when selected. */
interface CountedConnection {
  totalCount?: () => Promise<number>;
}

builder.globalConnectionField('totalCount', (t) =>
  t.int({
    description: 'How many nodes match the filter, across all pages (counted only when selected).',
    resolve: (connection) => {
      const count = (connection as CountedConnection).totalCount;
      if (count === undefined) throw new Error('connection resolver did not provide totalCount');
      return count();
    },
  }),
);
