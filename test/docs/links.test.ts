/**
 * The documentation's links hold (issue 39 item 5: README.md became a front
 * page and its text moved to docs/): every relative link of README.md,
 * client/README.md and docs/*.md names a file that exists, and a link with an
 * anchor names a heading of that page (GitHub's slug of it).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PAGES = ['README.md', 'client/README.md', 'CHANGELOG.md', ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)];

/** The page's text without its fenced code blocks (a link in code is not a link). */
function prose(page: string): string {
  return readFileSync(join(ROOT, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors of a markdown page: one per heading, repeats numbered as GitHub does. */
function anchors(page: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const match of prose(page).matchAll(/^#{1,6} (.+)$/gm)) {
    const base = slug(match[1]!);
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    result.add(count === 0 ? base : `${base}-${count}`);
  }
  return result;
}

describe('documentation links', () => {
  it('the front page is a front page: at most 250 lines', () => {
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(250);
  });

  it.each(PAGES)('%s: every relative link names a file that exists, and every anchor a heading of it', (page) => {
    const broken: string[] = [];
    for (const match of prose(page).matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (/^[a-z]+:/i.test(target)) continue;
      const [file, anchor] = target.split('#') as [string, string | undefined];
      const path = file === '' ? page : normalize(join(dirname(page), file));
      if (relative(ROOT, join(ROOT, path)).startsWith('..') || !existsSync(join(ROOT, path))) {
        broken.push(`${target}: no file ${path}`);
        continue;
      }
      if (anchor !== undefined && path.endsWith('.md') && !anchors(path).has(anchor)) broken.push(`${target}: no heading #${anchor} in ${path}`);
    }
    expect(broken).toEqual([]);
  });
});
