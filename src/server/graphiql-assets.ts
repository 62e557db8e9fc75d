/**
 * GraphiQL served as a small page and cacheable assets (issue 22 item 8).
 *
 * `@graphql-yoga/render-graphiql` renders one 9 MB page: the editor's
 * script, its stylesheet, three Monaco workers (as strings turned into blob
 * URLs) and the favicon, all inline, and the page is `no-store` (it may
 * carry a development token), so every load moved 9 MB uncompressed
 * (2.6 s). Here the same installed package's parts become files under
 * {@link GRAPHIQL_ASSETS_PATH}, named by a hash of their content, gzipped
 * once, `Cache-Control: public, max-age=31536000, immutable`; the page
 * (`no-store` still) only links them and starts the editor with the
 * request's options. Nothing comes from a CDN: GraphiQL works offline.
 *
 * The package is loaded, hashed and compressed on the first GraphiQL page or
 * asset request (not at start: its strings hold ~70 MiB), once per process.
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';
import type { GraphiQLOptions, Plugin } from 'graphql-yoga';
import { serveFile, type ServedFile } from './console.js';

const gzip = promisify(gzipCallback);

/** Where the assets are served. */
export const GRAPHIQL_ASSETS_PATH = '/graphiql-assets';

interface GraphiQLBundle {
  /** By file name (`graphiql-<hash>.js`). */
  files: Map<string, ServedFile>;
  /** The URL of each part. */
  urls: { js: string; css: string; favicon: string; workers: Record<'editorWorkerService' | 'json' | 'graphql', string> };
}

let loading: Promise<GraphiQLBundle> | undefined;

/** The package's parts as hashed, gzipped files (loaded once). */
function bundle(): Promise<GraphiQLBundle> {
  loading ??= (async () => {
    const parts = await import('@graphql-yoga/render-graphiql/graphiql');
    const files = new Map<string, ServedFile>();
    const add = async (stem: string, extension: string, contentType: string, body: Buffer) => {
      const name = `${stem}-${createHash('sha256').update(body).digest('hex').slice(0, 16)}.${extension}`;
      const compressed = await gzip(body, { level: 9 });
      files.set(name, { contentType, body, gzip: compressed.length < body.length ? compressed : undefined, immutable: true });
      return `${GRAPHIQL_ASSETS_PATH}/${name}`;
    };
    const text = (value: string) => Buffer.from(value, 'utf8');
    const icon = /^data:([^;,]+);base64,(.*)$/s.exec(parts.favicon);
    const [js, css, favicon, editorWorkerService, json, graphql] = await Promise.all([
      add('graphiql', 'js', 'text/javascript; charset=utf-8', text(parts.js)),
      add('graphiql', 'css', 'text/css; charset=utf-8', text(parts.css)),
      icon === null ? Promise.resolve(parts.favicon) : add('favicon', 'ico', icon[1]!, Buffer.from(icon[2]!, 'base64')),
      add('editor.worker', 'js', 'text/javascript; charset=utf-8', text(parts.editorWorkerService)),
      add('json.worker', 'js', 'text/javascript; charset=utf-8', text(parts.jsonWorker)),
      add('graphql.worker', 'js', 'text/javascript; charset=utf-8', text(parts.graphqlWorker)),
    ]);
    return { files, urls: { js, css, favicon, workers: { editorWorkerService, json, graphql } } };
  })();
  return loading;
}

/** JSON that may sit inside a `<script>` element (no `</script>`, no HTML comment, no line separators). */
function scriptJSON(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026').replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029');
}

const escapeHTML = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** Yoga's `renderGraphiQL`: the page that links the assets and starts the editor with `options`. */
export async function renderGraphiQLPage(options?: GraphiQLOptions): Promise<string> {
  const { urls } = await bundle();
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>${escapeHTML(options?.title ?? 'GraphiQL')}</title>
    <link rel="icon" href="${escapeHTML(urls.favicon)}" />
    <link rel="stylesheet" href="${urls.css}" />
  </head>
  <body id="body" class="no-focus-outline">
    <noscript>You need to enable JavaScript to run this app.</noscript>
    <div id="root"></div>
    <script>
      const workers = ${scriptJSON(urls.workers)};
      self.MonacoEnvironment = { globalAPI: false, getWorkerUrl: (_moduleId, label) => workers[label] };
    </script>
    <script src="${urls.js}"></script>
    <script>
      YogaGraphiQL.renderYogaGraphiQL(document.querySelector('#root'), ${scriptJSON(options ?? {})});
    </script>
  </body>
</html>
`;
}

/** Serves the assets (GET and HEAD; an unknown name is 404). */
export function useGraphiQLAssets(): Plugin {
  return {
    // Synchronous until the path is the assets': every other request passes without a promise.
    onRequest: ({ request, url, endResponse, fetchAPI }) => {
      if (!url.pathname.startsWith(`${GRAPHIQL_ASSETS_PATH}/`)) return;
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        endResponse(new fetchAPI.Response(null, { status: 405, headers: { allow: 'GET, HEAD' } }));
        return;
      }
      return bundle().then(({ files }) => {
        const file = files.get(url.pathname.slice(GRAPHIQL_ASSETS_PATH.length + 1));
        if (file === undefined) {
          endResponse(new fetchAPI.Response('not found\n', { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' } }));
          return;
        }
        endResponse(serveFile(file, request, fetchAPI.Response));
      });
    },
  };
}
