/** What every connection has beyond Relay's edges and page info. */
import { builder } from './builder.js';
import { COUNT_CAP, type BoundedCount } from '../resolvers/pagination.js';

/**
 * A connection result as the resolvers build it: `totalCount` is computed only
 * when `totalCount` or `totalCountCapped` is selected, once for both.
 */
interface CountedConnection {
  totalCount?: () => Promise<BoundedCount | number>;
  countedOnce?: Promise<BoundedCount>;
}

async function countOf(connection: unknown): Promise<BoundedCount> {
  const counted = connection as CountedConnection;
  if (counted.totalCount === undefined) throw new Error('connection resolver did not provide totalCount');
  counted.countedOnce ??= counted.totalCount().then((count) => (typeof count === 'number' ? { count, capped: false } : count));
  return counted.countedOnce;
}

builder.globalConnectionField('totalCount', (t) =>
  t.int({
    description:
      `How many nodes match the filter, across all pages (counted only when selected). Operations are counted exactly from counters the database keeps; other connections count at most ${COUNT_CAP} matching rows (see \`totalCountCapped\`).`,
    resolve: async (connection) => (await countOf(connection)).count,
  }),
);

builder.globalConnectionField('totalCountCapped', (t) =>
  t.boolean({
    description:
      `True when counting stopped at the cap of ${COUNT_CAP} matching rows: \`totalCount\` is then a lower bound. Always false where the count is kept by counters (operations without a document filter).`,
    resolve: async (connection) => (await countOf(connection)).capped,
  }),
);
