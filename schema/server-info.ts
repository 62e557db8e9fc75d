/** `serverInfo`: what this server runs on, for operators and smoke tests. Open to anonymous callers. */
import { builder } from './builder.js';

const ServerInfo = builder.simpleObject('ServerInfo', {
  description: 'The server and the database dialect it runs on.',
  fields: (t) => ({
    dialect: t.string({ description: '`postgres` or `sqlite`.' }),
    viewerDID: t.field({ type: 'DID', nullable: true, description: 'The DID the request was authenticated as, if any.' }),
    viewerIsService: t.boolean({ description: 'Whether the viewer is a configured service principal.' }),
  }),
});

builder.queryField('serverInfo', (t) =>
  t.field({
    type: ServerInfo,
    resolve: (_root, _args, ctx) => ({
      dialect: ctx.store.dialect,
      viewerDID: ctx.viewer.kind === 'anonymous' ? null : ctx.viewer.did,
      viewerIsService: ctx.viewer.kind === 'service',
    }),
  }),
);
