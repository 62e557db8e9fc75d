/**
 * The bare-yoga baseline of the throughput benchmark: graphql-yoga over
 * `node:http` with one field, no plugins, no auth, no database.
 *
 *   PORT=4101 npx tsx bench/baselines/bare-yoga.ts
 */
import { createServer } from 'node:http';
import { createSchema, createYoga } from 'graphql-yoga';

const yoga = createYoga({
  schema: createSchema({ typeDefs: 'type Query { ok: Boolean }', resolvers: { Query: { ok: () => true } } }),
  logging: false,
});
const server = createServer(yoga);
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 4101), '127.0.0.1');
