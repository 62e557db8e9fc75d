/**
 * Where the project's files are. Found by walking up from this module to the
 * directory whose package.json is this server's, so the answer is the same
 * whether the server runs from its TypeScript sources (tsx, tests) or from
 * the bundle `npm start` builds (scripts/start.mjs), which lives elsewhere.
 */
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PACKAGE_NAME = 'connector-store-server';

/** The checkout's root: where package.json, console/ and client/ are. */
export const PROJECT_ROOT = findProjectRoot(dirname(fileURLToPath(import.meta.url)));

function findProjectRoot(from: string): string {
  for (let directory = from; ; directory = dirname(directory)) {
    const manifest = join(directory, 'package.json');
    if (existsSync(manifest) && (JSON.parse(readFileSync(manifest, 'utf8')) as { name?: unknown }).name === PACKAGE_NAME) return directory;
    if (dirname(directory) === directory) throw new Error(`no package.json of ${PACKAGE_NAME} above ${from}`);
  }
}
