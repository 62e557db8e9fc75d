/** `serverInfo`: what this server runs on, for operators and smoke tests. */
import { builder } from './builder.js';


builder.queryType({
  fields: (t) => ({
    serverInfo: t.field({
      type: builder.objectRef<{ dialect: string }>('ServerInfo').implement({
        description: 'The server and the database dialect it runs on.',
        fields: (f) => ({
          dialect: f.exposeString('dialect', { description: '`postgres` or `sqlite`.' }),
        }),
      }),
      nullable: false,
      resolve: (_root, _args, ctx) => ({ dialect: ctx.store.dialect }),
    }),
  }),
});
