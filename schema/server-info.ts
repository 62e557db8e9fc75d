/** `serverInfo`: what this server runs on, for operators and smoke tests. Open to anonymous callers. */
import packageJson from '../package.json' with { type: 'json' };
import { builder } from './builder.js';

/** The release this server is, from package.json (one place to bump it; see CHANGELOG.md); bundled into `npm start`'s build. */
const VERSION: string = packageJson.version;

const ServerInfo = builder.simpleObject('ServerInfo', {
  description: 'The server and the database dialect it runs on.',
  fields: (t) => ({
    version: t.string({ description: 'This server’s release (package.json `version`; changes are listed in CHANGELOG.md).' }),
    dialect: t.string({ description: '`postgres` or `sqlite`.' }),
    viewerDID: t.field({ type: 'DID', nullable: true, description: 'The DID the request was authenticated as, if any.' }),
    viewerIsService: t.boolean({ description: 'Whether the viewer is a configured service principal.' }),
    audience: t.string({ description: 'The audience (`aud`) a bearer token must name to be accepted here (`AUTH_AUDIENCE`): what a client minting its own tokens, such as the console, puts in them.' }),
  }),
});

builder.queryField('serverInfo', (t) =>
  t.field({
    type: ServerInfo,
    description: 'What this server runs on, and who the request was authenticated as. Open to anonymous callers.',
    resolve: (_root, _args, ctx) => ({
      version: VERSION,
      dialect: ctx.store.dialect,
      viewerDID: ctx.viewer.kind === 'anonymous' ? null : ctx.viewer.did,
      viewerIsService: ctx.viewer.kind === 'service',
      audience: ctx.audience,
    }),
  }),
);
