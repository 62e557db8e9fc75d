/**
 * `npm ci` prints no EBADENGINE warning on the Node this project supports
 * (issue 12 item 9): every package the lockfile installs declares an engine
 * range that admits the running Node 20 (the overrides in package.json pin
 * the transitive ones whose newest releases ask for Node ≥ 22). A merge that
 * brings back a stale nested lock entry fails here, not in a warning nobody
 * reads.
 */
import { readFileSync } from 'node:fs';
import semver from 'semver';
import { expect, it } from 'vitest';

const lock = JSON.parse(readFileSync(new URL('../../package-lock.json', import.meta.url), 'utf8')) as {
  packages: Record<string, { version?: string; engines?: { node?: string } | string[]; dev?: boolean; optional?: boolean }>;
};
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };

it('every locked package admits the Node versions package.json supports (no EBADENGINE on npm ci)', () => {
  const refused: string[] = [];
  for (const [path, entry] of Object.entries(lock.packages)) {
    const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
    if (path === '' || range === undefined || entry.optional) continue;
    if (!semver.satisfies(process.version, range, { includePrerelease: true })) refused.push(`${path}@${entry.version} wants node ${range}`);
  }
  expect(refused).toEqual([]);
});

it('the Node running the tests is one package.json supports', () => {
  expect(semver.satisfies(process.version, pkg.engines.node)).toBe(true);
});
